"""Layering (STYLE items 2–3, docs/architecture.md): entry points call ``rcll`` services, not
repositories, and the engine never imports the web or queue framework.

Read from the source with :mod:`ast` (every import form, inside functions too); no app,
database or worker is started.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = ("api", "mcp_server")

# Modules of api/ and mcp_server/ allowed to import rcll.store: none (issue 21 emptied it;
# before, 11 modules held 28 view → repository pairs).
ALLOWED: set[str] = set()

CONVERTED = (
    "api/routes/banks.py", "api/routes/entities.py", "api/routes/dedup.py",
    "api/routes/feedback.py", "api/routes/closets.py", "api/routes/access.py",
    "api/routes/tunnels.py", "api/routes/units.py",
)


def _modules(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute), at any depth: ``import a.b`` → ``a.b``,
    ``from a.b import c`` → ``a.b`` and ``a.b.c`` (``c`` may be a submodule)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def store_pairs(path: Path) -> set[str]:
    """The repositories (``rcll.store.<module>``) ``path`` imports."""
    found = set()
    for name in imported(path):
        if name == "rcll.store":
            continue  # only ``from rcll.store import x``: counted as rcll.store.x
        if name.startswith("rcll.store."):
            found.add(".".join(name.split(".")[:3]))
    return found


def _is(name: str, top: str) -> bool:
    return name == top or name.startswith(top + ".")


def test_imported_sees_every_form(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import rcll.store.jobs\nfrom rcll.store import audit, banks\n"
                   "from rcll.store.dedup import decide\n"
                   "def f():\n    from rcll.store import entities\n")
    assert store_pairs(src) == {"rcll.store.jobs", "rcll.store.audit", "rcll.store.banks",
                                "rcll.store.dedup", "rcll.store.entities"}


def test_entry_points_call_services_not_repositories(capsys):
    pairs = {_rel(p): store_pairs(p) for p in _modules(*ENTRY_POINTS)}
    pairs = {m: s for m, s in pairs.items() if s}
    offenders = {m: sorted(s) for m, s in pairs.items() if m not in ALLOWED}
    assert not offenders, f"call a service in rcll/, not rcll.store: {offenders}"
    for module in CONVERTED:
        assert module not in pairs, module
    remaining = sum(len(s) for s in pairs.values())
    with capsys.disabled():
        print(f"\nview → repository pairs left: {remaining} in {len(pairs)} modules "
              f"({', '.join(f'{m}: {len(s)}' for m, s in sorted(pairs.items()))})")
    stale = sorted(ALLOWED - set(pairs))
    assert not stale, f"no longer imports rcll.store: remove from ALLOWED: {stale}"


def test_engine_imports_neither_flask_nor_celery():
    bad = {_rel(p): sorted(n for n in imported(p)
                           if any(_is(n, top) for top in ("flask", "celery")))
           for p in _modules("rcll")}
    assert not {m: n for m, n in bad.items() if n}
