"""The LLM request log (issue 25): every call of RCLL's one LLM client — extraction in a real
Celery worker, closets there too, reflect in the API — is one row with its bank, operation,
step, run, document, provider, model, status, tokens and latency; read through Hindsight's
routes (and the real ``hindsight-client`` 1.1.0's ``LLMTracesApi``) by a bank admin only;
bad input a 4xx; a log that cannot write or keep up never fails or slows the call; beat's
purge drops what is older than the retention. The LLM is the scripted stand-in
(``rcll-replay``) at the litellm boundary.

The module swaps the session's chunk-mode worker for one started with the LLM settings (same
PostgreSQL and Redis), and puts the chunk-mode worker back at the end.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest

from rcll.dev import processes, stack
from tests.access.conftest import (  # noqa: F401  (fixtures)
    ADMIN,
    auth_app,
    auth_services,
    auth_settings,
    bearer,
    enqueued,
    make_member,
    share_models,
)
from tests.conftest import serving, wait_job

hindsight_client = pytest.importorskip("hindsight_client")
from hindsight_client import Hindsight  # noqa: E402
from hindsight_client.hindsight_client import _run_async  # noqa: E402
from hindsight_client_api import models as M  # noqa: E402
from hindsight_client_api.api.llm_traces_api import LLMTracesApi  # noqa: E402

B = "/v1/default/banks/{}"
SCRIPTS = [
    {"match": "LOGMARK-TIMEOUT-ONCE", "replies": [
        {"error": "timeout"}, {"json": {"facts": [{"text": "Ada keeps the lighthouse log."}]}}]},
    {"match": "LOGMARK-BAD", "replies": [{"content": "no JSON here"}]},
    {"match": "Question: ", "replies": [{"json": {"answer": "The log is Ada's.", "used": [1]}}]},
]


@pytest.fixture(scope="module")
def log_settings(settings, tmp_path_factory):
    path = tmp_path_factory.mktemp("replay-log") / "replay.json"
    path.write_text(json.dumps({"scripts": SCRIPTS, "default": "echo"}))
    return settings.model_copy(update={
        "llm_provider": "litellm", "llm_model": "rcll-replay/logtest", "llm_replay_path": path,
        "llm_backoff_s": 0.01, "llm_max_retries": 1, "llm_input_cost_per_token": 1e-6,
        "llm_output_cost_per_token": 2e-6, "closet_max_units": 10,
        "closet_min_units": 10**9, "closet_check_interval_s": 3600})


@pytest.fixture(scope="module")
def log_worker(worker, settings, log_settings):
    run_dir = settings.run_dir.resolve()
    processes.stop(run_dir, "worker")  # chunk-mode worker: must not take these jobs
    stack.start_worker(log_settings, name="worker-llmlog", log=lambda *_: None)
    yield log_settings
    processes.stop(run_dir, "worker-llmlog")
    stack.start_worker(settings, name="worker", log=lambda *_: None)


@pytest.fixture(scope="module")
def log_svc(log_settings, services):
    from rcll.bootstrap import Services

    svc = share_models(Services(log_settings), services)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def log_app(log_svc, log_worker):
    from api.app import create_app

    return create_app(settings=log_worker, services=log_svc)


@pytest.fixture(scope="module")
def hs(log_app):
    with serving(log_app, "hs-llm-log") as url:
        yield Hindsight(base_url=url, timeout=60)


def requests_of(client, bank: str, query: str = "", want: int = 0, timeout_s: float = 30,
                headers=None) -> dict:
    """``GET …/llm-requests?query``, polled until it holds ``want`` calls (the writer runs
    off the caller's path)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get(B.format(bank) + f"/llm-requests?{query}", headers=headers or {})
        assert r.status_code == 200, r.get_json()
        body = r.get_json()
        if body["total"] >= want or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def test_extraction_calls_in_the_worker_are_logged_and_filtered(log_app, log_svc):
    c = log_app.test_client()
    bank = "llmlog-extract"
    c.delete(B.format(bank))
    r = c.post(B.format(bank) + "/memories", json={"async": True, "items": [
        {"content": "Ada: LOGMARK-TIMEOUT-ONCE the lighthouse log is mine.",
         "document_id": "lighthouse"}]})
    assert r.status_code == 200, r.get_json()
    op = wait_job(c, bank, r.get_json()["operation_id"])
    assert op["state"] == "succeeded", op
    job = op["operation_id"]
    page = requests_of(c, bank, want=2)
    assert (page["bank_id"], page["total"], page["limit"], page["offset"]) == (bank, 2, 50, 0)
    ok, failed = page["items"]  # newest first: the retry that succeeded, then the timeout
    for row in (ok, failed):
        assert (row["bank_id"], row["operation"], row["scope"], row["trace_id"]) == (
            bank, "retain", "extract", job)
        assert (row["provider"], row["model"]) == ("rcll-replay", "rcll-replay/logtest")
        assert row["metadata"]["document_id"] == "lighthouse"
        assert row["input"] is None and row["output"] is None  # no text kept
        assert row["duration_ms"] >= 0 and row["started_at"] <= row["ended_at"]
        assert row["llm_info"] == {"provider": "rcll-replay", "model": "rcll-replay/logtest"}
    assert (ok["status"], ok["error"], ok["metadata"]["attempt"]) == ("success", None, 2)
    assert ok["input_tokens"] > 50 and ok["output_tokens"] > 0
    assert ok["total_tokens"] == ok["input_tokens"] + ok["output_tokens"]
    assert ok["metadata"]["cost_usd"] == pytest.approx(
        ok["input_tokens"] * 1e-6 + ok["output_tokens"] * 2e-6, rel=1e-6)
    assert (failed["status"], failed["metadata"]["outcome"], failed["metadata"]["attempt"]) == (
        "error", "transient_error", 1)
    assert "Timeout" in failed["error"] and failed["input_tokens"] == 0
    # the job's own usage agrees with the log
    assert op["llm_usage"]["calls"] == 2 and op["llm_usage"]["prompt_tokens"] == ok["input_tokens"]

    def total(query: str) -> int:
        return requests_of(c, bank, query)["total"]

    assert total("status=error") == 1 and total("status=success") == 1
    assert total(f"trace_id={job}") == 2 and total("trace_id=another") == 0
    assert total("operation=retain&scope=extract&provider=rcll-replay") == 2
    assert total("operation=reflect") == 0 and total("document_id=lighthouse") == 2
    assert total("call_type=llm") == 2 and total("call_type=embedding") == 0
    now = datetime.now(UTC)
    later = quote((now + timedelta(hours=1)).isoformat())
    assert total(f"start_date={later}") == 0 and total(f"end_date={later}") == 2
    assert total("end_date=2000-01-01T00:00:00") == 0
    fact = c.get(B.format(bank) + "/memories/list?type=world").get_json()["items"]
    made = next(u for u in fact if u["text"] == "Ada keeps the lighthouse log.")
    assert total(f"memory_id={made['id']}") == 2
    assert total("memory_id=00000000-0000-0000-0000-000000000000") == 0
    one = requests_of(c, bank, "limit=1&offset=1")
    assert [i["id"] for i in one["items"]] == [failed["id"]] and one["total"] == 2

    stats = c.get(B.format(bank) + "/llm-requests/stats?period=1d").get_json()
    assert (stats["period"], stats["trunc"]) == ("1d", "hour")
    assert sum(b["total"] for b in stats["buckets"]) == 2
    assert {k: sum(b["statuses"].get(k, 0) for b in stats["buckets"])
            for k in ("success", "error")} == {"success": 1, "error": 1}
    assert sum(b["tokens"]["input"] for b in stats["buckets"]) == ok["input_tokens"]
    assert c.get(B.format(bank) + "/llm-requests/stats?call_type=rerank").get_json()[
        "buckets"] == []

    # deleting the bank deletes its log
    assert c.delete(B.format(bank)).status_code == 200
    with log_svc.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM llm_requests WHERE trace_id = %s",
                            (job,)).fetchone()["n"] == 0


