"""Document files to text sections: PDF per page, the rest per heading section.

PDF pages come from pdfium (``pypdfium2``, installed with markitdown's ``pdf`` extra): it
knows page boundaries, so each unit can name its page, and it is faster than pdfminer
(benchmarks/results/ingest_files.txt; docs/decisions/0015-file-conversion.md). DOCX, PPTX,
XLSX, HTML and EPUB go through markitdown's converter for the type (Microsoft's converters,
the ones Hindsight uses; called directly, the type being known: :func:`_converter_for`)
and its Markdown is split at headings of level 1-2 (an XLSX sheet is a ``##`` heading, a
slide a ``<!-- Slide number -->`` marker). Text and Markdown are decoded as UTF-8 and split the same way.

Every conversion is bounded (:class:`ConvertLimits`): a ZIP container's central directory
(entries, total uncompressed bytes, compression ratio of each entry) is checked before the
converter sees the file, a PDF's page count before any page is read, and the characters are
counted as they come (a PDF stops at the page that passes the bound). A bound that is passed
raises :class:`LimitExceeded` naming the bound and its setting. Time and memory are bounded by
:mod:`rcll.files.sandbox`, which runs :func:`convert` in a child process.

Nothing here touches the database; :mod:`rcll.files.stage` stores what this returns.
"""

from __future__ import annotations

import io
import mimetypes
import re
import threading
import zipfile
from dataclasses import dataclass
from pathlib import PurePath

from rcll.text import is_blank

# suffix -> MIME type of every file type RCLL converts
TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".epub": "application/epub+zip",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
}
_BY_MIME = {mime: suffix for suffix, mime in reversed(list(TYPES.items()))}
TEXT_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown"})
ZIP_SUFFIXES = frozenset({".docx", ".pptx", ".xlsx", ".epub"})  # OOXML and EPUB are ZIPs
MAX_SECTION_TITLE = 200

