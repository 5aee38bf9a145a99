"""Issue 25: webhooks (Hindsight's ``…/webhooks``) on the real stack — PostgreSQL, Redis, the
Celery worker and beat, and real HTTP receivers on 127.0.0.1 (threads of this process).

A retain that succeeds and one that fails each deliver a ``retain.completed`` event signed
with ``X-Hindsight-Signature: sha256=<HMAC-SHA256(body)>``, checked here against the secret
the creation answer showed; a failing receiver is retried after each delay of
``RCLL_WEBHOOK_RETRY_DELAYS_S`` (``1,1`` in the test settings) and every attempt is in the
delivery log; the outbox row commits or rolls back with the job's end; bad input is a 4xx
with a code; the real ``hindsight-client`` 1.1.0 drives the family over HTTP.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from werkzeug.serving import make_server

from rcll.access.principal import Principal
from rcll.bootstrap import Services
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from rcll.store import jobs
from rcll.webhooks import delivery
from tests.conftest import free_port, wait_job

hs_models = pytest.importorskip("hindsight_client_api.models")


class Receiver:
    """An HTTP server on 127.0.0.1 that records every request and answers each path with
    the next status of its script (the last one repeats; default 200)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.scripts: dict[str, list[int]] = {}
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the http.server name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                path = self.path.split("?", 1)[0]
                with owner.lock:
                    owner.requests.append({"path": self.path, "headers": dict(self.headers),
                                           "body": body, "at": time.monotonic()})
                    script = owner.scripts.get(path) or [200]
                    status = script.pop(0) if len(script) > 1 else script[0]
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(f"receiver said {status}".encode())

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       name="webhook-receiver")
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    def at(self, path: str) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["path"].split("?", 1)[0] == path]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()