def test_closets_and_reflect_are_logged_and_grouped_by_run(log_app, hs, log_svc):
    c = log_app.test_client()
    bank = "llmlog-runs"
    c.delete(B.format(bank))
    items = [{"content": f"Bo: shift {i} of the lighthouse watch logged fog.",
              "document_id": f"w{i}"} for i in range(4)]
    r = c.post(B.format(bank) + "/memories", json={"async": True, "items": items})
    assert r.status_code == 200, r.get_json()
    retain_job = r.get_json()["operation_id"]
    assert wait_job(c, bank, retain_job)["state"] == "succeeded"
    r = c.post(B.format(bank) + "/closets", json={})
    assert r.status_code == 202, r.get_json()
    closets = wait_job(c, bank, r.get_json()["operation_id"])
    assert closets["state"] == "succeeded", closets
    groups = closets["counts"]["closets_created"]  # one call each (no group failed)
    assert groups >= 1 and closets["counts"]["groups_failed"] == 0
    out = c.post(B.format(bank) + "/reflect", json={"query": "Who logged the fog?"})
    assert out.status_code == 200, out.get_json()
    trace = out.get_json()["llm_trace_id"]

    # the reflect's row is written by this process's log writer, off the request's path:
    # wait for it to drain, then for the reflect's own row (the worker's rows came earlier)
    log_svc.llm_request_log.flush(10.0)
    requests_of(c, bank, f"trace_id={trace}", want=1, timeout_s=60)
    page = requests_of(c, bank, want=4 + groups + 1)
    by_op: dict[str, list] = {}
    for row in page["items"]:
        by_op.setdefault(row["operation"], []).append(row)
    if "reflect" not in by_op:  # say what was there: the writer's state and any reflect row
        rl = log_svc.llm_request_log
        with log_svc.pool.connection() as conn:
            rows = conn.execute("SELECT bank_id, trace_id, started_at FROM llm_requests "
                                "WHERE operation = 'reflect' ORDER BY started_at DESC LIMIT 5"
                                ).fetchall()
        raise AssertionError({"trace": trace, "writer_pid": rl._pid, "pid": os.getpid(),
                              "writer_alive": rl._thread.is_alive() if rl._thread else None,
                              "queued": rl._queue.unfinished_tasks if rl._queue else None,
                              "reflect_rows": rows,
                              "page": [(x["operation"], x["trace_id"]) for x in page["items"]]})
    assert {(x["scope"], x["trace_id"]) for x in by_op["retain"]} == {("extract", retain_job)}
    assert len(by_op["retain"]) == 4
    assert {(x["scope"], x["trace_id"]) for x in by_op["consolidation"]} == {
        ("closets", closets["operation_id"])}
    assert len(by_op["consolidation"]) == groups
    assert [(x["scope"], x["trace_id"], x["status"]) for x in by_op["reflect"]] == [
        ("reflect", trace, "success")]
    assert page["items"][0]["trace_id"] == trace  # newest first

    # paged by run: the newest run first, each with every call of it
    runs = requests_of(c, bank, "group=true&limit=2")
    assert runs["total"] == 3
    assert [x["trace_id"] for x in runs["items"]] == [trace] + [closets["operation_id"]] * groups
    rest = requests_of(c, bank, "group=true&limit=2&offset=2")
    assert {x["trace_id"] for x in rest["items"]} == {retain_job} and len(rest["items"]) == 4

    # the real client parses every answer with Hindsight's models
    api = LLMTracesApi(hs._api_client)
    listed = _run_async(api.list_llm_requests(bank, operation="reflect", limit=5))
    assert isinstance(listed, M.LLMRequestListResponse)
    assert [(i.trace_id, i.status, i.scope) for i in listed.items] == [
        (trace, "success", "reflect")]
    grouped = _run_async(api.list_llm_requests(bank, group=True, call_type="llm",
                                               start_date="2000-01-01T00:00:00Z"))
    assert grouped.total == 3 and len(grouped.items) == 4 + groups + 1
    stats = _run_async(api.llm_request_stats(bank, period="7d", operation="consolidation"))
    assert isinstance(stats, M.LLMRequestStatsResponse) and stats.trunc == "day"
    assert sum(b.statuses.get("success", 0) for b in stats.buckets) == groups
    version = c.get("/version").get_json()
    assert version["features"]["llm_trace"] is True


