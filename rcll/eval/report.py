"""Markdown rendering of a benchmark result dict from ``rcll.eval.runner``."""

from __future__ import annotations

import re
from collections.abc import Mapping

_METRIC_ORDER = ("recall", "recall_any", "recall_all", "ndcg")
_METRIC_LABEL = {"recall": "R", "recall_any": "R_any", "recall_all": "R_all", "ndcg": "nDCG"}


def _columns(result: Mapping) -> list[str]:
    keys = set(result.get("turn") or {}) | set(result.get("session") or {})
    parsed = []
    for key in keys:
        match = re.fullmatch(r"(\w+)@(\d+)", key)
        if match and match.group(1) in _METRIC_ORDER:
            parsed.append((_METRIC_ORDER.index(match.group(1)), int(match.group(2)), key))
    return [key for _, _, key in sorted(parsed)]


def _label(key: str) -> str:
    name, k = key.split("@")
    return f"{_METRIC_LABEL.get(name, name)}@{k}"


def _num(value: object, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_table(result: Mapping) -> str:
    """Markdown summary: a table with rows = level (turn, session) and columns = every metric
    at every k; a per-category table at turn level (recall@10, nDCG@5); then ingest and
    recall-latency lines. R = recall (fraction of gold), R_any / R_all = any / all gold found."""
    columns = _columns(result)
    n_scored = result.get("n_scored") or {}
    parts: list[str] = []
    title = result.get("dataset") or "benchmark"
    parts.append(f"### {title}: {result.get('n_questions')} questions "
                 f"(scored at turn level: {n_scored.get('turn', '–')}, "
                 f"session level: {n_scored.get('session', '–')})")
    rows = [[level] + [_num((result.get(level) or {}).get(col)) for col in columns]
            for level in ("turn", "session")]
    parts.append(_table(["level", *map(_label, columns)], rows))

    by_cat = result.get("by_category") or {}
    if by_cat:
        cat_rows = []
        for name, cat in by_cat.items():
            turn = cat.get("turn") or {}
            cat_rows.append([name, str(cat.get("n", "–")),
                             str((cat.get("n_scored") or {}).get("turn", "–")),
                             _num(turn.get("recall@10")), _num(turn.get("ndcg@5"))])
        parts.append(_table(["category", "n", "n turn-scored", "R@10 (turn)", "nDCG@5 (turn)"],
                            cat_rows))

    lines: list[str] = []
    ingest = result.get("ingest") or {}
    if ingest.get("reused"):
        lines.append("- ingest: reused existing banks (not measured)")
    else:
        lines.append(f"- ingest: {_num(ingest.get('units'))} units in "
                     f"{_num(ingest.get('seconds'), 1)} s = "
                     f"{_num(ingest.get('units_per_s'), 1)} units/s")
    lat = result.get("recall_latency_ms") or {}
    lines.append(f"- recall latency (HTTP wall, ms): p50 {_num(lat.get('p50'), 1)}, "
                 f"p95 {_num(lat.get('p95'), 1)}, mean {_num(lat.get('mean'), 1)}")
    config = result.get("config") or {}
    if config:
        lines.append(f"- config: recipe={config.get('recipe')}, limit={config.get('limit')}, "
                     f"max_tokens={config.get('max_tokens')}, mode={config.get('mode')}, "
                     f"dense_available={config.get('dense_available')}, "
                     f"server={config.get('base_url')}")
    parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
