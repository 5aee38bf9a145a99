"""Test stack: a real PostgreSQL+pgvector (embedded wheel), a real Redis, a real Celery worker.

Everything is separate from the dev stack: its own state folder, port, database and Redis db.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from rcll.config import Settings
from rcll.dev import postgres, processes, stack
from rcll.dev import redis as dev_redis
from rcll.store import migrate

ROOT = Path(__file__).resolve().parents[1]
TEST_DB = "rcll_test"


def _settings() -> Settings:
    port = 54339
    return Settings(
        state_dir=ROOT / ".rcll-test",
        pg_port=port,
        database_url=f"postgresql://rcll@127.0.0.1:{port}/{TEST_DB}",
        redis_url="redis://127.0.0.1:6379/15",
        broker_visibility_timeout_s=4,
        api_port=8766,
        max_items_per_request=50,
        max_item_chars=5_000,
    )


@pytest.fixture(scope="session")
def settings() -> Settings:
    s = _settings()
    postgres.start(s, log=lambda *_: None)
    postgres.create_database(s, TEST_DB, drop=True)
    migrate.upgrade(s)
    stack.grant_reader(s)
    dev_redis.ensure(s, log=lambda *_: None)
    redis.Redis.from_url(s.redis_url).flushdb()
    yield s
    postgres.stop(s, log=lambda *_: None)
    dev_redis.stop(s)


@pytest.fixture(scope="session")
def services(settings):
    from rcll.bootstrap import bootstrap

    svc = bootstrap(settings)
    yield svc
    svc.close()


@pytest.fixture(scope="session")
def worker(settings):
    """A real Celery worker process consuming every queue; stopped at the end."""
    stack.start_worker(settings, name="worker", log=lambda *_: None)
    yield settings
    processes.stop(settings.run_dir.resolve(), "worker")


@pytest.fixture(scope="session")
def app(services):
    from api.app import create_app

    services.embedder.get()  # load once, not inside a timed request
    return create_app(services=services)


@pytest.fixture()
def client(app):
    return app.test_client()


def wait_job(client, bank_id: str, op_id: str, timeout_s: float = 120) -> dict:
    """Poll an operation until it ends; fail the test on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        op = client.get(f"/v1/default/banks/{bank_id}/operations/{op_id}").get_json()
        if op["status"] in ("succeeded", "failed", "partial"):
            return op
        time.sleep(0.2)
    raise AssertionError(f"operation {op_id} did not finish: {op}")


def db_counts(services, bank_id: str) -> dict:
    with services.pool.connection() as conn:
        return conn.execute(
            """SELECT (SELECT count(*) FROM memory_units WHERE bank_id = %(b)s) AS units,
                      (SELECT count(*) FROM memory_embeddings WHERE bank_id = %(b)s) AS embeddings,
                      (SELECT count(*) FROM documents WHERE bank_id = %(b)s) AS documents,
                      (SELECT count(*) FROM jobs WHERE bank_id = %(b)s) AS jobs""",
            {"b": bank_id}).fetchone()
