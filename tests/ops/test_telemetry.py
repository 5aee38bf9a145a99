"""Metric sources one at a time: the LLM client's calls/tokens/cost/errors (through the real
litellm with the scripted stand-in), queue depth from Redis (every priority list), JSON log
lines with the job context, and who may scrape /metrics."""

from __future__ import annotations

import io
import json
import logging
import uuid

import pytest
import redis

from rcll.llm.client import LLMClient, LLMConfig, LLMUnavailable
from rcll.llm.prompts import extract_facts
from rcll.telemetry import logs
from rcll.telemetry.collectors import REDIS_PRIORITY_SEP, ScrapeCollector, redis_queue_depths
from rcll.telemetry.exposition import render
from tests.ops.promtext import value

VALID = {"facts": [{"text": "Alice moved to Lisbon in 2021.", "kind": "event",
                    "entities": ["Alice", "Lisbon"]}]}


def _page() -> str:
    return render()[0].decode()


def test_llm_calls_tokens_cost_and_errors(tmp_path):
    model = f"rcll-replay/metrics-{uuid.uuid4().hex[:6]}"  # series of this test alone
    path = tmp_path / "replay.json"
    path.write_text(json.dumps({"scripts": [
        {"match": "M-OK", "replies": [{"content": "{oops"}, {"json": VALID}]},
        {"match": "M-DOWN", "replies": [{"error": "unavailable"}]}], "default": "echo"}))
    client = LLMClient(LLMConfig(provider="litellm", model=model, replay_path=path,
                                 max_retries=1, backoff_s=0, timeout_s=5,
                                 input_cost_per_token=1e-6, output_cost_per_token=2e-6),
                       sleep=lambda _s: None)
    res = client.complete_json(extract_facts.build_messages("Alice: M-OK"),
                               extract_facts.ExtractionReply)
    with pytest.raises(LLMUnavailable):
        client.complete_json(extract_facts.build_messages("Alice: M-DOWN"),
                             extract_facts.ExtractionReply)
    page = _page()
    assert value(page, "rcll_llm_calls_total", model=model, outcome="ok") == 1
    assert value(page, "rcll_llm_calls_total", model=model, outcome="invalid_reply") == 1
    assert value(page, "rcll_llm_calls_total", model=model, outcome="transient_error") == 2
    assert value(page, "rcll_llm_errors_total", model=model, error="invalid_reply") == 1
    assert value(page, "rcll_llm_errors_total", model=model) == 3
    # tokens and cost are litellm's, summed over both billed replies (the invalid one too)
    u = res.usage
    assert value(page, "rcll_llm_tokens_total", model=model, kind="prompt") == u.prompt_tokens
    assert value(page, "rcll_llm_tokens_total", model=model,
                 kind="completion") == u.completion_tokens
    assert value(page, "rcll_llm_cost_usd_total", model=model) == pytest.approx(u.cost_usd)
    assert u.cost_usd > 0
    assert value(page, "rcll_llm_call_duration_seconds_count", model=model) == 4


def test_redis_queue_depth_counts_every_priority_list(settings):
    r = redis.Redis.from_url(settings.redis_url)
    q = f"depth-{uuid.uuid4().hex[:6]}"
    try:
        r.rpush(q, "a", "b")
        r.rpush(f"{q}{REDIS_PRIORITY_SEP}3", "c")
        r.rpush(f"{q}{REDIS_PRIORITY_SEP}9", "d", "e")
        assert redis_queue_depths(settings.redis_url, [q, "empty-queue"], 1.0) == {
            q: 5, "empty-queue": 0}
    finally:
        r.delete(q, f"{q}{REDIS_PRIORITY_SEP}3", f"{q}{REDIS_PRIORITY_SEP}9")


def test_scrape_sources_down_leave_the_scrape_standing(settings):
    class DownPool:
        def connection(self, timeout=None):
            raise TimeoutError("pool exhausted")

    from tests.conftest import free_port

    c = ScrapeCollector(f"redis://127.0.0.1:{free_port()}/0", ["extract"], DownPool, 0.3)
    fams = {f.name: f for f in c.collect()}
    assert set(fams) == {"rcll_metrics_source_up"}
    assert {s.labels["source"]: s.value for s in fams["rcll_metrics_source_up"].samples} == {
        "broker": 0, "database": 0}


def test_json_lines_carry_the_job_context():
    buf = io.StringIO()
    handler = logs.configure("json", stream=buf)
    try:
        log = logging.getLogger("rcll.test.ops")
        log.info("before")
        with logs.job_context(job_id="j-1", bank_id="b-1", items=3):
            log.warning("inside %d", 7)
            logging.getLogger("celery.app.trace").warning("a library's line")
        log.info("after")
    finally:
        logging.getLogger().removeHandler(handler)
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [ln["message"] for ln in lines] == ["before", "inside 7", "a library's line", "after"]
    assert [(ln.get("job_id"), ln.get("bank_id")) for ln in lines] == [
        (None, None), ("j-1", "b-1"), ("j-1", "b-1"), (None, None)]
    assert {"time", "level", "logger", "pid"} <= set(lines[1])
    assert lines[1]["level"] == "WARNING" and "job_suffix" not in lines[1]


def test_metrics_is_public_by_default_and_admin_only_when_guarded(services, settings):
    from api.app import create_app
    from rcll.bootstrap import Services
    from tests.access.conftest import ADMIN_KEY, KEY_SECRET, share_models

    base = {"auth": True, "admin_key": ADMIN_KEY, "key_secret": KEY_SECRET}
    open_app = create_app(services=share_models(Services(settings.model_copy(update=base)),
                                                services), enqueue=lambda *a: None)
    r = open_app.test_client().get("/metrics")
    assert r.status_code == 200 and b"rcll_metrics_source_up" in r.data

    guarded = share_models(Services(settings.model_copy(update={**base,
                                                                "metrics_public": False})),
                           services)
    api = create_app(services=guarded, enqueue=lambda *a: None).test_client()
    r = api.get("/metrics")
    assert r.status_code == 401 and r.get_json()["error"]["code"] == "missing_api_key"
    r = api.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.get_json()["error"]["code"] == "invalid_api_key"
    r = api.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert r.status_code == 200 and b"rcll_jobs" in r.data
    guarded.close()
