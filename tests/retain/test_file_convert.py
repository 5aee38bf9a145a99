"""Document conversion (rcll.files.convert): pages of a PDF, sections of DOCX/PPTX/XLSX/
EPUB/HTML/Markdown, and the reasons a file cannot be converted. No stack needed."""

import dataclasses

import pytest

from rcll.files import convert, sandbox
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
    # stop 36 finding: zero-width characters passed .strip() and failed the job later with
    # a raw ValidationError ("content must not be blank") instead of "no text"
    ("zw.txt", "\u200b\u200b\n".encode(), "no text"),
    ("zw.md", "# Title\n\u200b\n\n# Other\n\ufeff\u2060\n".encode(), "no text"),
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


# --- bounds (fault 9: file bombs) --------------------------------------------------------

def test_a_pdf_page_tree_bomb_fails_on_its_page_count_before_any_page_is_read():
    bomb = docs.pdf_fanout(4)  # 10 x 10 x 10 x 10 names of one page
    assert len(bomb) < 1500
    with pytest.raises(convert.LimitExceeded) as exc:
        convert.convert(bomb, "bomb.pdf")
    assert str(exc.value) == ("the PDF has 10000 pages, more than 5000 "
                              "(RCLL_FILE_MAX_PAGES=5000)")


def test_characters_are_capped_as_pages_are_read_not_after():
    lim = dataclasses.replace(convert.DEFAULT_LIMITS, max_chars=1000)
    with pytest.raises(convert.LimitExceeded) as exc:
        convert.convert(docs.pdf_fanout(3), "long.pdf", limits=lim)  # 1000 pages of 27 chars
    assert str(exc.value) == ("more than 1000 characters of text by page 38 of 1000 "
                              "(RCLL_FILE_MAX_CHARS=1000)")
    with pytest.raises(convert.LimitExceeded, match=r"more than 10 characters .*MAX_CHARS=10"):
        convert.convert(b"# T\n" + b"word " * 10, "n.md",
                        limits=dataclasses.replace(lim, max_chars=10))


@pytest.mark.parametrize("name, data, reason", [
    ("bomb.docx", docs.docx_paragraph_bomb(), r"ZIP entry 'word/document.xml' is compressed "
     r"\d+:1 \(6000169 bytes from \d+\), more than 100:1 \(RCLL_FILE_MAX_ZIP_RATIO=100\)"),
    ("many.epub", docs.zip_many_entries(20_000, b"application/epub+zip"),
     r"the ZIP container has 20001 entries, more than 10000 \(RCLL_FILE_MAX_ZIP_ENTRIES=10000\)"),
    ("many.xlsx", docs.zip_many_entries(20_000), r"has 20000 entries"),
])
def test_zip_bombs_fail_on_their_central_directory(name, data, reason):
    assert len(data) < 2_000_000
    with pytest.raises(convert.LimitExceeded, match=reason):  # raised before any entry is read
        convert.convert(data, name)


def test_the_uncompressed_total_is_bounded():
    lim = dataclasses.replace(convert.DEFAULT_LIMITS, max_unzipped_bytes=10_000)
    data = docs.docx({"A": "y " * 10_000})
    with pytest.raises(convert.LimitExceeded, match=r"unpacks to \d+ bytes, more than 10000 "
                       r"\(RCLL_FILE_MAX_UNZIPPED_BYTES=10000\)"):
        convert.convert(data, "big.docx", limits=lim)


def test_the_sandbox_converts_in_a_child_and_keeps_the_bounds():
    got = sandbox.convert_bounded(docs.pdf(["Alpha one.", "Beta two."]), "m.pdf", None,
                                  convert.DEFAULT_LIMITS)
    assert [(s.page, s.pages, s.text) for s in got] == [(1, 2, "Alpha one."), (2, 2, "Beta two.")]
    with pytest.raises(convert.LimitExceeded, match=r"10000 pages.*RCLL_FILE_MAX_PAGES=5000"):
        sandbox.convert_bounded(docs.pdf_fanout(4), "bomb.pdf", None, convert.DEFAULT_LIMITS)
    with pytest.raises(convert.ConversionError, match="cannot read the PDF"):
        sandbox.convert_bounded(b"%PDF-1.4 not really", "bad.pdf", None, convert.DEFAULT_LIMITS)


def test_the_sandbox_stops_a_conversion_at_its_time_limit():
    # a million pages with the page and character bounds lifted: only the clock stops it
    lim = dataclasses.replace(convert.DEFAULT_LIMITS, max_pages=10**7, max_chars=10**9,
                              timeout_s=2)
    with pytest.raises(convert.LimitExceeded) as exc:  # the message says the clock stopped it
        sandbox.convert_bounded(docs.pdf_fanout(6), "slow.pdf", None, lim)
    assert str(exc.value) == "conversion took longer than 2 s (RCLL_FILE_CONVERT_TIMEOUT_S=2)"


def test_the_sandbox_stops_a_conversion_at_its_memory_limit():
    # the DOCX bomb with its ZIP check lifted: markitdown needs over a GB for it
    lim = dataclasses.replace(convert.DEFAULT_LIMITS, max_zip_ratio=1e9, max_memory_mb=500,
                              timeout_s=100)
    with pytest.raises(convert.LimitExceeded,
                       match=r"memory.*500 MiB \(RCLL_FILE_CONVERT_MAX_MEMORY_MB=500\)"):
        sandbox.convert_bounded(docs.docx_paragraph_bomb(), "bomb.docx", None, lim)


def test_office_and_html_files_convert_without_building_markitdowns_type_sniffer(monkeypatch):
    """Each type's markitdown converter is called directly: magika's ONNX session (which a
    forked child would otherwise build per file) is never made."""
    import magika

    def refuse(*_a, **_k):
        raise AssertionError("magika.Magika() was built")

    monkeypatch.setattr(magika.Magika, "__init__", refuse)
    monkeypatch.setattr(convert, "_converters", {})  # built afresh under the refusal
    for name, data in (("a.docx", docs.docx({"Plan": "Ship it."})),
                       ("a.pptx", docs.pptx({"Risks": "Fog delays"})),
                       ("a.xlsx", docs.xlsx({"Budget": [["item"], ["rope"]]})),
                       ("a.epub", docs.epub({"One": "The tide came in."})),
                       ("a.html", b"<html><body><h1>Top</h1><p>para</p></body></html>")):
        assert convert.convert(data, name), name


def test_markdown_is_normalised_as_markitdown_does():
    """Trailing spaces of each line dropped, runs of blank lines cut to one (what
    ``MarkItDown.convert`` did to every converter's output)."""
    html = (b"<html><body><h1>Top</h1><p>one</p><br><br><br><br><p>two</p>"
            b"<pre>x   \n\n\n\ny</pre></body></html>")
    md = convert._markitdown(html, "a.html", ".html")
    assert "\n\n\n" not in md and not any(line != line.rstrip() for line in md.split("\n"))
    assert "one" in md and "two" in md and "x\n\ny" in md


def test_the_fork_servers_preload_builds_the_converters(monkeypatch):
    import importlib

    import rcll.files.preload as preload

    assert "rcll.files.preload" in sandbox._PRELOAD
    monkeypatch.setattr(convert, "_converters", {})
    importlib.reload(preload)  # what the fork server's import does
    assert set(convert._converters) == {".html", ".htm", ".xhtml", ".docx", ".pptx", ".xlsx",
                                        ".epub"}
