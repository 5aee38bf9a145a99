"""Fault 13: a database or broker outage answers a fast 503 with a code and Retry-After;
/readyz reports every part; no 5xx body carries internal error text."""

import time

from api.app import create_app
from api.auth import requires
from rcll.bootstrap import bootstrap
from rcll.dev import postgres
from tests.conftest import free_port

BANK = "outage-bank"
LEAKS = ("psycopg", "PostgreSQL", "connection", "Connection", "refused", "server", "127.0.0.1")


def _assert_503(resp, code: str, started: float, max_s: float = 8.0):
    elapsed = time.monotonic() - started
    assert resp.status_code == 503, (resp.status_code, resp.get_data(as_text=True))
    assert elapsed < max_s, f"took {elapsed:.1f}s"
    err = resp.get_json()["error"]
    assert err["code"] == code
    assert int(resp.headers["Retry-After"]) > 0
    text = resp.get_data(as_text=True)
    assert not any(leak in text for leak in LEAKS), text


def _mcp_calls(services, unit_id: str) -> list:
    """The MCP read tools as the server runs them (mcp_server.server's functions through
    mcp_server.results.run), each answering a tool result."""
    from mcp_server import results, server
    from rcll.access.principal import Principal

    rt = server.Runtime(services=services, retain=services.retain_service(lambda *_: None))
    me = Principal.unrestricted()
    return [
        lambda: results.run("memory_recall", lambda: server.recall(rt, me, BANK,
                                                                   {"query": "backups"})),
        lambda: results.run("memory_read", lambda: services.lifecycle.read(me, BANK, unit_id)),
        lambda: results.run("session_context", lambda: server.context(rt, me, BANK, None, 800)),
    ]


def test_database_outage_answers_fast_503(client, services, settings):
    r = client.post(f"/v1/default/banks/{BANK}/memories",
                    json={"items": [{"content": "Noa: backups run at 02:00."}], "async": False})
    assert r.status_code == 200
    r = client.post(f"/v1/default/banks/{BANK}/memories/recall", json={"query": "backups"})
    unit_id = r.get_json()["results"][0]["id"]
    op_id = client.get(f"/v1/default/banks/{BANK}/operations").get_json()["operations"][0]["id"]
    # fault 11: every read answers its 503 within about one pool timeout — a recall used to
    # wait for the pool twice (warm tier, then cold tier): 2 × RCLL_DB_POOL_TIMEOUT_S
    one_wait = settings.db_pool_timeout_s * 1.5
    reads = [
        lambda: client.post(f"/v1/default/banks/{BANK}/memories/recall", json={"query": "backups"}),
        lambda: client.get(f"/banks/{BANK}/recall?query=backups"),
        lambda: client.post(f"/v1/default/banks/{BANK}/memories/recall",
                            json={"query": "backups", "tiers": ["cold"]}),
        lambda: client.get(f"/banks/{BANK}/context"),
        lambda: client.get(f"/v1/default/banks/{BANK}/memories/{unit_id}"),
        lambda: client.get(f"/v1/default/banks/{BANK}/memories/list"),
        lambda: client.get(f"/v1/default/banks/{BANK}/documents"),
        lambda: client.get(f"/v1/default/banks/{BANK}/entities"),
        lambda: client.get(f"/v1/default/banks/{BANK}/stats"),
        lambda: client.get(f"/v1/default/banks/{BANK}/tags"),
        lambda: client.get(f"/v1/default/banks/{BANK}/operations/{op_id}"),
        lambda: client.get(f"/v1/default/banks/{BANK}/closets"),
        lambda: client.get(f"/tunnels?bank_id={BANK}"),
    ]
    mcp = _mcp_calls(services, unit_id)
    calls = [
        lambda: client.post(f"/v1/default/banks/{BANK}/memories/recall", json={"query": "backups"}),
        lambda: client.get(f"/banks/{BANK}/recall?query=backups"),
        lambda: client.post(f"/v1/default/banks/{BANK}/memories",
                            json={"items": [{"content": "Noa: restores are tested monthly."}]}),
        lambda: client.post(f"/v1/default/banks/{BANK}/memories",
                            json={"items": [{"content": "Noa: sync path."}], "async": False}),
        lambda: client.get(f"/v1/default/banks/{BANK}/operations"),
        lambda: client.get("/v1/default/banks"),
        lambda: client.get("/jobs"),
        lambda: client.delete("/v1/default/banks/nothing-here"),
    ]
    postgres.stop(settings, log=lambda *_: None)
    try:
        # the first call meets a pooled (now broken) connection, the rest an empty pool
        for call in reads:
            t = time.monotonic()
            _assert_503(call(), "database_unavailable", t, max_s=one_wait)
        for call in mcp:
            t = time.monotonic()
            res = call()
            elapsed = time.monotonic() - t
            assert res.is_error and res.structured_content["status"] == 503, res
            assert res.structured_content["error"]["code"] == "database_unavailable"
            assert elapsed < one_wait, f"took {elapsed:.1f}s"
        for call in calls:
            t = time.monotonic()
            _assert_503(call(), "database_unavailable", t, max_s=settings.db_pool_timeout_s + 3)
        t = time.monotonic()
        r = client.get("/readyz")
        assert r.status_code == 503 and time.monotonic() - t < 8
        body = r.get_json()
        assert body["ready"] is False and body["checks"]["database"]["ok"] is False
        assert body["checks"]["broker"]["ok"] is True
        assert not any(leak in r.get_data(as_text=True) for leak in LEAKS)
    finally:
        postgres.start(settings, log=lambda *_: None)
        services.pool.check()
    deadline = time.monotonic() + 30  # the pool reconnects by itself within seconds
    while True:
        r = client.post(f"/v1/default/banks/{BANK}/memories/recall", json={"query": "backups"})
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.status_code == 200 and r.get_json()["results"]


