"""Generate ``deploy/grafana/rcll.json``, the Grafana dashboard of RCLL's metrics
(docs/reference/metrics.md):

    PYTHONPATH=$PWD .venv/bin/python deploy/grafana/dashboard.py > deploy/grafana/rcll.json

Panels are data below (title, unit, PromQL expressions); ``tests/ops/test_dashboard.py`` checks
the committed file equals this output and that every expression names only metrics RCLL
exports. Import it in Grafana with a Prometheus data source (the ``datasource`` variable).
"""

from __future__ import annotations

import json

DS = {"type": "prometheus", "uid": "${datasource}"}
Q = "histogram_quantile({q}, sum by (le{by}) (rate({m}_bucket[5m])))"

# (title, unit, [(PromQL, legend)]) per row
ROWS: list[tuple[str, list[tuple[str, str, list[tuple[str, str]]]]]] = [
    ("API", [
        ("Requests per second by route", "reqps", [
            ("sum by (endpoint, status) (rate(rcll_http_request_duration_seconds_count[5m]))",
             "{{endpoint}} {{status}}")]),
        ("Request latency p95 by route", "s", [
            (Q.format(q=0.95, by=", endpoint", m="rcll_http_request_duration_seconds"),
             "{{endpoint}}")]),
        ("Errors (5xx) per second", "reqps", [
            ('sum by (endpoint) (rate(rcll_http_request_duration_seconds_count{status=~"5.."}[5m]))',
             "{{endpoint}}")]),
    ]),
    ("Recall", [
        ("Recall latency p50 / p95 by answering tier", "s", [
            (Q.format(q=0.5, by=", tier", m="rcll_recall_duration_seconds"), "p50 {{tier}}"),
            (Q.format(q=0.95, by=", tier", m="rcll_recall_duration_seconds"), "p95 {{tier}}")]),
        ("Recalls per second by answering tier", "ops", [
            ("sum by (tier) (rate(rcll_recall_duration_seconds_count[5m]))", "{{tier}}")]),
        ("Refused 503 overloaded per second", "reqps", [
            ("sum by (what) (rate(rcll_overloaded_total[5m]))", "{{what}}")]),
        ("Time per tier (mean)", "s", [
            ("sum by (tier) (rate(rcll_recall_tier_duration_seconds_sum[5m])) / "
             "sum by (tier) (rate(rcll_recall_tier_duration_seconds_count[5m]))", "{{tier}}")]),
        ("Cold pipeline phase p95", "s", [
            (Q.format(q=0.95, by=", phase", m="rcll_recall_phase_duration_seconds"),
             "{{phase}}")]),
        ("Candidates per channel (mean per recall)", "short", [
            ("sum by (channel) (rate(rcll_recall_candidates_sum[5m])) / "
             "sum by (channel) (rate(rcll_recall_candidates_count[5m]))", "{{channel}}")]),
        ("Tokens returned per recall (mean)", "short", [
            ("sum(rate(rcll_recall_tokens_returned_sum[5m])) / "
             "sum(rate(rcll_recall_tokens_returned_count[5m]))", "tokens"),
            ("sum(rate(rcll_recall_results_sum[5m])) / sum(rate(rcll_recall_results_count[5m]))",
             "units")]),
    ]),
    ("Write path", [
        ("Queue depth", "short", [("sum by (queue) (rcll_queue_depth)", "{{queue}}")]),
        ("Jobs by state", "short", [("sum by (state) (rcll_jobs)", "{{state}}")]),
        ("Items per second by stage", "ops", [
            ("sum by (stage) (rate(rcll_stage_items_total[5m]))", "{{stage}}")]),
        ("Units per second by stage", "ops", [
            ("sum by (stage) (rate(rcll_stage_units_total[5m]))", "{{stage}}")]),
        ("Task duration p95", "s", [
            (Q.format(q=0.95, by=", task", m="rcll_task_duration_seconds"), "{{task}}")]),
        ("Task failures and retries per second", "ops", [
            ('sum by (task, outcome) (rate(rcll_task_duration_seconds_count{outcome!="success"}[5m]))',
             "{{task}} {{outcome}}")]),
        ("Metric sources up (broker, database)", "short", [
            ("min by (source) (rcll_metrics_source_up)", "{{source}}")]),
    ]),
    ("Models", [
        ("Embedder batch size (mean)", "short", [
            ("sum(rate(rcll_embed_batch_size_sum[5m])) / sum(rate(rcll_embed_batch_size_count[5m]))",
             "texts per call")]),
        ("Embedder call latency p50 / p95", "s", [
            (Q.format(q=0.5, by="", m="rcll_embed_duration_seconds"), "p50"),
            (Q.format(q=0.95, by="", m="rcll_embed_duration_seconds"), "p95")]),
        ("Embedder texts per second", "ops", [
            ("sum(rate(rcll_embed_batch_size_sum[5m]))", "texts/s")]),
        ("LLM calls per second by outcome", "ops", [
            ("sum by (model, outcome) (rate(rcll_llm_calls_total[5m]))", "{{model}} {{outcome}}")]),
        ("LLM tokens per second", "short", [
            ("sum by (model, kind) (rate(rcll_llm_tokens_total[5m]))", "{{model}} {{kind}}")]),
        ("LLM cost, USD per hour", "currencyUSD", [
            ("sum by (model) (rate(rcll_llm_cost_usd_total[1h])) * 3600", "{{model}}")]),
        ("LLM errors per second", "ops", [
            ("sum by (model, error) (rate(rcll_llm_errors_total[5m]))", "{{model}} {{error}}")]),
        ("LLM call latency p95", "s", [
            (Q.format(q=0.95, by=", model", m="rcll_llm_call_duration_seconds"), "{{model}}")]),
        ("LLM request log entries dropped per second", "ops", [
            ("sum by (reason) (rate(rcll_llm_request_log_dropped_total[5m]))", "{{reason}}")]),
    ]),
]


def panels() -> list[dict]:
    """Rows and time-series panels, laid out two per line (12 of 24 columns each)."""
    out, y, pid = [], 0, 1
    for row_title, row_panels in ROWS:
        out.append({"type": "row", "title": row_title, "id": pid, "collapsed": False,
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y = pid + 1, y + 1
        for i, (title, unit, targets) in enumerate(row_panels):
            out.append({
                "type": "timeseries", "title": title, "id": pid, "datasource": DS,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": y + 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                "targets": [{"datasource": DS, "expr": expr, "legendFormat": legend,
                             "refId": chr(ord("A") + k)}
                            for k, (expr, legend) in enumerate(targets)]})
            pid += 1
        y += 8 * ((len(row_panels) + 1) // 2)
    return out


def dashboard() -> dict:
    """The dashboard JSON (Grafana schema 39)."""
    return {
        "title": "RCLL", "uid": "rcll-overview", "tags": ["rcll"], "timezone": "utc",
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels(),
    }


if __name__ == "__main__":
    print(json.dumps(dashboard(), indent=2))
