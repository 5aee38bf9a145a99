"""An API with authentication ON over the session's database (the suite's app runs with
auth off), the bootstrap admin key, and helpers to create members, keys and grants."""

from __future__ import annotations

import time

import pytest

from rcll.bootstrap import Services

ADMIN_KEY = "test-admin-key-0123456789abcdef"
KEY_SECRET = "test-key-secret-0123456789abcdef0123456789"
TABLES = ("members", "api_keys", "bank_grants", "audit_log", "memory_banks", "memory_units",
          "jobs", "documents")


def share_models(svc: Services, base: Services) -> Services:
    """Give ``svc`` the session's loaded models (no second copy of the embedder)."""
    base.embedder.get()
    for name in ("embedder", "tokens", "reranker", "query_cache"):
        svc.__dict__[name] = getattr(base, name)
    return svc


@pytest.fixture(scope="session")
def auth_settings(settings):
    return settings.model_copy(update={"auth": True, "admin_key": ADMIN_KEY,
                                       "key_secret": KEY_SECRET})


@pytest.fixture(scope="session")
def auth_services(auth_settings, services):
    svc = share_models(Services(auth_settings), services)
    yield svc
    svc.close()


@pytest.fixture(scope="session")
def enqueued():
    """Task names the auth app 'sent' (no worker needed: jobs stay queued)."""
    return []


@pytest.fixture(scope="session")
def auth_app(auth_services, enqueued):
    from api.app import create_app

    return create_app(services=auth_services, enqueue=lambda task, job: enqueued.append(job))


@pytest.fixture()
def api(auth_app):
    return auth_app.test_client()


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


ADMIN = bearer(ADMIN_KEY)


def counts(svc: Services, drain_s: float = 60) -> dict:
    """Row counts of every table the access and write routes touch, read once no job of any
    test is active (queued or running and touched in the last 30 s; at most ``drain_s``): an
    earlier test's async job still writing units would change these global counts under a
    test that asserts a refusal stored nothing."""
    deadline = time.monotonic() + drain_s
    with svc.pool.connection() as conn:
        while conn.execute("SELECT count(*) AS n FROM jobs WHERE state IN ('queued', 'running') "
                           "AND updated_at > now() - interval '30 seconds'"
                           ).fetchone()["n"] and time.monotonic() < deadline:
            time.sleep(0.2)
        return {t: conn.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"] for t in TABLES}


def make_member(api, member_id: str, bank_id: str | None = None, role: str | None = None,
                purposes: list[str] | None = None, **fields) -> str:
    """Create ``member_id`` (and its grant on ``bank_id``) with the admin key; its new key."""
    r = api.post("/members", json={"member_id": member_id, **fields}, headers=ADMIN)
    assert r.status_code == 201, r.get_json()
    if bank_id:
        body = {"role": role} | ({"purposes": purposes} if purposes else {})
        r = api.put(f"/banks/{bank_id}/grants/{member_id}", json=body, headers=ADMIN)
        assert r.status_code == 200, r.get_json()
    r = api.post(f"/members/{member_id}/keys", json={"label": "test"}, headers=ADMIN)
    assert r.status_code == 201, r.get_json()
    return r.get_json()["key"]
