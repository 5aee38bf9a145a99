"""Every documentation reference in the code resolves: ``docs/<page>.md`` (with an optional
``"Heading"`` after it) names a page of the site and one of its headings, ``spec §N`` a
section of ``docs/spec.md`` and ``§N.M`` item M of that section's numbered list, and no
``README "Section"`` reference is left (the README is a short page; its sections moved to
docs/)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GENERATED = {"reference/http.md", "reference/cli.md", "reference/configuration.md"}
SCANNED = ("rcll", "api", "mcp_server", "workers", "deploy", "compose", "benchmarks", "tests",
           "scripts")
DOC_REF = re.compile(r'docs/((?:[\w-]+/)*[\w.-]+\.md)(?:#([\w-]+))?(?:[ ]\\?"([^"\\\n]+)\\?")?')
README_REF = re.compile(r'README \\?"([^"\\]+)\\?"')
SPEC_REF = re.compile(r"§\s*(\d+)(?:\.(\d+))?")
THIS = Path(__file__).name


def _files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", *SCANNED], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    return [ROOT / f for f in out if Path(f).suffix in (".py", ".yaml", ".yml", ".toml", ".sh",
                                                         ".example", ".md", "")
            and Path(f).name != THIS and (ROOT / f).is_file()]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[`*]|\{[^}]*\}", "", text).split()).lower()


def _headings(page: str) -> set[str]:
    return {_norm(m) for m in re.findall(r"^#{1,6} (.+?)\s*$", (DOCS / page).read_text(), re.M)}


def _anchor(heading: str) -> str:
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", _norm(heading))).strip("-")


def test_docs_references_in_code_resolve():
    refs, bad = 0, []
    for f in _files():
        for m in DOC_REF.finditer(f.read_text(errors="replace")):
            page, anchor, heading = m.groups()
            refs += 1
            where = f"{f.relative_to(ROOT)}: {m.group(0)}"
            if page in GENERATED:
                continue
            if not (DOCS / page).is_file():
                bad.append(f"{where} (no page)")
                continue
            heads = _headings(page)
            if heading and _norm(heading) not in heads:
                bad.append(f"{where} (no heading {heading!r})")
            if anchor and anchor not in {_anchor(h) for h in heads}:
                bad.append(f"{where} (no anchor)")
    assert bad == []
    assert refs >= 60  # the code cites the docs where it used to cite README sections


def test_no_readme_section_reference_is_left():
    readme = {_norm(h) for h in re.findall(r"^#{1,6} (.+?)\s*$",
                                             (ROOT / "README.md").read_text(), re.M)}
    left = [f"{f.relative_to(ROOT)}: {m.group(0)}" for f in _files()
            for m in README_REF.finditer(f.read_text(errors="replace"))
            if _norm(m.group(1)) not in readme]
    assert left == []


def _spec_sections() -> dict[int, str]:
    text = (DOCS / "spec.md").read_text()
    parts = re.split(r"^## (\d+)\. .*$", text, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_spec_references_resolve_in_the_repository():
    """The contract is in the repository (docs/spec.md) and every ``§`` the code cites is
    there: the section, and the numbered item for ``§N.M``."""
    sections = _spec_sections()
    assert set(sections) == set(range(1, 11))
    cited, bad = 0, []
    for f in _files():
        if f.is_relative_to(ROOT / "tests"):
            continue
        for m in SPEC_REF.finditer(f.read_text(errors="replace")):
            cited += 1
            n, item = int(m.group(1)), m.group(2)
            if n not in sections:
                bad.append(f"{f.relative_to(ROOT)}: {m.group(0)}")
            elif item and not re.search(rf"^\s*{int(item)}\. ", sections[n], re.M):
                bad.append(f"{f.relative_to(ROOT)}: {m.group(0)} (no item {item})")
    assert bad == []
    assert cited >= 100