def test_bad_input_and_roles(log_app, auth_app):  # noqa: F811
    c = log_app.test_client()
    bank = "llmlog-bad"
    c.post(B.format(bank) + "/memories", json={"async": False, "items": [{"content": "x"}]})
    url = B.format(bank) + "/llm-requests"
    for query in ("status=maybe", "call_type=gpu", "limit=0", "limit=501", "offset=-1",
                  "start_date=yesterday", "end_date=2024-13-01", "memory_id=not-a-uuid",
                  "group=perhaps", "scope=" + "x" * 600):
        r = c.get(f"{url}?{query}")
        assert r.status_code == 400, (query, r.get_json())
    for query in ("period=2d", "call_type=gpu", "operation=" + "x" * 600):
        r = c.get(f"{url}/stats?{query}")
        assert r.status_code == 400, (query, r.get_json())
    r = c.get(B.format("llmlog-never-made") + "/llm-requests")
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "bank_not_found")

    api = auth_app.test_client()
    tag = str(time.monotonic_ns())[-6:]
    admin = bearer(make_member(api, f"la{tag}", bank, "admin"))
    writer = bearer(make_member(api, f"lw{tag}", bank, "write"))
    stranger = bearer(make_member(api, f"ls{tag}"))
    for path in ("/llm-requests", "/llm-requests/stats"):
        assert api.get(B.format(bank) + path, headers=admin).status_code == 200
        assert api.get(B.format(bank) + path, headers=ADMIN).status_code == 200
        for who in (writer, stranger):
            r = api.get(B.format(bank) + path, headers=who)
            assert (r.status_code, r.get_json()["error"]["code"]) == (403, "forbidden")
        assert api.get(B.format(bank) + path).status_code == 401


