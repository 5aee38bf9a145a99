"""The documentation site: ``mkdocs build --strict`` (warnings are errors) into a temporary
folder, its pages, the reference pages generated from the code (not copied), the
architecture page's file lists, and the README that points to it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GENERATED = ("reference/http.md", "reference/cli.md", "reference/configuration.md")


def _sources() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "HF_HUB_OFFLINE": "1",
           "RCLL_STATE_DIR": str(tmp_path_factory.mktemp("docs-state"))}
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr[-4000:]
    assert not re.search(r"^WARNING +-", r.stderr, re.M), r.stderr[-4000:]  # MkDocs' own
    pages = len(list(out.rglob("index.html")))
    print(f"\ndocs site: {pages} pages built in {took:.1f} s (mkdocs build --strict)")
    return out


def _html(site: Path, page: str) -> str:
    return (site / page.removesuffix(".md") / "index.html").read_text()


def test_every_page_is_built(site):
    """One HTML page per Markdown source plus the generated reference pages."""
    built = {str(p.parent.relative_to(site)) for p in site.rglob("index.html")}
    want = {"." if p.name == "index.md" and p.parent == DOCS else
            str(p.relative_to(DOCS).with_suffix("")).removesuffix("/index")
            for p in _sources()} | {g.removesuffix(".md") for g in GENERATED}
    assert want <= built, sorted(want - built)
    assert len(built) == len(want) >= 45


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    """The app's OpenAPI document, built as the docs hook builds it (nothing started)."""
    from api.app import create_app
    from api.openapi import build
    from rcll.config import Settings

    settings = Settings(state_dir=tmp_path_factory.mktemp("docs-app"), key_secret="t" * 40)
    app = create_app(settings)
    try:
        return build(app)
    finally:
        app.extensions["rcll"].close()  # its pools never reach a database here


def test_reference_pages_are_generated_not_copied(site, document):
    """No reference page is a file in docs/: the build writes them from the code, so every
    operation of the OpenAPI document, every click command and every setting is there."""
    from rcll.cli.main import cli
    from rcll.config import Settings

    assert not [g for g in GENERATED if (DOCS / g).exists()]
    http = _html(site, "reference/http.md")
    doc = document
    ops = [(m.upper(), p) for p, v in doc["paths"].items() for m in v]
    assert len(ops) >= 68
    missing = [op for op in ops if f"{op[0]} {op[1]}" not in http]
    assert missing == []
    assert all(f'id="schema-{re.sub(r"[^a-z0-9]+", "-", n.lower()).strip("-")}"' in http
               for n in doc["components"]["schemas"])

    def commands(cmd, path):
        yield " ".join(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from commands(sub, [*path, name])

    names = list(commands(cli, ["rcll"]))
    assert "rcll embeddings rebuild" in names and len(names) > 40
    cli_html = _html(site, "reference/cli.md")
    assert [n for n in names if f"<code>{n}</code>" not in cli_html] == []
    assert isinstance(cli, click.Group)
    conf = _html(site, "reference/configuration.md")
    envs = [f"RCLL_{f.upper()}" for f in Settings.model_fields]
    assert [e for e in envs if f"<code>{e}</code>" not in conf] == []


_PATH = re.compile(r"`((?:rcll|api|mcp_server|workers|deploy|compose|benchmarks|docs|tests|"
                   r"scripts)/[\w./-]*|mkdocs\.yml|pyproject\.toml)`")


@pytest.mark.parametrize("page", ["architecture.md", "index.md", "getting-started.md"])
def test_file_lists_name_files_that_exist(page):
    """Every path a page names in code spans exists in the checkout (the architecture
    page's file lists are true)."""
    text = (DOCS / page).read_text()
    paths = set(_PATH.findall(text))
    assert page != "architecture.md" or len(paths) > 80
    assert sorted(p for p in paths if not (ROOT / p.rstrip("/")).exists()) == []


def test_concept_and_guide_pages_name_files_that_exist():
    """The same for every hand-written page: a renamed module breaks the build test, not the
    reader (``…`` and ``<…>`` placeholders excepted)."""
    bad = []
    for p in _sources():
        for path in _PATH.findall(p.read_text()):
            if any(c in path for c in "*<…{") or path.endswith((".json", ".txt", ".md")) \
                    and "benchmarks/results/" in path:
                continue
            if not (ROOT / path.rstrip("/")).exists():
                bad.append((str(p.relative_to(DOCS)), path))
    assert bad == []


def test_readme_is_a_short_page_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 250
    assert "./scripts/quickstart.sh" in text and "./scripts/test.sh" in text
    assert "./scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    assert (ROOT / "scripts" / "quickstart.sh").exists()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [x for x in links if not x.startswith(("http://", "https://"))]
    assert len(local) > 10
    assert [x for x in local if not (ROOT / x).exists()] == []


def test_setup_installs_the_docs_build():
    """A fresh machine gets MkDocs and Material from the project's own files."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = " ".join(project["optional-dependencies"]["docs"])
    assert "mkdocs" in extra and "mkdocs-material" in extra
    assert '".[dev,docs]"' in (ROOT / "scripts" / "setup.sh").read_text()
