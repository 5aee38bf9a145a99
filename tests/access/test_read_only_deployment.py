"""RCLL_READ_ONLY=on: the API connects with the SELECT-only role, answers every write or
admin route with 403 read_only_deployment before touching anything, and serves recall and
read (with auth on, keys resolved through the SELECT-only role)."""

from __future__ import annotations

import pytest

from api.auth import declared_role, refused_when_read_only
from rcll.bootstrap import Services
from rcll.dev.postgres import READER_ROLE

from .conftest import ADMIN, bearer, counts, make_member
from .test_fail_closed import concrete

BANK = "ro-deploy-bank"


@pytest.fixture(scope="module")
def ro_app(auth_settings, services, api):
    from api.app import create_app

    from .conftest import share_models

    # data written through the read-write auth app first
    r = api.post(f"/v1/default/banks/{BANK}/memories", headers=ADMIN, json={"async": False,
                 "items": [{"content": "Dana: the nightly backup runs at 02:00 UTC.",
                            "document_id": "backup"}]})
    assert r.status_code == 200
    reader = f"postgresql://{READER_ROLE}@127.0.0.1:{auth_settings.pg_port}/rcll_test"
    s = auth_settings.model_copy(update={
        "read_only": True, "activation": False, "readonly_database_url": reader,
        # no LLM key anywhere: a read-only deployment never calls a model
        "llm_provider": "litellm", "llm_model": "openai/gpt-4o-mini"})
    svc = share_models(Services(s), services)
    sent = []
    app = create_app(services=svc, enqueue=lambda task, job: sent.append(job))
    app.extensions["test_sent"] = sent
    yield app
    svc.close()


@pytest.fixture(scope="module")
def api(auth_app):
    return auth_app.test_client()


def test_read_only_app_connects_select_only(ro_app):
    svc = ro_app.extensions["rcll"]
    with svc.pool.connection() as conn:
        assert conn.execute("SELECT current_user AS u").fetchone()["u"] == READER_ROLE
    assert svc.read_pool is svc.pool
    assert svc.settings.activation is False


def test_every_write_route_refused_and_nothing_changed(ro_app, auth_services):
    client = ro_app.test_client()
    before = counts(auth_services)
    refused = []
    for rule in ro_app.url_map.iter_rules():
        role = declared_role(ro_app.view_functions[rule.endpoint])
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            # reflect is a read-side POST but calls an LLM (api.auth.uses_llm): refused
            # like a write route (spec §7: no LLM key there)
            if not refused_when_read_only(role, method, ro_app.view_functions[rule.endpoint]):
                # the one read-side POST: recall
                assert method == "GET" or rule.endpoint == "recall.recall_post", rule.rule
                continue
            path = concrete(rule).replace("x-bank_id", BANK)
            for headers in ({}, ADMIN):
                r = client.open(path, method=method, json={"items": [{"content": "x"}],
                                                           "member_id": "nope", "role": "read"},
                                headers=headers)
                if role == "session":  # a web screen answers its browser with an HTML page
                    assert r.status_code == 403, rule.rule
                    assert "read_only_deployment" in r.text and "read-only" in r.text
                    continue
                err = r.get_json()["error"]
                assert (r.status_code, err["code"]) == (403, "read_only_deployment"), rule.rule
                assert "read-only" in err["message"]
            refused.append(f"{method} {rule.rule}")
    assert counts(auth_services) == before
    assert ro_app.extensions["test_sent"] == []
    # the write routes of this branch: retain x2, bank delete, dedup scan/decide, closets,
    # feedback, entity merge/split, member/key/grant management, audit
    assert len(refused) >= 19  # this branch; more as the verbs and tunnels land
    assert "POST /v1/default/banks/<bank_id>/memories" in refused
    assert "DELETE /v1/default/banks/<bank_id>" in refused
    assert "POST /members" in refused and "PUT /banks/<bank_id>/grants/<member_id>" in refused
    assert "DELETE /keys/<key_id>" in refused


def test_key_revocation_refused(ro_app, api):
    """``DELETE /keys/{id}`` is a ``member`` route (a member revokes its own key) and a
    write: refused in a read-only deployment; the key still works."""
    key = make_member(api, "ro-revoker")
    kid = api.get("/members/ro-revoker/keys", headers=ADMIN).get_json()["keys"][0]["key_id"]
    r = ro_app.test_client().delete(f"/keys/{kid}", headers=bearer(key))
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "read_only_deployment"
    assert api.get("/me", headers=bearer(key)).status_code == 200


def test_recall_and_read_work(ro_app, api):
    key = make_member(api, "ro-reader", BANK, "read")
    client = ro_app.test_client()
    r = client.post(f"/v1/default/banks/{BANK}/memories/recall",
                    json={"query": "when does the backup run?"}, headers=bearer(key))
    assert r.status_code == 200, r.get_json()
    top = r.get_json()["results"][0]
    assert top["document_id"] == "backup"
    r = client.get(f"/v1/default/banks/{BANK}/memories/{top['id']}", headers=bearer(key))
    assert r.status_code == 200 and "backup" in r.get_json()["text"]
    assert client.get("/me", headers=bearer(key)).get_json()["member_id"] == "ro-reader"
    r = client.get(f"/banks/{BANK}/recall?query=backup", headers=bearer("rcll_0123456789ab_"
                                                                       + "x" * 43))
    assert r.status_code == 401
