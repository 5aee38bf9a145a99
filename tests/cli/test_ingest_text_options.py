"""Issue 22 item 5: ``rcll ingest --text-suffix`` and ``--extensionless-as-text`` take
``.rst``, source files and ``README``/``copyright`` as text; binaries are still refused."""

import httpx
from click.testing import CliRunner

from rcll.cli import main as cli_main
from rcll.cli.ingest import read_paths, text_suffixes
from rcll.client import RCLLClient
from tests.conftest import db_counts


def _folder(tmp_path):
    d = tmp_path / "pkg"
    d.mkdir()
    (d / "index.rst").write_text("Install\n=======\n\nRun ``make install`` as root.\n")
    (d / "setup.PY").write_text("# build the wheel\nfrom setuptools import setup\nsetup()\n")
    (d / "README").write_text("Zlib compresses data; see the copyright file.\n")
    (d / "copyright").write_text("Format: https://www.debian.org/doc/packaging-manuals/"
                                 "copyright-format/1.0/\nLicense: Zlib\n")
    (d / "notes.txt").write_text("Plain text, read as always.\n")
    (d / "tool").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(64))  # extensionless binary
    (d / "latin.rst").write_bytes("Caf\xe9 cr\xe8me.".encode("latin-1"))
    (d / "logo.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")  # a binary with a text suffix
    return d


def test_without_options_those_files_are_skipped(tmp_path):
    d = _folder(tmp_path)
    plan = read_paths([str(d)])
    assert plan.sources == [str(d / "notes.txt")]
    reasons = {s.source: s.reason for s in plan.skipped}
    assert set(reasons) == {str(d / n) for n in ("index.rst", "setup.PY", "README", "copyright",
                                                  "tool", "latin.rst", "logo.py")}
    assert all(r.startswith("unsupported file type") and "--text-suffix" in r
               for r in reasons.values())


def test_text_suffixes_and_extensionless_files_are_read_binaries_still_refused(tmp_path):
    d = _folder(tmp_path)
    plan = read_paths([str(d)], text_suffixes([".rst", "py"]), extensionless=True)
    assert sorted(plan.sources) == sorted(str(d / n) for n in (
        "index.rst", "setup.PY", "README", "copyright", "notes.txt"))
    by_source = dict(zip(plan.sources, plan.items, strict=True))
    item = by_source[str(d / "README")]
    assert item["content"] == "Zlib compresses data; see the copyright file.\n"
    assert item["document_id"] == str(d / "README") and item["metadata"] == {"path": str(d / "README")}
    reasons = {s.source: s.reason for s in plan.skipped}
    assert reasons == {str(d / "tool"): "binary file (NUL bytes)",
                       str(d / "latin.rst"): "not UTF-8 text (invalid continuation byte at byte 3)",
                       str(d / "logo.py"): "binary file (NUL bytes)"}
    # only the suffixes asked for: .py alone leaves .rst and README skipped
    plan = read_paths([str(d)], text_suffixes(["PY"]))
    assert sorted(plan.sources) == [str(d / "notes.txt"), str(d / "setup.PY")]


def test_bad_text_suffixes_are_refused():
    assert text_suffixes([".RST", "rst", "py"]) == (".rst", ".py")
    for bad in ("", ".", "a/b", ".pdf", "html", ".jsonl", "r st", ".tar.gz", "..md", "*"):
        try:
            text_suffixes([bad])
        except ValueError:
            continue
        raise AssertionError(bad)
    r = CliRunner().invoke(cli_main.cli, ["ingest", ".", "--bank", "b", "--text-suffix", ".pdf"])
    assert r.exit_code == 2 and "--text-suffix" in r.output and ".pdf" in r.output


def test_ingest_with_the_options_stores_the_text_files(monkeypatch, tmp_path, app, services,
                                                       worker):
    d = _folder(tmp_path)
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    help_text = CliRunner().invoke(cli_main.cli, ["ingest", "--help"]).output
    assert "--text-suffix SUFFIX" in help_text and "--extensionless-as-text" in help_text
    bank = "ingest-text-options"
    r = CliRunner().invoke(cli_main.cli, ["ingest", str(d), "--bank", bank, "--text-suffix",
                                          ".rst", "--text-suffix", ".py",
                                          "--extensionless-as-text"], env={"COLUMNS": "400"})
    out = " ".join(r.output.split())
    assert r.exit_code == 1, out  # the three binaries / non-UTF-8 files are skipped
    assert "5 items" in out and "skipped 3" in out
    assert db_counts(services, bank)["documents"] == 5
    with services.pool.connection() as conn:
        texts = [x["text"] for x in conn.execute(
            "SELECT text FROM memory_units WHERE bank_id = %s", (bank,)).fetchall()]
    assert any("make install" in t for t in texts) and any("License: Zlib" in t for t in texts)
