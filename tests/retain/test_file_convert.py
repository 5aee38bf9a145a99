"""Document conversion (rcll.files.convert): pages of a PDF, sections of DOCX/PPTX/XLSX/
EPUB/HTML/Markdown, and the reasons a file cannot be converted. No stack needed."""

import pytest

from rcll.files import convert
from rcll.files.stage import items_for
from rcll.retain import stages
from tests.retain import file_docs as docs


def test_pdf_is_split_per_page_and_blank_pages_are_dropped():
    data = docs.pdf(["Alpha page one text.", "Beta page two text.", "", "Gamma four"])
    got = convert.convert(data, "Manual.PDF")
    assert [(s.page, s.pages, s.text) for s in got] == [
        (1, 4, "Alpha page one text."), (2, 4, "Beta page two text."), (4, 4, "Gamma four")]


@pytest.mark.parametrize("name, data, expected", [
    ("a.docx", docs.docx({"Intro": "The keeper logs weather.", "Storms": "Season starts."}),
     [("Intro", "The keeper logs weather."), ("Storms", "Season starts.")]),
    ("a.pptx", docs.pptx({"Quarterly plan": "Ship the ferry schedule.", "Risks": "Fog delays"}),
     [("slide 1: Quarterly plan", "Ship the ferry schedule."), ("slide 2: Risks", "Fog delays")]),
    ("a.xlsx", docs.xlsx({"Budget": [["item", "cost"], ["rope", 12]], "Staff": [["name"], ["Ada"]]}),
     [("Budget", "| rope | 12 |"), ("Staff", "| Ada |")]),
    ("a.epub", docs.epub({"Chapter One": "The tide came in.", "Chapter Two": "The boat left."}),
     [("Chapter One", "The tide came in."), ("Chapter Two", "The boat left.")]),
    ("a.html", b"<html><body><h1>Top</h1><p>para one</p><h2>Sub</h2><p>para two</p></body></html>",
     [("Top", "para one"), ("Sub", "para two")]),
    ("notes.md", b"intro line\n# H\ntext\n## H2\nmore\n### H3\ndeeper", [(None, "intro line"),
                                                                      ("H", "text"), ("H2", "deeper")]),
])
def test_sections_carry_their_heading(name, data, expected):
    got = convert.convert(data, name)
    titled = {s.section: s.text for s in got}
    for section, text in expected:
        assert section in titled, (section, [s.section for s in got])
        assert text in titled[section]
    assert all(s.page is None and s.text.strip() for s in got)


@pytest.mark.parametrize("name, data, reason", [
    ("bad.pdf", b"hello, not a pdf", "cannot read the PDF"),
    ("scan.pdf", docs.pdf(["", ""]), "no text in the PDF"),
    ("bad.docx", b"PK\x03\x04 not a zip", "not a DOCX file"),
    ("broken.xlsx", docs.xlsx({"S": [["a"]]})[:300] + b"\0" * 2000, "not a XLSX file|markitdown"),
    ("trunc.pptx", docs.pptx({"T": "x"})[:-200], "not a PPTX|markitdown could not convert it"),
    ("latin1.txt", "caf\xe9".encode("latin-1"), "not UTF-8 text"),
    ("empty.html", b"<html><body>  </body></html>", "no text"),
    ("photo.png", b"\x89PNG\r\n", "unsupported file type"),
])
def test_unconvertible_files_raise_the_reason(name, data, reason):
    with pytest.raises(convert.ConversionError, match=reason):
        convert.convert(data, name)


def test_type_from_suffix_or_declared_content_type():
    assert convert.file_type("x.HTM") == (".htm", "text/html")
    assert convert.file_type("upload", "application/pdf") == (".pdf", "application/pdf")
    assert convert.file_type("x.doc", "application/msword") is None


def test_clean_removes_what_retain_refuses():
    assert convert.clean("a\x00b\r\nc\x02\nd\ud83d") == "ab\ncd?"


def test_items_keep_provenance_and_one_document_per_page():
    entry = {"file": {"name": "m.pdf", "type": "application/pdf", "size": 10, "sha256": "ab"},
             "document_id": "docs/m.pdf", "metadata": {"team": "ops"}, "tags": ["manual"],
             "context": None, "timestamp": None, "audience": "bank", "purposes": ["assist"]}
    sections = [convert.Section("one", page=1, pages=2), convert.Section("two", page=2, pages=2)]
    items = items_for(entry, sections)
    assert [i["document_id"] for i in items] == ["docs/m.pdf#p1", "docs/m.pdf#p2"]
    assert items[1]["metadata"] == {"team": "ops", "file": {
        "name": "m.pdf", "type": "application/pdf", "size": 10, "sha256": "ab",
        "document_id": "docs/m.pdf", "page": 2, "pages": 2}}
    one = items_for(entry, [convert.Section("all", section="Intro")])
    assert one[0]["document_id"] == "docs/m.pdf"
    assert one[0]["metadata"]["file"]["section"] == "Intro"


def test_the_recovery_sweep_knows_the_convert_step():
    from workers.queues import ROUTES

    step = stages.by_name("convert")
    assert (step.name, step.task_name, step.queue) == ("convert", "retain.convert", "extract")
    assert ROUTES["retain.convert"] == {"queue": "extract"}
