"""rcll ingest with document files: uploaded to files/retain, converted on the workers, a
file that cannot be converted listed with its reason (exit status 1), the rest stored with
the path as document id and the page as provenance."""

import httpx
from click.testing import CliRunner

from rcll.cli import main as cli_main
from rcll.client import RCLLClient
from tests.retain import file_docs as docs


def test_ingest_converts_documents_and_reports_failures(monkeypatch, tmp_path, app, services,
                                                        worker):
    (tmp_path / "guide.pdf").write_bytes(docs.pdf(["Pier nine opens at dawn.",
                                                   "The ferry leaves at 22:40."]))
    (tmp_path / "notes.docx").write_bytes(docs.docx({"Crew": "Ines keeps the lamp."}))
    (tmp_path / "broken.pdf").write_bytes(b"not a pdf")
    (tmp_path / "readme.txt").write_text("Plain text still goes as an item.")
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    result = CliRunner().invoke(cli_main.cli, ["ingest", str(tmp_path), "--bank", "ingest-docs"],
                                env={"COLUMNS": "400"})
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "1 items" in out and "3 document files, 2 converted" in out, out
    assert "broken.pdf: cannot convert: cannot read the PDF" in out
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT d.document_id, u.metadata FROM memory_units u JOIN documents d"
                            " ON d.id = u.document_id WHERE u.bank_id = %s ORDER BY 1",
                            ("ingest-docs",)).fetchall()
    ids = [r["document_id"] for r in rows]
    assert ids == sorted([f"{tmp_path / 'guide.pdf'}#p1", f"{tmp_path / 'guide.pdf'}#p2",
                          str(tmp_path / "notes.docx"), str(tmp_path / "readme.txt")])
    page2 = next(r["metadata"] for r in rows if r["document_id"].endswith("#p2"))
    assert page2["path"] == str(tmp_path / "guide.pdf")
    assert page2["file"]["page"] == 2 and page2["file"]["name"] == "guide.pdf"


def test_ingest_sends_document_files_first_and_largest_first(monkeypatch, tmp_path, app,
                                                             services, worker):
    """rcll ingest sends the document files before the text items, the largest file first
    (rcll.cli.ingest.largest_first), so the longest conversion starts first and the ingest
    does not end on one large job; everything is stored."""
    (tmp_path / "small.pdf").write_bytes(docs.pdf(["Pier nine opens at dawn."]))
    (tmp_path / "large.pdf").write_bytes(docs.pdf([f"Page {i}: the ferry leaves at 22:{i:02d}."
                                                   for i in range(12)]))
    (tmp_path / "a-notes.txt").write_text("Plain text goes as an item, after the files.")
    assert (tmp_path / "large.pdf").stat().st_size > (tmp_path / "small.pdf").stat().st_size
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    sent: list[str] = []  # what reached the server, in order
    files, items = client.retain_files, client.retain
    monkeypatch.setattr(client, "retain_files", lambda bank, fs, meta: (
        sent.extend(name for name, _ in fs), files(bank, fs, meta))[1])
    monkeypatch.setattr(client, "retain", lambda bank, its, **kw: (
        sent.extend("item" for _ in its), items(bank, its, **kw))[1])
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    result = CliRunner().invoke(cli_main.cli, ["ingest", str(tmp_path), "--bank", "ingest-order"],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert sent == ["large.pdf", "small.pdf", "item"]
    assert "1 items" in result.output and "2 document files, 2 converted" in result.output


def test_largest_first_orders_by_size_and_keeps_ties_in_order(tmp_path):
    from rcll.cli.ingest import largest_first

    for name, size in (("b", 10), ("a", 30), ("c", 10), ("d", 20)):
        (tmp_path / name).write_bytes(b"x" * size)
    gone = tmp_path / "gone"  # removed after the listing: counts as empty, read later fails
    order = largest_first([tmp_path / n for n in ("b", "a", "c", "d")] + [gone])
    assert [p.name for p in order] == ["a", "d", "b", "c", "gone"]
