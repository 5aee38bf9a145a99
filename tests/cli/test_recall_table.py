"""``rcll recall``'s table: each result's source (document, file, page) and its text cut with
an ellipsis; ``rcll --version``; ``rcll mcp --help`` names ``rcll mcp``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from rcll.cli.main import cli
from rcll.cli.results import clip, recall_table, source

ROOT = Path(__file__).resolve().parents[2]
LONG = ("The reference answer names the Lisbon lease, which ends in May, and the Porto "
        "office, whose renewal the procurement team has not signed yet because the landlord "
        "asked for a longer term, a higher deposit and a new inventory of the furniture "
        "before the end of the quarter; the last sentence is here so the text runs long.")


def _hit(text: str, **fields) -> dict:
    return {"id": "u1", "text": text, "scores": {"final": 0.5}, "ranks": {"dense": 1},
            "room": "ops", "hall": "facts", **fields}


def test_clip_marks_the_cut_at_a_word_boundary():
    out = clip(LONG, 120)
    assert len(out) <= 120 and out.endswith("…")
    assert LONG.startswith(out[:-1])
    assert LONG[len(out) - 1] in " ,;"  # cut between words, not inside one
    assert clip("short\n text", 120) == "short text"  # not cut: no ellipsis


def test_source_names_file_page_section_path_or_document():
    pdf = _hit("x", document_id="handbook#p3", metadata={"file": {
        "name": "handbook.pdf", "document_id": "handbook", "page": 3, "pages": 9}})
    assert source(pdf) == "handbook: handbook.pdf p.3"
    same = _hit("x", document_id="guide.docx#s2", metadata={"file": {
        "name": "guide.docx", "document_id": "guide.docx", "section": "Setup",
        "section_index": 2, "sections": 4}})
    assert source(same) == "guide.docx §2/4"
    assert source(_hit("x", document_id="notes/a.md", metadata={"path": "notes/a.md"})) \
        == "notes/a.md"
    assert source(_hit("x", document_id="doc-7", metadata={})) == "doc-7"
    assert source(_hit("x")) == "-"


def test_table_shows_source_and_ellipsis():
    res = {"results": [_hit(LONG, document_id="handbook#p3", metadata={"file": {
        "name": "handbook.pdf", "document_id": "handbook", "page": 3}})],
        "tiers": ["cold"], "recipe": "hybrid", "mode": "B", "timings_ms": {"total": 12.5}}
    console = Console(width=200, record=True)
    console.print(recall_table("lisbon lease", res))
    text = console.export_text()
    assert "source" in text and "handbook.pdf p.3" in text
    assert "…" in text and "last sentence is here" not in text


def test_version():
    out = CliRunner().invoke(cli, ["--version"])
    assert out.exit_code == 0 and out.output.strip() == "rcll 0.1.0"


def test_mcp_help_names_rcll_mcp():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "rcll.cli.main", "mcp", "--help"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Usage: rcll mcp [OPTIONS]")
    assert "python -m" not in out.stdout and "RCLL_MCP_PORT" in out.stdout
