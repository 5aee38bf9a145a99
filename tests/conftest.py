"""Test stack: a real PostgreSQL+pgvector (embedded wheel), a real Redis, a real Celery worker.

Everything is separate from the dev stack and from any other test run on the machine: each
session takes free ports, starts its own PostgreSQL (data in a fresh folder under
``.rcll-test/``) and its own Redis server, so two checkouts (or two runs of one) can test at
once. Recovery timings are short here so fault tests do not wait on production timeouts.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rcll.config import Settings
from rcll.dev import postgres, processes, stack
from rcll.dev import redis as dev_redis
from rcll.store import jobs, migrate

ROOT = Path(__file__).resolve().parents[1]
TEST_DB = "rcll_test"


@contextmanager
def serving(app, name: str = "test-http") -> Iterator[str]:
    """Serve the WSGI ``app`` over HTTP on a free loopback port, in a daemon thread named
    ``name``, for a real HTTP client (hindsight-client, httpx); yields its base URL
    ``http://127.0.0.1:<port>`` and shuts the server down after."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _settings(state_dir: Path) -> Settings:
    port = free_port()
    return Settings(
        state_dir=state_dir,
        pg_port=port,
        database_url=f"postgresql://rcll@127.0.0.1:{port}/{TEST_DB}",
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        broker_visibility_timeout_s=4,
        job_stale_after_s=4,
        job_queued_grace_s=2,
        job_sweep_interval_s=1,
        vector_index_min_units=40,
        vector_index_interval_s=3600,
        db_pool_timeout_s=2,
        api_port=free_port(),
        max_items_per_request=50,
        max_item_chars=5_000,
        metrics_port=free_port(),  # the worker's Prometheus exporter (tests/ops)
        auth=False,  # the suite tests features; tests/access builds its own app with auth on
        # the suite's job, worker and fault tests retain on Hindsight's path and follow the
        # queued job; tests/api/test_hindsight_kinds.py turns Hindsight's sync default on
        hindsight_sync_retain=False,
        # tests/api/test_webhooks.py: receivers on 127.0.0.1, retries a second apart
        webhook_allow_private_networks=True,
        webhook_retry_delays_s="1,1",
        webhook_dispatch_interval_s=0.5,
    )


@pytest.fixture(scope="session")
def settings() -> Settings:
    base = ROOT / ".rcll-test"
    base.mkdir(exist_ok=True)
    state_dir = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    os.chmod(state_dir, 0o755)  # the PostgreSQL server user must reach its data folder
    s = _settings(state_dir)
    postgres.start(s, log=lambda *_: None)
    postgres.create_database(s, TEST_DB, drop=True)
    migrate.upgrade(s)
    stack.grant_reader(s)
    assert dev_redis.ensure(s, log=lambda *_: None), "test Redis port was taken"
    yield s
    processes.stop(s.run_dir.resolve(), "worker")
    processes.stop(s.run_dir.resolve(), "beat")
    postgres.stop(s, log=lambda *_: None)
    dev_redis.stop(s)
    shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def services(settings):
    from rcll.bootstrap import bootstrap

    svc = bootstrap(settings)
    yield svc
    svc.close()


@pytest.fixture(scope="session")
def worker(settings):
    """A real Celery worker process consuming every queue, and a real beat process scheduling
    the recovery sweep; stopped at the end."""
    stack.start_worker(settings, name="worker", log=lambda *_: None)
    stack.start_beat(settings, log=lambda *_: None)
    yield settings
    processes.stop(settings.run_dir.resolve(), "worker")
    processes.stop(settings.run_dir.resolve(), "beat")


@pytest.fixture(scope="session")
def app(services):
    from api.app import create_app

    services.embedder.get()  # load once, not inside a timed request
    return create_app(services=services)


@pytest.fixture()
def client(app):
    return app.test_client()


def wait_job(client, bank_id: str, op_id: str, timeout_s: float = 120) -> dict:
    """Poll an operation until it ends; fail the test on timeout. A 503 (the database is away
    in an outage test) is polled again, as a client honouring ``Retry-After`` would."""
    deadline = time.monotonic() + timeout_s
    op = None
    while time.monotonic() < deadline:
        resp = client.get(f"/v1/default/banks/{bank_id}/operations/{op_id}")
        if resp.status_code != 503:
            op = resp.get_json()
            assert resp.status_code == 200, op
            if op["state"] in jobs.TERMINAL:
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
