"""Issue 5 fault 16: one oversized or unreadable file does not abort a folder ingest; a
large document is accepted and chunked; what cannot be taken is skipped and listed."""

import random

import httpx
import pytest
from click.testing import CliRunner

from api.app import create_app
from rcll.bootstrap import bootstrap
from rcll.cli import main as cli_main
from rcll.client import RCLLClient
from tests.conftest import db_counts


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs")
    for i in range(5):
        (d / f"small-{i}.txt").write_text(f"Licence {i}: permission is granted to copy "
                                          f"module {i} under the terms of clause {i + 3}.\n")
    rnd = random.Random(16)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    lines, size = [], 0
    while size < 3 * 1024 * 1024:
        line = f"record {len(lines)}: " + "".join(rnd.choice(alphabet) for _ in range(150))
        lines.append(line)
        size += len(line) + 1
    (d / "big.txt").write_text("\n".join(lines) + "\nThe big file ends with the word zanzibar.\n")
    (d / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (d / "latin1.md").write_bytes("Caf\xe9 cr\xe8me, na\xefve r\xe9sum\xe9.".encode("latin-1"))
    (d / "photo.png").write_bytes(b"\x89PNG\r\n")  # not a text suffix: listed as skipped
    return d


def _run(monkeypatch, app, folder, bank):
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    return CliRunner().invoke(cli_main.cli, ["ingest", str(folder), "--bank", bank,
                                             "--batch-size", "3"], env={"COLUMNS": "400"})


@pytest.mark.slow
def test_large_file_is_ingested_and_unreadable_files_are_skipped(monkeypatch, folder, services,
                                                                 worker, settings):
    big = bootstrap(settings.model_copy(update={"max_item_chars": 32_000_000}))
    try:
        app = create_app(services=big)
        bank = "ingest-big"
        result = _run(monkeypatch, app, folder, bank)
        out = " ".join(result.output.split())
        assert result.exit_code == 1, out  # something was skipped
        assert "6 items" in out
        assert f"{folder / 'image.txt'}: binary file" in out
        assert f"{folder / 'latin1.md'}: not UTF-8 text" in out
        assert f"{folder / 'photo.png'}: unsupported file type" in out
        assert "skipped 3" in out
        assert db_counts(services, bank)["documents"] == 6, out
        with services.pool.connection() as conn:
            rows = conn.execute(
                """SELECT u.text, u.token_count FROM memory_units u JOIN documents d
                   ON d.id = u.document_id WHERE u.bank_id = %s AND d.document_id = %s
                   AND u.invalidated_reason IS NULL""", (bank, str(folder / "big.txt"))).fetchall()
        assert len(rows) > 100
        assert max(r["token_count"] for r in rows) <= services.chunk_tokens
        assert any("zanzibar" in r["text"] for r in rows)
    finally:
        big.close()


def test_file_refused_by_the_server_is_skipped_and_the_rest_ingested(monkeypatch, folder, app,
                                                                     services, worker):
    bank = "ingest-refused"  # the test app takes at most 5,000 characters per item
    result = _run(monkeypatch, app, folder, bank)
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert f"{folder / 'big.txt'}: item_too_large" in out
    assert "skipped 4" in out and "5 items" in out
    assert db_counts(services, bank)["documents"] == 5
    # a changed file ingested again leaves exactly its latest version live
    (folder / "small-0.txt").write_text("Licence 0 now forbids copying module 0.\n")
    _run(monkeypatch, app, folder, bank)
    with services.pool.connection() as conn:
        live = conn.execute(
            """SELECT u.text FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s AND d.document_id = %s AND u.invalidated_reason IS NULL""",
            (bank, str(folder / "small-0.txt"))).fetchall()
    assert [r["text"] for r in live] == ["Licence 0 now forbids copying module 0."]


def test_every_file_that_cannot_be_taken_is_listed_never_dropped_or_fatal(tmp_path):
    """Newcomer finding: a binary file without a text suffix was silently ignored in a
    folder, and named on the command line it aborted the whole ingest."""
    from rcll.cli.ingest import read_paths

    d = tmp_path / "mixed"
    (d / ".git").mkdir(parents=True)
    (d / ".git" / "config").write_text("[core]\n")  # hidden: not read at all
    (d / "note.txt").write_text("Ops: rotate the TLS certificates every 90 days.\n")
    (d / "NOTES.MD").write_text("# Upper-case suffix\nStill a markdown file.\n")
    (d / "blob.bin").write_bytes(bytes(range(256)))
    (d / "items.jsonl").write_text('{"content": "one"}\nnot json\n[1, 2]\n{"content": "two"}\n')
    named = tmp_path / "named.odt"  # no converter for it (a .pdf is a document file now)
    named.write_bytes(b"PK\x03\x04")
    (d / "manual.pdf").write_bytes(b"%PDF-1.7")
    plan = read_paths([str(d), str(named)])
    assert plan.files == [d / "manual.pdf"]  # uploaded to files/retain, converted there
    assert sorted(plan.sources) == sorted([str(d / "note.txt"), str(d / "NOTES.MD"),
                                           f"{d / 'items.jsonl'}:1", f"{d / 'items.jsonl'}:4"])
    reasons = {s.source: s.reason for s in plan.skipped}
    assert set(reasons) == {str(d / "blob.bin"), str(named), f"{d / 'items.jsonl'}:2",
                            f"{d / 'items.jsonl'}:3"}
    assert reasons[str(d / "blob.bin")].startswith("unsupported file type")
    assert reasons[str(named)].startswith("unsupported file type")
    assert reasons[f"{d / 'items.jsonl'}:2"].startswith("invalid JSON")
    assert reasons[f"{d / 'items.jsonl'}:3"] == "not a JSON object (an item)"


def test_a_jsonl_line_nested_too_deeply_is_skipped_and_the_rest_read(tmp_path):
    """Fault 10: a JSONL line nested 50,000 deep raised RecursionError out of read_paths
    (the whole ingest stopped); it is skipped with the reason like any other bad line."""
    from rcll.cli.ingest import read_paths

    f = tmp_path / "items.jsonl"
    f.write_text('{"content": "kept"}\n' + "[" * 50_000 + "]" * 50_000 + "\n"
                 '{"content": "also kept", "metadata": {"a": ' + "[" * 70 + "]" * 70 + "}}\n")
    plan = read_paths([str(f)])
    assert [i["content"] for i in plan.items] == ["kept"]
    assert [(s.source, s.reason) for s in plan.skipped] == [
        (f"{f}:2", "invalid JSON: nested deeper than 64 levels"),
        (f"{f}:3", "invalid JSON: nested deeper than 64 levels")]


def test_a_file_whose_name_is_not_utf8_gets_a_document_id_the_server_stores(tmp_path):
    """A file named in Latin-1 on disk: its path held a lone surrogate (Python's spelling of
    the byte), which every retain refuses; its id now keeps the name with the byte written
    as ``\\xe9``. Stop 36 findings: with U+FFFD for every such byte, two files whose names
    differ only there got one document id, and the second replaced the first; and a name
    with a literal ``\\xfe`` matched the escaped byte until backslashes were doubled."""
    import os

    from rcll.cli.ingest import read_paths
    from rcll.retain.models import RetainItem

    raw = os.fsencode(tmp_path) + b"/caf\xe9 notes.md"
    with open(raw, "wb") as fh:
        fh.write(b"# Menu\nCoffee is served until eleven.\n")
    for name, text in ((b"/n\xffx.md", b"first file: walruses\n"),
                       (b"/n\xfex.md", b"second file: narwhals\n"),
                       (b"/n\\xfex.md", b"third file, a backslash in its name: seals\n")):
        with open(os.fsencode(tmp_path) + name, "wb") as fh:
            fh.write(text)
    plan = read_paths([str(tmp_path)])
    ids = {i["content"]: i["document_id"] for i in plan.items}
    assert ids["# Menu\nCoffee is served until eleven.\n"] == f"{tmp_path}/caf\\xe9 notes.md"
    assert ids["first file: walruses\n"] == f"{tmp_path}/n\\xffx.md"
    assert ids["second file: narwhals\n"] == f"{tmp_path}/n\\xfex.md"
    # a literal backslash is doubled: the name spelled like an escaped byte stays its own
    assert ids["third file, a backslash in its name: seals\n"] == f"{tmp_path}/n\\\\xfex.md"
    for item in plan.items:
        assert item["metadata"] == {"path": item["document_id"]}
        RetainItem.model_validate(item)  # no lone surrogate left: storable


def test_paths_that_are_not_regular_files_are_skipped_never_opened(tmp_path):
    """Stop 36 findings: a FIFO named on the command line hung ``rcll ingest`` (read
    blocked), and inside a folder FIFOs, broken or looping links and linked folders were
    dropped without a word. Each is listed as skipped; a file named twice is read once."""
    import os

    from rcll.cli.ingest import read_paths

    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "s.md").write_text("# Service\nRestart the daemon after an upgrade.\n")
    os.mkfifo(d / "pipe.txt")
    os.mkfifo(tmp_path / "named.txt")
    (d / "loop.txt").symlink_to(d / "loop.txt")
    (d / "gone.md").symlink_to(tmp_path / "missing.md")
    (d / "linked").symlink_to(d / "sub", target_is_directory=True)
    plan = read_paths([str(d), str(d / "sub"), str(d / "sub" / "s.md"),
                       str(tmp_path / "named.txt"), str(tmp_path / "nowhere.md")])
    assert plan.sources == [str(d / "sub" / "s.md")]  # once, though named three times
    reasons = {s.source: s.reason for s in plan.skipped}
    not_regular = "not a regular file (a FIFO, socket, device or broken symbolic link)"
    assert reasons == {str(d / "pipe.txt"): not_regular, str(d / "loop.txt"): not_regular,
                       str(d / "gone.md"): not_regular,
                       str(d / "linked"): "symbolic link to a folder (not followed)",
                       str(tmp_path / "named.txt"): not_regular,
                       str(tmp_path / "nowhere.md"): "no such file"}


