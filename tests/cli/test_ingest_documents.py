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