class _Pool:
    """A stand-in for the pool the writer asks for a connection: raises, or blocks until
    released (the database away, or too slow to keep up)."""

    def __init__(self, mode: str):
        self.mode, self.release = mode, threading.Event()

    def connection(self, timeout=None):
        if self.mode == "block":
            self.release.wait(30)
        raise RuntimeError("database away")


def _dropped(reason: str) -> float:
    from rcll.telemetry import metrics

    return metrics.LLM_LOG_DROPPED.labels(reason)._value.get()


def test_a_log_that_cannot_write_never_fails_or_slows_the_call(log_settings):
    from rcll.llm.client import LLMClient, LLMConfig
    from rcll.llm.prompts import extract_facts
    from rcll.llm.request_log import CallInfo, RequestLog

    cfg = LLMConfig.from_settings(log_settings)
    msgs = extract_facts.build_messages("Cy: the lamp is lit.")
    info = CallInfo(bank_id="llmlog-x", operation="retain", scope="extract", trace_id="t")

    # the database refuses: the call succeeds, the entry is dropped and counted
    broken = RequestLog(lambda: _Pool("raise"))
    before = _dropped("write_failed")
    res = LLMClient(cfg, request_log=broken).complete_json(msgs, extract_facts.ExtractionReply,
                                                           call=info)
    assert res.parsed.facts and broken.flush(5)
    assert _dropped("write_failed") == before + 1

    # the writer is stuck: calls go on at their own pace, the overflow is dropped
    slow = _Pool("block")
    stuck = RequestLog(lambda: slow, queue_size=2)
    client = LLMClient(cfg, request_log=stuck)
    before = _dropped("queue_full")
    started = time.perf_counter()
    client.complete_json(msgs, extract_facts.ExtractionReply, call=info)
    while stuck._queue.qsize():  # the writer took the first entry and waits on the pool
        time.sleep(0.01)
    for _ in range(5):  # two queued, three dropped
        client.complete_json(msgs, extract_facts.ExtractionReply, call=info)
    took = time.perf_counter() - started
    plain = time.perf_counter()
    for _ in range(6):
        LLMClient(cfg).complete_json(msgs, extract_facts.ExtractionReply)
    without_log = time.perf_counter() - plain
    assert _dropped("queue_full") == before + 3
    assert took < without_log + 1.0, (took, without_log)  # the log added no wait
    slow.release.set()
    assert stuck.flush(5)

    # a reply that never parses is logged per attempt and still raises the LLM's error
    from rcll.llm.client import LLMReplyInvalid

    rows: list[dict] = []

    class Collect:
        def record(self, entry):
            rows.append(entry)

    with pytest.raises(LLMReplyInvalid):
        LLMClient(cfg, request_log=Collect()).complete_json(
            extract_facts.build_messages("Cy: LOGMARK-BAD"), extract_facts.ExtractionReply,
            call=info)
    assert [(r["attempt"], r["status"], r["outcome"]) for r in rows] == [
        (1, "error", "invalid_reply"), (2, "error", "invalid_reply")]
    assert all(len(r["error"]) <= 500 and r["bank_id"] == "llmlog-x" for r in rows)