def test_jsonl_lines_end_at_newline_only_and_a_bom_is_dropped(tmp_path):
    """Stop 36 finding: ``str.splitlines`` cut lines at U+2028 and U+0085, which JSON allows
    inside a string, so valid items were refused and later line numbers were wrong; a UTF-8
    byte-order mark made line 1 invalid JSON."""
    import json

    from rcll.cli.ingest import read_paths

    f = tmp_path / "items.jsonl"
    lines = [json.dumps({"content": "a\u2028b"}, ensure_ascii=False),
             json.dumps({"content": "c\x85d"}, ensure_ascii=False), "not json",
             json.dumps({"content": "last"})]
    f.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8") + b"\r\n")
    plan = read_paths([str(f)])
    assert [i["content"] for i in plan.items] == ["a\u2028b", "c\x85d", "last"]
    assert plan.sources == [f"{f}:1", f"{f}:2", f"{f}:4"]
    assert [s.source for s in plan.skipped] == [f"{f}:3"]
    md = tmp_path / "bom.md"
    md.write_bytes(b"\xef\xbb\xbf# Title\nBody.\n")
    zw = tmp_path / "zero-width.txt"
    zw.write_bytes("\u200b\u200b\n".encode())
    plan = read_paths([str(md), str(zw)])
    assert [i["content"] for i in plan.items] == ["# Title\nBody.\n"]
    assert [(s.source, s.reason) for s in plan.skipped] == [(str(zw), "empty file")]


