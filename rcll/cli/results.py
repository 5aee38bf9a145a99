"""How ``rcll recall`` shows a result: its source and its text cut to fit, the cut marked."""

from __future__ import annotations

import re

from rich.table import Table

from rcll.cli.console import add_data_row, plain

TEXT_CHARS = 240  # the text column's most characters (rich wraps them in the cell)


def clip(text: str, limit: int = TEXT_CHARS) -> str:
    """``text`` on one line (whitespace collapsed); when longer than ``limit`` characters, cut
    at the last word boundary before it (or at ``limit`` in a long word) and ended with ``…``
    (the result is at most ``limit`` characters)."""
    flat = re.sub(r"\s+", " ", text).strip()
    if len(flat) <= limit:
        return flat
    cut = flat[:limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def source(result: dict) -> str:
    """Where a result came from: ``<file name> p.<page>`` (PDF) or ``<file name> §<section
    index>/<sections>`` for an uploaded file (``metadata.file``), prefixed with the
    document id when that differs from the file name; else the ingested path
    (``metadata.path``), else ``document_id``, else ``-``."""
    meta = result.get("metadata") or {}
    doc = result.get("document_id")
    f = meta.get("file") if isinstance(meta.get("file"), dict) else None
    if f and f.get("name"):
        if f.get("page") is not None:
            where = f" p.{f['page']}"
        elif (f.get("sections") or 1) > 1 and f.get("section_index"):
            where = f" §{f['section_index']}/{f['sections']}"
        else:
            where = ""
        base = f.get("document_id")
        label = f"{f['name']}{where}"
        return f"{base}: {label}" if base and base != f["name"] else label
    if isinstance(meta.get("path"), str):
        return meta["path"]
    return doc or "-"


def recall_table(query: str, res: dict) -> Table:
    """The table ``rcll recall`` prints for one recall answer ``res`` (the API's JSON)."""
    table = Table(title=f"{plain(query)}  [tiers {', '.join(res.get('tiers') or []) or 'none'}, "
                        f"recipe {res.get('recipe')}, mode {res['mode']}, "
                        f"{(res.get('timings_ms') or {}).get('total')} ms]")
    for col in ("#", "score", "dense", "lexical", "room/hall", "source"):
        table.add_column(col)
    table.add_column("text", ratio=1, overflow="fold")
    for i, r in enumerate(res["results"], 1):
        # "final": every result has it (an L0 unit no channel found has no RRF score)
        # compact results (the token-budget policy) carry no ranks, room or hall
        ranks = r.get("ranks") or {}
        add_data_row(table, str(i), f"{r['scores']['final']:.4f}", str(ranks.get("dense")),
                      str(ranks.get("lexical")),
                      f"{r.get('room') or '-'}/{r.get('hall') or '-'}",
                      source(r), clip(r["text"]))
    return table
