"""A /metrics scrape after an ingest and a recall through the real stack (API in-process,
Celery worker process with its exporter, PostgreSQL, Redis): every family is present, and
non-zero where the round trip must have moved it."""

from __future__ import annotations

import time

import httpx

from tests.conftest import wait_job
from tests.ops.promtext import families, value
from workers.queues import QueueNames

BANK = "ops-metrics"
ITEMS = [
    {"content": "Melanie: I ran a charity race for mental health last Saturday.",
     "document_id": "m/1"},
    {"content": "Caroline: I went to the LGBTQ support group yesterday.", "document_id": "m/2"},
    {"content": "Melanie: Never deploy the website on a Friday.", "document_id": "m/3"},
]
RECALL_ROUTE = "/v1/default/banks/<bank_id>/memories/recall"


def _worker_page(settings, must: str, timeout_s: float = 20) -> str:
    """The worker exporter's page once ``must`` appears on it (children write their values
    as they go; the exporter reads them on each scrape)."""
    url = f"http://127.0.0.1:{settings.metrics_port}/metrics"
    deadline, text = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        try:
            text = httpx.get(url, timeout=5).text
        except httpx.HTTPError:
            text = ""
        if must in text:
            return text
        time.sleep(0.3)
    raise AssertionError(f"{must} not on the worker exporter page:\n{text[:2000]}")


def test_api_page_after_ingest_and_recall(app, worker, services, settings):
    c = app.test_client()
    client_round_trip(c)
    with services.pool.connection() as conn:
        total_jobs = conn.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"]
    resp = c.get("/metrics")
    assert resp.status_code == 200
    assert resp.content_type.startswith("text/plain")
    page = resp.get_data(as_text=True)
    fams = families(page)
    assert {"rcll_http_request_duration_seconds", "rcll_recall_duration_seconds",
            "rcll_recall_tier_duration_seconds", "rcll_recall_phase_duration_seconds",
            "rcll_recall_candidates", "rcll_recall_tokens_returned", "rcll_recall_results",
            "rcll_embed_batch_size", "rcll_embed_duration_seconds", "rcll_queue_depth",
            "rcll_jobs", "rcll_metrics_source_up"} <= fams, fams
    # request latency per route template, method and status
    assert value(page, "rcll_http_request_duration_seconds_count", endpoint=RECALL_ROUTE,
                 method="POST", status="200") >= 1
    assert value(page, "rcll_http_request_duration_seconds_count",
                 endpoint="/v1/default/banks/<bank_id>/memories", method="POST",
                 status="200") >= 1
    # recall latency per tier and per phase, candidates per channel, tokens returned
    assert value(page, "rcll_recall_duration_seconds_count", tier="cold") >= 1
    assert value(page, "rcll_recall_tier_duration_seconds_sum", tier="cold") > 0
    for phase in ("embed_query", "dense", "lexical", "fuse", "hydrate", "total"):
        assert value(page, "rcll_recall_phase_duration_seconds_count", phase=phase) >= 1, phase
    assert value(page, "rcll_recall_candidates_sum", channel="dense") >= 1
    assert value(page, "rcll_recall_candidates_sum", channel="lexical") >= 1
    assert value(page, "rcll_recall_tokens_returned_sum") > 0
    assert value(page, "rcll_embed_batch_size_count") >= 1  # the query embedding
    # sampled on scrape: every queue's depth, jobs by state, both sources up
    for q in QueueNames.all():
        assert f'rcll_queue_depth{{queue="{q}"}}' in page
    assert value(page, "rcll_jobs", state="succeeded") >= 1
    assert value(page, "rcll_jobs") == total_jobs  # every state, the database's count
    assert value(page, "rcll_metrics_source_up", source="broker") == 1
    assert value(page, "rcll_metrics_source_up", source="database") == 1


def client_round_trip(c) -> None:
    """Ingest three items through the worker, then one recall (cold tier)."""
    c.delete(f"/v1/default/banks/{BANK}")
    resp = c.post(f"/v1/default/banks/{BANK}/memories", json={"items": ITEMS})
    assert resp.status_code == 200  # Hindsight path: its client maps only 200
    op = wait_job(c, BANK, resp.get_json()["operation_id"])
    assert op["state"] == "succeeded", op
    res = c.post(f"/v1/default/banks/{BANK}/memories/recall",
                 json={"query": "When did Caroline go to the support group?", "tiers": ["cold"]})
    assert res.status_code == 200 and res.get_json()["tokens_used"] > 0


def test_worker_exporter_sums_the_pool_children(app, worker, settings):
    c = app.test_client()
    client_round_trip(c)
    page = _worker_page(settings, 'rcll_stage_units_total{stage="embed"}')
    # the stages ran in a pool child; the main process's exporter shows them
    assert value(page, "rcll_stage_items_total", stage="chunk") >= 3
    assert value(page, "rcll_stage_items_total", stage="embed") >= 3
    assert value(page, "rcll_stage_units_total", stage="chunk") >= 3
    assert value(page, "rcll_stage_units_total", stage="embed") >= 3
    assert value(page, "rcll_embed_batch_size_sum") >= 3
    assert value(page, "rcll_embed_duration_seconds_sum") > 0
    assert value(page, "rcll_task_duration_seconds_count", task="retain.chunk",
                 outcome="success") >= 1
    assert value(page, "rcll_task_duration_seconds_count", task="retain.embed",
                 outcome="success") >= 1


def test_worker_log_lines_of_a_job_carry_job_and_bank(app, worker, settings):
    c = app.test_client()
    c.delete(f"/v1/default/banks/{BANK}-log")
    resp = c.post(f"/v1/default/banks/{BANK}-log/memories", json={"items": ITEMS[:1]})
    op_id = resp.get_json()["operation_id"]
    assert wait_job(c, f"{BANK}-log", op_id)["state"] == "succeeded"
    log_text = (settings.run_dir.resolve() / "worker.log").read_text()
    # Celery's own line, logged in the pool child after the task ran, carries the context
    lines = [ln for ln in log_text.splitlines() if "succeeded in" in ln and "retain." in ln
             and f"job={op_id}" in ln]
    assert len(lines) >= 2, log_text[-3000:]  # chunk and embed at least
    assert all(f"bank={BANK}-log" in ln for ln in lines)