def _app_with_broker(services, settings, broker_url: str):
    svc = bootstrap(settings.model_copy(update={"redis_url": broker_url, "broker_url": None}))
    for part in ("pool", "read_pool", "embedder", "tokens"):  # share what is already loaded
        svc.__dict__[part] = getattr(services, part)
    return create_app(services=svc).test_client()


def test_readyz_reports_every_part(client, services, settings):
    r = client.get("/readyz")
    assert r.status_code == 200
    checks = r.get_json()["checks"]
    assert set(checks) == {"database", "broker", "embedder", "tokenizer", "llm",
                           "reranker", "hot_tier"}
    assert all(c["ok"] for c in checks.values())
    assert checks["hot_tier"] == {"ok": True, "activation": True, "breaker": None}
    assert checks["llm"] == {"provider": "none", "ok": True}  # chunk mode


def test_broker_outage_answers_fast_503(services, settings):
    dead = _app_with_broker(services, settings, f"redis://127.0.0.1:{free_port()}/0")
    t = time.monotonic()
    r = dead.get("/readyz")
    assert r.status_code == 503 and time.monotonic() - t < 8
    body = r.get_json()
    assert body["ready"] is False
    assert body["checks"]["broker"]["ok"] is False and body["checks"]["database"]["ok"] is True
    assert not any(leak in r.get_data(as_text=True) for leak in LEAKS)
    t = time.monotonic()
    r = dead.post("/v1/default/banks/broker-down/memories",
                  json={"items": [{"content": "Eli: the queue is down."}]})
    _assert_503(r, "queue_unavailable", t, max_s=15)


def test_unexpected_error_hides_internal_text(services):
    app = create_app(services=services, enqueue=lambda *_: None)

    @app.get("/boom")
    @requires("public")  # every route declares its role (api.auth); undeclared is refused
    def boom():
        raise RuntimeError("secret internals: password=hunter2")

    r = app.test_client().get("/boom")
    assert r.status_code == 500
    assert r.get_json()["error"]["code"] == "internal_error"
    assert "hunter2" not in r.get_data(as_text=True)
    assert "RuntimeError" not in r.get_data(as_text=True)