def test_names_and_messages_with_markup_characters_are_printed_as_they_are(monkeypatch,
                                                                          tmp_path, app):
    """Stop 36 finding: ``rcll ingest`` printed skipped paths as Rich markup, so a folder
    named ``x[`` with a file ``b].bin`` (``x[/b].bin``) raised ``MarkupError`` after the jobs ran. Every
    data cell and message of the CLI goes through :mod:`rcll.cli.console`."""
    import httpx
    from click.testing import CliRunner

    from rcll.cli import main as cli_main
    from rcll.cli.console import out
    from rcll.cli.results import recall_table
    from rcll.client import RCLLClient

    d = tmp_path / "x["
    d.mkdir()
    (d / "b].bin").write_bytes(b"\x00")  # printed as ".../x[/b].bin": a closing tag
    (d / "[red].bin").write_bytes(b"\x00")
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    (d / "loop.md").symlink_to(d / "loop.md")  # named on the command line: skipped, not fatal
    r = CliRunner().invoke(cli_main.cli, ["ingest", str(d), str(d / "loop.md"),
                                          "--bank", "markup-names"])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 1  # something was skipped
    shown = "".join(r.output.split())  # the console wraps long lines at spaces
    assert f"{d}/b].bin:unsupportedfiletype" in shown
    assert f"{d}/[red].bin:unsupportedfiletype" in shown
    assert f"{d}/loop.md:notaregularfile" in shown
    res = {"results": [{"id": "u1", "text": "a memory that says [/b] and [red]", "scores":
                        {"final": 0.5}, "ranks": {}, "document_id": "[/i]doc"}],
           "tiers": ["cold"], "recipe": "default", "mode": "A", "timings_ms": {"total": 3}}
    console = out()
    with console.capture() as cap:
        console.print(recall_table("what is [/b]?", res))
    shown = cap.get()
    assert "[/b] and [red]" in shown and "what is [/b]?" in shown


