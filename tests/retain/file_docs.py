"""Small real document files made in the test (no committed binaries): a PDF written by
hand (one text line per page, Helvetica), and DOCX, PPTX, XLSX, EPUB written by python-docx,
python-pptx, openpyxl and ebooklib, the libraries Word-compatible tools read."""

from __future__ import annotations

import io


def pdf(pages: list[str]) -> bytes:
    """A valid PDF with one page per string (ASCII; one line each), correct xref table."""
    objs: list[bytes] = []
    n = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    font_id = 3 + 2 * n
    for i, text in enumerate(pages):
        esc = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({esc}) Tj ET".encode()
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                    f"/Resources << /Font << /F1 {font_id} 0 R >> >> "
                    f"/Contents {4 + 2 * i} 0 R >>".encode())
        objs.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
              .encode())
    return out.getvalue()


def docx(sections: dict[str, str]) -> bytes:
    """A DOCX with a Heading 1 and a paragraph per section."""
    import docx as python_docx

    d = python_docx.Document()
    for title, text in sections.items():
        d.add_heading(title, level=1)
        d.add_paragraph(text)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def pptx(slides: dict[str, str]) -> bytes:
    """A PPTX with one title-and-content slide per entry."""
    from pptx import Presentation

    p = Presentation()
    for title, text in slides.items():
        s = p.slides.add_slide(p.slide_layouts[1])
        s.shapes.title.text = title
        s.placeholders[1].text = text
    buf = io.BytesIO()
    p.save(buf)
    return buf.getvalue()


def xlsx(sheets: dict[str, list[list]]) -> bytes:
    """An XLSX with one sheet per entry (rows of cells)."""
    from openpyxl import Workbook

    wb = Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def epub(chapters: dict[str, str], title: str = "A test book") -> bytes:
    """An EPUB 3 with one XHTML chapter per entry (an h1 and a paragraph)."""
    import tempfile
    from pathlib import Path

    from ebooklib import epub as eb

    book = eb.EpubBook()
    book.set_identifier("rcll-test-book")
    book.set_title(title)
    book.set_language("en")
    items = []
    for i, (head, text) in enumerate(chapters.items(), 1):
        c = eb.EpubHtml(title=head, file_name=f"ch{i}.xhtml", lang="en")
        c.content = f"<html><body><h1>{head}</h1><p>{text}</p></body></html>"
        book.add_item(c)
        items.append(c)
    book.toc = items
    book.add_item(eb.EpubNcx())
    book.add_item(eb.EpubNav())
    book.spine = ["nav", *items]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "book.epub"
        eb.write_epub(str(path), book)
        return path.read_bytes()


# --- file bombs: a few KB that expand to a huge conversion (docs/concepts/retain.md "Files") -----

def pdf_fanout(levels: int, fanout: int = 10, text: str = "One page, named many times.",
               ) -> bytes:
    """A valid PDF of ``fanout ** levels`` pages in about a kilobyte: each node of the page
    tree names the node below it ``fanout`` times in its ``/Kids``, down to one page object
    (a legal tree by count, not by the spec's no-repeat rule, which readers do not enforce)."""
    esc = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    stream = f"BT /F1 12 Tf 72 720 Td ({esc}) Tj ET".encode()
    # objects: 1 catalog, 2..levels+1 page-tree nodes (2 is the root), then page, content, font
    page_id, content_id, font_id = levels + 2, levels + 3, levels + 4
    objs: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for depth in range(levels):
        node = 2 + depth
        child = node + 1 if depth < levels - 1 else page_id
        parent = f"/Parent {node - 1} 0 R " if depth else ""
        kids = " ".join([f"{child} 0 R"] * fanout)
        objs.append(f"<< /Type /Pages {parent}/Kids [{kids}] /Count {fanout ** (levels - depth)} >>"
                    .encode())
    objs.append(f"<< /Type /Page /Parent {levels + 1} 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {content_id} 0 R >>"
                .encode())
    objs.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _pdf_file(objs)


def _pdf_file(objs: list[bytes]) -> bytes:
    """Objects 1..n as a PDF with a correct xref table (object 1 is the catalog)."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(f"{i} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
              .encode())
    return out.getvalue()


def docx_paragraph_bomb(paragraphs: int = 1_000_000) -> bytes:
    """A real DOCX (python-docx's parts) whose ``word/document.xml`` holds ``paragraphs``
    empty ``<w:p/>`` (6 bytes each uncompressed; the file stays a few KB)."""
    import zipfile

    base = zipfile.ZipFile(io.BytesIO(docx({"Bomb": "x"})))
    body = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w='
            b'"http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
            + b"<w:p/>" * paragraphs + b"</w:body></w:document>")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for info in base.infolist():
            data = body if info.filename == "word/document.xml" else base.read(info)
            out.writestr(info.filename, data)
    return buf.getvalue()


def zip_many_entries(entries: int, first: bytes | None = None, name: str = "x") -> bytes:
    """A ZIP of ``entries`` empty stored entries (``first``, when given, is an EPUB-style
    ``mimetype`` entry in front)."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as out:
        if first is not None:
            out.writestr("mimetype", first)
        for i in range(entries):
            out.writestr(f"{name}{i:x}", b"")
    return buf.getvalue()