_HEADING = re.compile(r"^(#{1,2})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_SLIDE = re.compile(r"^<!-- Slide number: (\d+) -->[ \t]*$", re.MULTILINE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class ConversionError(Exception):
    """A file that cannot be converted; ``str(exc)`` is the reason shown on its job."""


class LimitExceeded(ConversionError):
    """A file past one of the conversion bounds (:class:`ConvertLimits`); ``str(exc)`` names
    the bound, what the file has, and the setting (``RCLL_…=value``)."""


@dataclass(frozen=True)
class ConvertLimits:
    """Bounds of one file's conversion (each from the ``RCLL_FILE_*`` setting named in
    :meth:`from_settings`):

    - ``max_zip_entries``: entries in a ZIP container (DOCX, PPTX, XLSX, EPUB);
    - ``max_unzipped_bytes``: their total uncompressed size, bytes;
    - ``max_zip_ratio``: uncompressed / compressed size of any entry larger than
      :data:`ZIP_RATIO_GRACE_BYTES` (Apache POI's zip-bomb rule, whose default is 100);
    - ``max_pages``: pages of a PDF;
    - ``max_chars``: characters of converted text, all sections together;
    - ``timeout_s``: wall-clock seconds of the conversion, and ``max_memory_mb``: the address
      space of the process converting, MiB (both enforced by :mod:`rcll.files.sandbox`).
    """

    max_zip_entries: int = 10_000
    max_unzipped_bytes: int = 100 * 1024 * 1024
    max_zip_ratio: float = 100.0
    max_pages: int = 5_000
    max_chars: int = 10_000_000
    timeout_s: float = 120.0
    max_memory_mb: int = 2048

    @classmethod
    def from_settings(cls, s) -> ConvertLimits:
        """From :class:`rcll.config.Settings`: ``RCLL_FILE_MAX_ZIP_ENTRIES``,
        ``RCLL_FILE_MAX_UNZIPPED_BYTES``, ``RCLL_FILE_MAX_ZIP_RATIO``, ``RCLL_FILE_MAX_PAGES``,
        ``RCLL_FILE_MAX_CHARS``, ``RCLL_FILE_CONVERT_TIMEOUT_S``,
        ``RCLL_FILE_CONVERT_MAX_MEMORY_MB``."""
        return cls(max_zip_entries=s.file_max_zip_entries,
                   max_unzipped_bytes=s.file_max_unzipped_bytes,
                   max_zip_ratio=s.file_max_zip_ratio, max_pages=s.file_max_pages,
                   max_chars=s.file_max_chars, timeout_s=s.file_convert_timeout_s,
                   max_memory_mb=s.file_convert_max_memory_mb)

    def setting(self, field: str) -> str:
        """``RCLL_FILE_<FIELD>=<value>`` for a field of this class (for reasons)."""
        env = {"timeout_s": "CONVERT_TIMEOUT_S", "max_memory_mb": "CONVERT_MAX_MEMORY_MB"}
        value = getattr(self, field)
        return f"RCLL_FILE_{env.get(field, field.upper())}=" + \
            (f"{value:g}" if isinstance(value, float) else str(value))


ZIP_RATIO_GRACE_BYTES = 1024 * 1024  # entries up to this size may compress any amount
DEFAULT_LIMITS = ConvertLimits()


@dataclass(frozen=True)
class Section:
    """One piece of a converted file: its ``text``, and ``page`` (1-based, PDFs) or
    ``section`` (the heading or slide it falls under; ``None`` before the first heading);
    ``pages`` is the PDF's page count."""

    text: str
    page: int | None = None
    section: str | None = None
    pages: int | None = None  # a PDF's page count


def file_type(name: str, content_type: str | None = None) -> tuple[str, str] | None:
    """``(suffix, MIME type)`` of a file RCLL converts, from its name's suffix (any case) or
    else its declared ``content_type``; ``None`` when neither is a supported type."""
    suffix = PurePath(name or "").suffix.lower()
    if suffix in TYPES:
        return suffix, TYPES[suffix]
    mime = (content_type or "").split(";")[0].strip().lower()
    if mime in _BY_MIME:
        return _BY_MIME[mime], mime
    return None


def supported() -> list[str]:
    """The supported suffixes, for error messages."""
    return sorted(TYPES)


def clean(text: str) -> str:
    """``text`` without what RCLL refuses or what extraction leaves behind: NUL and other
    control characters (tabs and newlines kept), lone surrogates, CR line ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\x02\n", "").replace("\x02", "")  # pdfium: a hyphen at a line break
    text = _CONTROL.sub("", text)
    return text.encode("utf-8", "replace").decode("utf-8")


def convert(data: bytes, name: str, content_type: str | None = None,
            limits: ConvertLimits = DEFAULT_LIMITS) -> list[Section]:
    """The text of file ``name`` (``data`` its bytes) as sections with text in them, in
    document order, in this process (bounded in time and memory only when called by
    :func:`rcll.files.sandbox.convert_bounded`). Raises :class:`ConversionError` for an
    unsupported type, a file the converter cannot read (corrupt, encrypted, not what its name
    says) and a file with no text at all (e.g. a scanned PDF: RCLL does no OCR), and
    :class:`LimitExceeded` for a file past a bound of ``limits`` other than time and memory."""
    kind = file_type(name, content_type)
    if kind is None:
        raise ConversionError(f"unsupported file type; supported: {', '.join(supported())}")
    suffix, _ = kind
    if suffix == ".pdf":
        sections = _pdf_pages(data, limits)
        if not sections:
            raise ConversionError("no text in the PDF (a scanned PDF needs OCR, which RCLL "
                                  "does not do)")
        return sections
    if suffix in TEXT_SUFFIXES:
        try:
            markdown = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConversionError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    else:
        if suffix in ZIP_SUFFIXES:
            if not zipfile.is_zipfile(io.BytesIO(data)):
                # markitdown would fall back to reading the bytes as plain text: refuse instead
                raise ConversionError(f"not a {suffix[1:].upper()} file (not a ZIP container)")
            check_zip(data, limits)
        markdown = _markitdown(data, name, suffix)
    if len(markdown) > limits.max_chars:
        raise LimitExceeded(f"more than {limits.max_chars} characters of text "
                            f"({limits.setting('max_chars')})")
    sections = split_markdown(clean(markdown), slides=suffix == ".pptx")
    if not sections:
        raise ConversionError("the converter found no text in the file")
    return sections


def check_zip(data: bytes, limits: ConvertLimits = DEFAULT_LIMITS) -> None:
    """Check a ZIP container from its central directory alone (nothing is decompressed):
    at most ``limits.max_zip_entries`` entries, ``limits.max_unzipped_bytes`` uncompressed in
    all, no entry above :data:`ZIP_RATIO_GRACE_BYTES` compressed more than
    ``limits.max_zip_ratio`` times. Raises :class:`LimitExceeded` (the first bound passed) or
    :class:`ConversionError` (an unreadable directory). The sizes are the ones the directory
    declares; an entry that inflates past its declared size fails its CRC check in
    :mod:`zipfile`, and the sandbox's memory and time bounds hold whatever the directory says."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            entries = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ConversionError(f"damaged ZIP container: {exc}") from None
    if len(entries) > limits.max_zip_entries:
        raise LimitExceeded(f"the ZIP container has {len(entries)} entries, more than "
                            f"{limits.max_zip_entries} ({limits.setting('max_zip_entries')})")
    total = sum(e.file_size for e in entries)
    if total > limits.max_unzipped_bytes:
        raise LimitExceeded(f"the ZIP container unpacks to {total} bytes, more than "
                            f"{limits.max_unzipped_bytes} "
                            f"({limits.setting('max_unzipped_bytes')})")
    for e in entries:
        if e.file_size > ZIP_RATIO_GRACE_BYTES and \
                e.file_size > limits.max_zip_ratio * max(e.compress_size, 1):
            ratio = e.file_size / max(e.compress_size, 1)
            raise LimitExceeded(f"ZIP entry {e.filename[:200]!r} is compressed {ratio:.0f}:1 "
                                f"({e.file_size} bytes from {e.compress_size}), more than "
                                f"{limits.max_zip_ratio:g}:1 ({limits.setting('max_zip_ratio')})")


def _pdf_pages(data: bytes, limits: ConvertLimits = DEFAULT_LIMITS) -> list[Section]:
    """One section per PDF page with text; the page count is checked before any page is
    read and the characters after each page (:class:`LimitExceeded`)."""
    import pypdfium2 as pdfium

    try:
        doc = pdfium.PdfDocument(data)
    except Exception as exc:  # PdfiumError: not a PDF, damaged, or needs a password
        raise ConversionError(f"cannot read the PDF: {exc}") from None
    try:
        pages = len(doc)
        if pages > limits.max_pages:
            raise LimitExceeded(f"the PDF has {pages} pages, more than {limits.max_pages} "
                                f"({limits.setting('max_pages')})")
        out = []
        chars = 0
        for i in range(pages):
            page = doc[i]
            try:
                textpage = page.get_textpage()
                text = clean(textpage.get_text_bounded()).strip()
                textpage.close()
            finally:
                page.close()
            chars += len(text)
            if chars > limits.max_chars:
                raise LimitExceeded(f"more than {limits.max_chars} characters of text by page "
                                    f"{i + 1} of {pages} ({limits.setting('max_chars')})")
            if not is_blank(text):
                out.append(Section(text=text, page=i + 1, pages=pages))
        return out
    finally:
        doc.close()


_converters: dict[str, object] = {}  # suffix -> markitdown's converter for it, once per process
_converters_lock = threading.Lock()
_LINE_END = re.compile(r"\r?\n")
_BLANK_RUN = re.compile(r"\n{3,}")


def _converter_for(suffix: str):
    """markitdown's converter for ``suffix`` (HTML, DOCX, PPTX, XLSX, EPUB), built once per
    process. The type is known from the name or content type (:func:`file_type`), so the
    converter is called directly rather than through ``MarkItDown``, whose every call first
    guesses the type with magika's ONNX model — a session each converting child would build
    (about 70 ms) and that cannot be built in the fork server (an ONNX Runtime session does
    not survive a fork)."""
    from markitdown.converters import (
        DocxConverter,
        EpubConverter,
        HtmlConverter,
        PptxConverter,
        XlsxConverter,
    )

    with _converters_lock:
        if not _converters:
            html = HtmlConverter()
            _converters.update({".html": html, ".htm": html, ".xhtml": html,
                                ".docx": DocxConverter(), ".pptx": PptxConverter(),
                                ".xlsx": XlsxConverter(), ".epub": EpubConverter()})
    return _converters[suffix]


def warm() -> None:
    """Pay once the first-use costs a forked child can inherit (the fork server of
    :mod:`rcll.files.sandbox` runs this, so each file's child does not): the converters
    (:func:`_converter_for`) and BeautifulSoup's HTML entity tables, built on the first
    document that holds an entity by compiling a regular expression over every entity name,
    which the HTML, DOCX, EPUB and XLSX paths all reach. Nothing here starts a thread: a
    forked child keeps none of its parent's."""
    _markitdown(b"<html><body><p>&amp; &eacute; &#233;</p></body></html>", "warm.html",
                ".html")


def _markitdown(data: bytes, name: str, suffix: str) -> str:
    """markitdown's Markdown for a DOCX/PPTX/XLSX/HTML/EPUB file, normalised as
    ``MarkItDown`` does (trailing spaces of each line dropped, runs of blank lines cut to
    one)."""
    from markitdown import StreamInfo

    info = StreamInfo(extension=suffix, filename=PurePath(name).name or f"file{suffix}",
                      mimetype=TYPES[suffix],
                      charset="utf-8" if suffix in (".html", ".htm", ".xhtml") else None)
    try:
        result = _converter_for(suffix).convert(io.BytesIO(data), info, file_extension=suffix)
    except MemoryError:
        raise
    except Exception as exc:  # the converters' own errors: corrupt, encrypted, not that type
        if "MemoryError" in f"{exc!r} {exc}":
            raise MemoryError(str(exc)[:200]) from None
        reason = str(exc).strip().splitlines()
        detail = next((line for line in reversed(reason) if line.strip()), type(exc).__name__)
        raise ConversionError(f"markitdown could not convert it: {detail.strip(' -')[:500]}") from None
    text = "\n".join(line.rstrip() for line in _LINE_END.split(result.markdown or ""))
    return _BLANK_RUN.sub("\n\n", text)


def split_markdown(markdown: str, slides: bool = False) -> list[Section]:
    """Markdown cut before each heading of level 1-2 (or each slide marker when ``slides``);
    each piece keeps its heading as ``section`` (``"slide N: title"`` for slides). Pieces with
    no visible text besides their heading (:func:`rcll.text.is_blank`: white space and
    zero-width characters count as none) are dropped. Raises nothing."""
    marks = []
    if slides:
        for m in _SLIDE.finditer(markdown):
            marks.append((m.start(), m.end(), f"slide {m.group(1)}"))
    else:
        for m in _HEADING.finditer(markdown):
            marks.append((m.start(), m.start(), m.group(2).strip()[:MAX_SECTION_TITLE]))
    out: list[Section] = []
    head = markdown[:marks[0][0]] if marks else markdown
    if not is_blank(head):
        out.append(Section(text=head.strip(), section=None))
    for i, (_start, body_start, title) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(markdown)
        text = markdown[body_start:end].strip()
        if slides:
            first = text.splitlines()[0].lstrip("# ").strip() if text else ""
            title = f"{title}: {first[:MAX_SECTION_TITLE]}" if first else title
        body = text if slides else text.split("\n", 1)[1].strip() if "\n" in text else ""
        if not is_blank(body):
            out.append(Section(text=text, section=title))
    return out


def guess_type(name: str) -> str:
    """A MIME type for ``name`` (``application/octet-stream`` if unknown), for provenance."""
    kind = file_type(name)
    return kind[1] if kind else (mimetypes.guess_type(name)[0] or "application/octet-stream")