def test_an_item_the_server_refuses_is_skipped_with_the_field_and_the_reason(monkeypatch,
                                                                            tmp_path, app):
    """Stop 36 finding: a refusal showed only ``invalid_request: request failed
    validation``; the field and the rule are in the answer's details, and the reason now
    carries them (:meth:`rcll.client.RCLLHTTPError.describe`)."""
    import json

    from rcll.client import RCLLHTTPError

    f = tmp_path / "items.jsonl"
    f.write_text(json.dumps({"content": "kept"}) + "\n"
                 + json.dumps({"content": "refused", "document_id": "d" * 600}) + "\n")
    r = _run(monkeypatch, app, f, "refusal-details")
    shown = " ".join(r.output.split())
    assert r.exit_code == 1, shown
    assert f"{f}:2: invalid_request: request failed validation (items.0.document_id:" in shown
    assert "at most 512 characters" in shown
    err = RCLLHTTPError(400, "invalid_request", "bad", {"errors": [
        {"loc": "", "msg": "Value error, one"}, {"loc": "a", "msg": "two"},
        {"loc": "b", "msg": "three"}, {"loc": "c", "msg": "four"}]})
    assert err.describe() == ("invalid_request: bad (body: Value error, one; a: two; b: three;"
                              " 1 more)")
    assert RCLLHTTPError(503, "overloaded", "busy").describe() == "overloaded: busy"


def test_paths_that_give_nothing_to_send_are_listed_without_a_server(monkeypatch, tmp_path):
    """With ``click.Path(exists=True)`` gone (a broken link named on the command line is
    skipped, not fatal), a missing path must still be said at once: nothing to send means
    no server is asked, the skipped list is printed and the exit status is 1."""
    from click.testing import CliRunner

    from rcll.cli import main as cli_main

    def no_server():
        raise AssertionError("the server was asked though nothing could be sent")

    monkeypatch.setattr(cli_main, "_client", no_server)
    (tmp_path / "gone.md").symlink_to(tmp_path / "missing.md")
    r = CliRunner().invoke(cli_main.cli, ["ingest", str(tmp_path / "nowhere.txt"),
                                          str(tmp_path / "gone.md"), "--bank", "b"])
    shown = " ".join(r.output.split())
    assert r.exit_code == 1, (r.output, r.exception)
    assert f"skipped 2: {tmp_path}/nowhere.txt: no such file" in shown
    assert f"{tmp_path}/gone.md: not a regular file" in shown
