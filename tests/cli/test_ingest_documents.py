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


def test_ingest_sends_files_and_item_batches_largest_first(monkeypatch, tmp_path, app,
                                                           services, worker):
    """rcll ingest sends document files and item batches together, largest first
    (rcll.cli.ingest.send_order): a text file larger than a small PDF goes before it, so the
    longest jobs start first and the ingest does not end on one large job; everything is
    stored."""
    (tmp_path / "small.pdf").write_bytes(docs.pdf(["Pier nine opens at dawn."]))
    (tmp_path / "large.pdf").write_bytes(docs.pdf([f"Page {i}: the ferry leaves at 22:{i:02d}."
                                                   for i in range(12)]))
    small, large = ((tmp_path / n).stat().st_size for n in ("small.pdf", "large.pdf"))
    (tmp_path / "a-notes.txt").write_text("Plain text goes as an item, after the files.")
    between = (small + large) // 2  # a text file's bytes between the two PDFs'
    (tmp_path / "b-log.txt").write_text(("The ferry left pier nine at dawn. " * 400)[:between])
    assert small < between < large
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    sent: list[str] = []  # what reached the server, in order
    files, items = client.retain_files, client.retain
    monkeypatch.setattr(client, "retain_files", lambda bank, fs, meta: (
        sent.extend(name for name, _ in fs), files(bank, fs, meta))[1])
    monkeypatch.setattr(client, "retain", lambda bank, its, **kw: (
        sent.append("+".join(i["content"][:5] for i in its)), items(bank, its, **kw))[1])
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    result = CliRunner().invoke(cli_main.cli, ["ingest", str(tmp_path), "--bank", "ingest-order"],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    # both text files are one batch (under 64 KiB) of more bytes than small.pdf
    assert sent == ["large.pdf", "Plain+The f", "small.pdf"]
    assert "2 items" in result.output and "2 document files, 2 converted" in result.output


def test_send_order_keeps_each_lists_order_and_takes_the_larger_next(tmp_path):
    from rcll.cli.ingest import send_order

    files = []
    for name, size in (("f40", 40), ("f20", 20), ("f5", 5)):
        (tmp_path / name).write_bytes(b"x" * size)
        files.append(tmp_path / name)
    items = [{"content": "y" * n} for n in (10, 30, 20)]
    # batches of one item: 10, then 30, then 20 bytes; the 30 waits behind the 10 (order kept)
    steps = send_order(files, items, [range(0, 1), range(1, 2), range(2, 3)])
    assert [(k, [p.name for p in w] if k == "files" else list(w)) for k, w in steps] == [
        ("files", ["f40", "f20"]), ("items", [0]), ("items", [1]), ("items", [2]),
        ("files", ["f5"])]
    tie = send_order(files[2:], [{"content": "y" * 5}], [range(0, 1)])
    assert [k for k, _ in tie] == ["files", "items"]  # a tie: the file first
    assert send_order([], [], []) == []


def test_largest_first_orders_by_size_and_keeps_ties_in_order(tmp_path):
    from rcll.cli.ingest import largest_first

    for name, size in (("b", 10), ("a", 30), ("c", 10), ("d", 20)):
        (tmp_path / name).write_bytes(b"x" * size)
    gone = tmp_path / "gone"  # removed after the listing: counts as empty, read later fails
    order = largest_first([tmp_path / n for n in ("b", "a", "c", "d")] + [gone])
    assert [p.name for p in order] == ["a", "d", "b", "c", "gone"]