def _signed(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _fresh_bank(client, bank: str) -> None:
    client.delete(f"/v1/default/banks/{bank}")
    assert client.put(f"/v1/default/banks/{bank}", json={}).status_code in (200, 201)


def _hook(client, bank: str, url: str, **fields) -> dict:
    r = client.post(f"/v1/default/banks/{bank}/webhooks", json={"url": url, **fields})
    assert r.status_code == 201, r.get_json()
    return r.get_json()


def _deliveries(client, bank: str, hook_id: str, until, timeout_s: float = 60) -> list[dict]:
    """The webhook's deliveries once ``until(items)`` holds (polled; fails on timeout)."""
    deadline = time.monotonic() + timeout_s
    items: list[dict] = []
    while time.monotonic() < deadline:
        r = client.get(f"/v1/default/banks/{bank}/webhooks/{hook_id}/deliveries")
        assert r.status_code == 200, r.get_json()
        items = r.get_json()["items"]
        if until(items):
            return items
        time.sleep(0.2)
    raise AssertionError(f"deliveries never got there: {items}")


def _broken_pdf(client, bank: str) -> str:
    r = client.post(f"/v1/default/banks/{bank}/files/retain",
                    data={"files": [(io.BytesIO(b"%PDF-1.4 not really a pdf"), "broken.pdf")]},
                    content_type="multipart/form-data")
    assert r.status_code == 200, r.get_json()
    return r.get_json()["operation_ids"][0]


def test_retain_succeeded_and_failed_both_deliver_signed_events(client, worker, receiver):
    bank = "wh-signed"
    _fresh_bank(client, bank)
    made = _hook(client, bank, receiver.url("/signed"))
    secret = made["secret"]
    assert secret.startswith("whsec_") and len(secret) > 40
    assert made["event_types"] == ["retain.completed", "consolidation.completed"]
    hs_models.WebhookResponse.from_dict(made)  # Hindsight's model reads the answer
    listed = client.get(f"/v1/default/banks/{bank}/webhooks").get_json()
    assert listed["total"] == 1 and listed["items"][0]["secret"] is None  # shown once
    hs_models.WebhookListResponse.from_dict(listed)

    r = client.post(f"/v1/default/banks/{bank}/memories",
                    json={"items": [{"content": "Wren: the pump house key is in the blue box.",
                                     "document_id": "keys"}], "async": True})
    ok_op = r.get_json()["operation_id"]
    assert wait_job(client, bank, ok_op)["state"] == "succeeded"
    bad_op = _broken_pdf(client, bank)
    assert wait_job(client, bank, bad_op)["state"] == "failed"

    items = _deliveries(client, bank, made["id"],
                        lambda xs: len(xs) == 2 and all(x["status"] == "completed" for x in xs))
    got = {json.loads(r["body"])["operation_id"]: r for r in receiver.at("/signed")}
    assert set(got) == {ok_op, bad_op}
    for op_id, status, state in ((ok_op, "completed", "succeeded"), (bad_op, "failed", "failed")):
        req = got[op_id]
        assert req["headers"]["X-Hindsight-Signature"] == _signed(secret, req["body"])
        assert req["headers"]["X-Hindsight-Event"] == "retain.completed"
        assert req["headers"]["Content-Type"] == "application/json"
        assert req["headers"]["X-RCLL-Attempt"] == "1"
        event = json.loads(req["body"])
        assert event["event"] == "retain.completed" and event["bank_id"] == bank
        assert event["status"] == status and event["data"] == {"state": state,
                                                               "kind": "retain"}
        assert datetime.fromisoformat(event["timestamp"]).tzinfo is not None
        # nothing about the items: the receiver reads the operation with its own key
        assert "keys" not in req["body"].decode() and "broken.pdf" not in req["body"].decode()
    # a signature made with another secret does not match
    any_req = got[ok_op]
    assert any_req["headers"]["X-Hindsight-Signature"] != _signed("other", any_req["body"])

    page = client.get(f"/v1/default/banks/{bank}/webhooks/{made['id']}/deliveries").get_json()
    hs_models.WebhookDeliveryListResponse.from_dict(page)
    for d in items:
        assert d["attempts"] == 1 and d["last_response_status"] == 200
        assert d["last_response_body"] == "receiver said 200" and d["last_error"] is None
        assert d["next_retry_at"] is None and d["event_type"] == "retain.completed"
        [a] = d["attempt_log"]
        assert a["attempt"] == 1 and a["status_code"] == 200 and a["error"] is None
        assert a["duration_ms"] > 0 and a["url"] == receiver.url("/signed")
    assert {d["operation_id"] for d in items} == {ok_op, bad_op}
    assert {d["event_id"] for d in items} == {json.loads(r["body"])["event_id"]
                                              for r in got.values()}


def test_a_failing_receiver_is_retried_with_backoff_and_every_attempt_logged(
        client, worker, receiver, settings):
    bank = "wh-retry"
    _fresh_bank(client, bank)
    receiver.scripts["/flaky"] = [500, 502, 200]
    receiver.scripts["/down"] = [503]
    flaky = _hook(client, bank, receiver.url("/flaky"), event_types=["retain.completed"],
                  http_config={"headers": {"X-Team": "kestrel"}, "params": {"src": "rcll"},
                               "timeout_seconds": 5})
    down = _hook(client, bank, receiver.url("/down"), secret="a secret of our own")
    refused = _hook(client, bank, f"http://127.0.0.1:{free_port()}/nobody")  # nothing listens
    other = _hook(client, bank, receiver.url("/consolidation"),
                  event_types=["consolidation.completed"])
    off = _hook(client, bank, receiver.url("/off"), enabled=False)
    assert down["secret"] == "a secret of our own"

    r = client.post(f"/v1/default/banks/{bank}/memories",
                    json={"items": [{"content": "Wren: the sluice opens at high tide."}],
                          "async": True})
    assert wait_job(client, bank, r.get_json()["operation_id"])["state"] == "succeeded"
    retries = len(settings.webhook_retry_delays)  # 2: three attempts in all

    [d] = _deliveries(client, bank, flaky["id"], lambda xs: xs and xs[0]["status"] != "pending")
    assert d["status"] == "completed" and d["attempts"] == 3
    assert [a["status_code"] for a in d["attempt_log"]] == [500, 502, 200]
    assert [a["error"] for a in d["attempt_log"]] == ["HTTP 500", "HTTP 502", None]
    calls = receiver.at("/flaky")
    assert [c["headers"]["X-RCLL-Attempt"] for c in calls] == ["1", "2", "3"]
    assert len({c["body"] for c in calls}) == 1  # the same bytes every attempt
    assert all(c["headers"]["X-Team"] == "kestrel" and c["path"].endswith("?src=rcll")
               for c in calls)
    gaps = [b["at"] - a["at"] for a, b in zip(calls, calls[1:], strict=False)]
    assert all(g >= settings.webhook_retry_delays[0] * 0.9 for g in gaps), gaps

    [d] = _deliveries(client, bank, down["id"], lambda xs: xs and xs[0]["status"] == "failed")
    assert d["attempts"] == retries + 1 and d["last_response_status"] == 503
    assert d["last_error"] == "HTTP 503" and d["next_retry_at"] is None
    assert [a["status_code"] for a in d["attempt_log"]] == [503] * (retries + 1)
    assert all(c["headers"]["X-Hindsight-Signature"] == _signed("a secret of our own",
                                                                 c["body"])
               for c in receiver.at("/down"))

    [d] = _deliveries(client, bank, refused["id"], lambda xs: xs and xs[0]["status"] == "failed")
    assert d["attempts"] == retries + 1 and d["last_response_status"] is None
    assert all(a["status_code"] is None and a["error"].startswith("ConnectError")
               for a in d["attempt_log"])
    # not subscribed to this event, or disabled: nothing queued, nothing sent
    for hook in (other, off):
        r = client.get(f"/v1/default/banks/{bank}/webhooks/{hook['id']}/deliveries")
        assert r.get_json() == {"items": [], "next_cursor": None}
    assert receiver.at("/consolidation") == [] and receiver.at("/off") == []


def test_the_outbox_row_commits_with_the_jobs_end(client, services):
    bank = "wh-outbox"
    _fresh_bank(client, bank)
    hook = _hook(client, bank, "https://hooks.example.com/rcll")
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Rolled back.")])
    job_id = str(job["id"])

    def outbox() -> int:
        with services.pool.connection() as conn:
            return conn.execute("SELECT count(*) AS n FROM webhook_deliveries WHERE "
                                "operation_id = %s", (job_id,)).fetchone()["n"]

    with services.pool.connection() as conn:
        conn.execute("BEGIN")
        jobs.finish(conn, job_id, "succeeded", {})
        assert conn.execute("SELECT count(*) AS n FROM webhook_deliveries WHERE "
                            "operation_id = %s", (job_id,)).fetchone()["n"] == 1
        conn.rollback()  # the job's end did not happen: neither did its event
    assert outbox() == 0
    with services.pool.connection() as conn:
        jobs.finish(conn, job_id, "succeeded", {})
    assert outbox() == 1
    with services.pool.connection() as conn:
        jobs.finish(conn, job_id, "failed", {}, "a second end")  # already ended: no new event
    assert outbox() == 1
    # an ended delivery leaves the log after the retention time (the dispatcher prunes)
    from rcll.store import webhooks as store

    with services.pool.connection() as conn:
        conn.execute("UPDATE webhook_deliveries SET status = 'completed', updated_at = now() "
                     "- interval '2 days' WHERE operation_id = %s", (job_id,))
        assert store.prune(conn, older_than_days=3) == 0
    assert outbox() == 1
    # deleting the webhook takes its deliveries with it
    r = client.delete(f"/v1/default/banks/{bank}/webhooks/{hook['id']}")
    assert r.get_json() == {"success": True, "message": f"webhook {hook['id']} deleted",
                            "deleted_count": 1}
    assert outbox() == 0
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Pruned.")])
    hook = _hook(client, bank, "https://hooks.example.com/rcll")
    with services.pool.connection() as conn:
        conn.execute("BEGIN")  # one transaction: the beat's dispatcher never sees it pending
        jobs.finish(conn, str(job["id"]), "succeeded", {})
        conn.execute("UPDATE webhook_deliveries SET status = 'failed', updated_at = now() "
                     "- interval '2 days' WHERE webhook_id = %s", (hook["id"],))
        assert store.prune(conn, older_than_days=1) == 1
        conn.commit()


def test_a_host_that_resolves_to_a_private_address_is_refused_at_delivery(client, services,
                                                                          receiver):
    bank = "wh-private"
    _fresh_bank(client, bank)
    hook = _hook(client, bank, receiver.url("/private").replace("127.0.0.1", "localhost"))
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Private.")])
        # ended and claimed by this test (the beat's dispatcher sees nothing due)
        jobs.finish(conn, str(job["id"]), "succeeded", {})
        row = conn.execute("""UPDATE webhook_deliveries SET claim = gen_random_uuid(),
                                     next_attempt_at = now() + interval '1 hour'
                              WHERE webhook_id = %s RETURNING id::text, claim::text""",
                           (hook["id"],)).fetchone()
    policy = delivery.DeliveryPolicy(retry_delays_s=(), timeout_s=2, allow_private=False)
    out = delivery.deliver(services.pool, policy, row["id"], row["claim"])
    assert out["status"] == "failed" and out["status_code"] is None
    assert out["error"].startswith("refused: the host resolves to 127.0.0.1")
    assert receiver.at("/private") == []
    assert delivery.deliver(services.pool, policy, row["id"], row["claim"]) is None  # spent


def test_bad_input_is_a_4xx_with_a_code(client, services, settings):
    bank = "wh-bad"
    _fresh_bank(client, bank)
    base = f"/v1/default/banks/{bank}/webhooks"
    cases = [
        ({"url": "ftp://example.com/x"}, "invalid_request"),
        ({"url": "javascript:alert(1)"}, "invalid_request"),
        ({"url": "http://user:pw@example.com/"}, "invalid_request"),
        ({"url": "http:///nohost"}, "invalid_request"),
        ({"url": "http://example.com:99999/"}, "invalid_request"),
        ({"url": "http://exa mple.com/"}, "invalid_request"),
        ({"url": "https://example.com/", "event_types": ["memory_defense.triggered"]},
         "unsupported_hindsight_value"),
        ({"url": "https://example.com/", "event_types": ["nope"]}, "invalid_request"),
        ({"url": "https://example.com/", "event_types": []}, "invalid_request"),
        ({"url": "https://example.com/", "http_config": {"method": "GET"}},
         "unsupported_hindsight_value"),
        ({"url": "https://example.com/", "http_config": {"method": "PUT"}}, "invalid_request"),
        ({"url": "https://example.com/",
          "http_config": {"headers": {"X-Hindsight-Signature": "forged"}}}, "invalid_request"),
        ({"url": "https://example.com/", "http_config": {"headers": {"Bad Name": "x"}}},
         "invalid_request"),
        ({"url": "https://example.com/", "http_config": {"headers": {"X-A": "a\r\nB: c"}}},
         "invalid_request"),
        ({"url": "https://example.com/", "http_config": {"timeout_seconds": 0}},
         "invalid_request"),
        ({"url": "https://example.com/", "enabled": "yes"}, "invalid_request"),
        ({"url": "https://example.com/", "colour": "red"}, "invalid_request"),
        ({"url": "https://example.com/", "secret": ""}, "invalid_request"),
    ]
    for body, code in cases:
        r = client.post(base, json=body)
        assert (r.status_code, r.get_json()["error"]["code"]) == (400, code), body
    r = client.post("/v1/default/banks/wh-no-such-bank/webhooks", json={"url": "https://a.b/"})
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"
    for wid in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        for method, kw in (("patch", {"json": {"enabled": False}}), ("delete", {})):
            r = getattr(client, method)(f"{base}/{wid}", **kw)
            assert r.status_code == 404 and r.get_json()["error"]["code"] == "webhook_not_found"
    hook = _hook(client, bank, "https://hooks.example.com/a")
    r = client.get(f"{base}/{hook['id']}/deliveries?cursor=garbage")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_cursor"
    r = client.get(f"{base}/{hook['id']}/deliveries?limit=500")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_paging"
    # a private address is refused when registered unless the deployment allows it
    strict = Services(settings.model_copy(update={"webhook_allow_private_networks": False}))
    strict.__dict__["pool"] = services.pool  # the session's pool, no second one

    for url in ("http://127.0.0.1:8080/", "http://localhost/x", "http://[::1]/",
                "http://169.254.169.254/latest/meta-data", "http://10.1.2.3/",
                "http://api.localhost/"):
        with pytest.raises(Exception) as err:
            strict.webhooks.create(Principal.unrestricted(), bank, url)
        assert getattr(err.value, "code", None) == "invalid_request", url
    assert strict.webhooks.create(Principal.unrestricted(), bank,
                                  "https://hooks.example.com/b")["id"]


def test_patch_changes_only_what_is_given(client):
    bank = "wh-patch"
    _fresh_bank(client, bank)
    hook = _hook(client, bank, "https://hooks.example.com/a", event_types=["retain.completed"])
    base = f"/v1/default/banks/{bank}/webhooks/{hook['id']}"
    r = client.patch(base, json={"enabled": False, "url": None,
                                 "http_config": {"headers": {"X-Team": "kestrel"}}})
    assert r.status_code == 200, r.get_json()
    out = r.get_json()
    assert out["enabled"] is False and out["url"] == "https://hooks.example.com/a"
    assert out["event_types"] == ["retain.completed"] and out["secret"] is None
    assert out["http_config"] == {"method": "POST", "headers": {"X-Team": "kestrel"},
                                  "params": {}}
    r = client.patch(base, json={"url": "https://hooks.example.com/b", "secret": "rotated"})
    assert r.get_json()["url"] == "https://hooks.example.com/b"
    with client.application.extensions["rcll"].pool.connection() as conn:
        row = conn.execute("SELECT secret FROM webhooks WHERE id = %s", (hook["id"],)).fetchone()
    assert row["secret"] == "rotated"
    audit = client.get(f"/banks/{bank}/audit").get_json()
    actions = [e["action"] for e in audit.get("entries", [])]
    assert actions.count("webhook.update") == 2 and "webhook.create" in actions
    assert not any("rotated" in json.dumps(e) for e in audit.get("entries", []))


@pytest.fixture(scope="module")
def base_url(app):
    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="wh-http", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_the_hindsight_client_manages_webhooks(base_url, client, worker, receiver):
    from hindsight_client import Hindsight
    from hindsight_client.hindsight_client import _run_async

    bank = "wh-client"
    _fresh_bank(client, bank)
    hs = Hindsight(base_url=base_url, timeout=30)
    try:
        made = _run_async(hs.webhooks.create_webhook(bank, hs_models.CreateWebhookRequest(
            url=receiver.url("/client"), secret="client-secret",
            event_types=["retain.completed"],
            http_config=hs_models.WebhookHttpConfig(timeout_seconds=30))))
        assert made.url == receiver.url("/client") and made.secret == "client-secret"
        assert made.http_config.timeout_seconds == 30
        page = _run_async(hs.webhooks.list_webhooks(bank))
        assert page.total == 1 and page.items[0].id == made.id and page.items[0].secret is None
        hs.retain(bank, "Wren: the ferry runs hourly in summer.")
        deliveries = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            deliveries = _run_async(hs.webhooks.list_webhook_deliveries(bank, made.id))
            if deliveries.items and deliveries.items[0].status == "completed":
                break
            time.sleep(0.3)
        assert deliveries.items[0].status == "completed" and deliveries.items[0].attempts == 1
        [req] = receiver.at("/client")
        assert req["headers"]["X-Hindsight-Signature"] == _signed("client-secret", req["body"])
        changed = _run_async(hs.webhooks.update_webhook(
            bank, made.id, hs_models.UpdateWebhookRequest(enabled=False)))
        assert changed.enabled is False
        gone = _run_async(hs.webhooks.delete_webhook(bank, made.id))
        assert gone.success is True and gone.deleted_count == 1
    finally:
        hs.close()