def test_the_log_can_be_switched_off(log_settings, services):
    from rcll.bootstrap import Services

    off = share_models(Services(log_settings.model_copy(update={"llm_request_log": False})),
                       services)
    assert off.llm.request_log is None
    assert Services(log_settings).llm.request_log is not None
    off.close()


def test_beat_purge_drops_calls_past_the_retention(log_svc, log_worker):
    from rcll.store import llm_requests
    from workers.celery_app import make_celery
    from workers.queues import LLM_LOG_PURGE_TASK, QueueNames

    bank = "llmlog-purge"
    with log_svc.pool.connection() as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s) "
                     "ON CONFLICT DO NOTHING", (bank, bank))
        now = datetime.now(UTC)
        rows = [{"bank_id": bank, "operation": "reflect", "scope": "reflect",
                 "trace_id": f"purge-{age}", "provider": "rcll-replay", "model": "m",
                 "status": "success", "outcome": "ok", "attempt": 1,
                 "started_at": now - timedelta(days=age), "ended_at": now - timedelta(days=age),
                 "duration_ms": 5, "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0}
                for age in (45, 31, 29, 1)]
        gone = {**rows[-1], "bank_id": "llmlog-never-made", "trace_id": "purge-gone"}
        assert llm_requests.insert_many(conn, [*rows, gone]) == 5
        # a call whose bank was deleted meanwhile is kept without its bank
        assert conn.execute("SELECT bank_id FROM llm_requests WHERE trace_id = 'purge-gone'"
                            ).fetchone()["bank_id"] is None
    make_celery(log_worker).send_task(LLM_LOG_PURGE_TASK, queue=QueueNames.MAINTENANCE)
    deadline = time.monotonic() + 60
    while True:
        with log_svc.pool.connection() as conn:
            left = sorted(r["trace_id"] for r in conn.execute(
                "SELECT trace_id FROM llm_requests WHERE bank_id = %s", (bank,)).fetchall())
        if left == ["purge-1", "purge-29"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert left == ["purge-1", "purge-29"]  # the default retention: 30 days
