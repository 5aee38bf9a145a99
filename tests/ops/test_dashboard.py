"""The Grafana dashboard (deploy/grafana/rcll.json): generated from deploy/grafana/dashboard.py,
every expression parses as PromQL (promql-parser) and names only metrics RCLL exports, with
only labels those metrics carry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import promql_parser
import pytest
from prometheus_client import Counter, Histogram

from rcll.telemetry import metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "rcll.json"
# sampled on scrape (rcll.telemetry.collectors): name -> labels
SCRAPED = {"rcll_queue_depth": {"queue"}, "rcll_jobs": {"state"},
           "rcll_metrics_source_up": {"source"}}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}


def exported() -> dict[str, set[str]]:
    """Every sample name RCLL exports -> the labels it carries (``le`` on buckets)."""
    out = dict(SCRAPED)
    for metric in vars(metrics).values():  # the defined families
        if not isinstance(metric, Counter | Histogram):
            continue
        for fam in metric.describe():
            labels = set(metric._labelnames)
            for suffix in SUFFIXES.get(fam.type, ("",)):
                out[fam.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return out


def exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def walk(node, selectors: list, groupings: list) -> None:
    """Collect vector selectors and aggregation label lists of a parsed expression."""
    if isinstance(node, promql_parser.VectorSelector):
        selectors.append(node)
        return
    if isinstance(node, promql_parser.MatrixSelector):
        selectors.append(node.vector_selector)
        return
    if isinstance(node, promql_parser.AggregateExpr):
        if node.modifier is not None:
            groupings.append(list(node.modifier.labels))
        walk(node.expr, selectors, groupings)
        return
    for attr in ("lhs", "rhs", "expr"):
        if hasattr(node, attr):
            walk(getattr(node, attr), selectors, groupings)
    for arg in getattr(node, "args", None) or []:
        walk(arg, selectors, groupings)


def test_dashboard_file_is_the_generator_output():
    out = subprocess.run([sys.executable, str(ROOT / "deploy/grafana/dashboard.py")],
                         capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert json.loads(out.stdout) == json.loads(DASHBOARD.read_text()), \
        "regenerate: deploy/grafana/dashboard.py > deploy/grafana/rcll.json"


def test_exported_metrics_are_known():
    names = exported()
    assert "rcll_recall_duration_seconds_bucket" in names
    assert names["rcll_http_request_duration_seconds_count"] == {"endpoint", "method", "status"}
    assert "rcll_llm_calls_total" in names and "rcll_stage_units_total" in names


@pytest.mark.parametrize("expr", exprs())
def test_every_expression_names_only_exported_metrics_and_labels(expr):
    names = exported()
    selectors, groupings = [], []
    walk(promql_parser.parse(expr), selectors, groupings)
    assert selectors, expr
    used_labels: set[str] = set()
    for vs in selectors:
        assert vs.name in names, f"{vs.name} is not exported ({expr})"
        used_labels |= names[vs.name]
        for m in vs.matchers.matchers:
            assert m.name in names[vs.name], f"{vs.name} has no label {m.name} ({expr})"
    for labels in groupings:
        assert set(labels) <= used_labels, f"grouping by {labels} in {expr}"


def test_dashboard_covers_every_family():
    text = DASHBOARD.read_text()
    families = {n.rsplit("_bucket", 1)[0].rsplit("_sum", 1)[0].rsplit("_count", 1)[0]
                for n in exported()}
    missing = sorted(f for f in families if f not in text)
    assert missing == []
