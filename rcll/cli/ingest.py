"""Folder ingest for ``rcll ingest``: read files into retain items, send them in batches
bounded by count and bytes, and skip (with the reason) what cannot be taken.

A text file (``.txt``, ``.md``, ``.markdown``, and what ``--text-suffix`` /
``--extensionless-as-text`` add: :func:`read_paths`) is one item whose ``document_id`` is
its path, so re-ingesting a changed file leaves exactly its latest version live. A file
that cannot be read as text (binary, not UTF-8, unreadable) or that the server refuses
alone (an ``item_too_large`` or invalid item) is skipped and reported; everything else is
still sent.

Document files (PDF, DOCX, PPTX, XLSX, HTML, EPUB: :data:`rcll.files.convert.TYPES`) are
uploaded to ``files/retain`` (one operation each, converted on the workers) with their path
as ``document_id`` and ``metadata.path``; a file the workers cannot convert fails its
operation with the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rcll.files.convert import TYPES
from rcll.text import is_blank
from rcll.validation import MalformedJSON, parse_json

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
DOCUMENT_SUFFIXES = tuple(s for s in TYPES if s not in (*TEXT_SUFFIXES, ".text"))
BATCH_BYTES = 8 * 1024 * 1024  # one request's content stays well under the API's byte limit
FILE_BATCH = 8  # document files per files/retain request
# content per item request (one job each): long text files spread over several jobs, which
# worker processes run side by side and which end one by one (chat-turn batches stay whole)
JOB_BYTES = 64 * 1024
_SUFFIX = re.compile(r"\.[a-z0-9_+-]+")


@dataclass
class Skipped:
    """A file or item not ingested: ``source`` (path or ``path:line``) and ``reason``."""

    source: str
    reason: str


@dataclass
class Plan:
    """Items to send (each with the ``source`` it came from) and what was skipped reading."""

    items: list[dict] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # document files, sent as files


def _read_text(f: Path) -> str:
    """The file as UTF-8 text, a leading byte-order mark dropped (as the server's own text
    conversion does). Raises ``ValueError`` for binary or non-UTF-8 content and ``OSError``
    when unreadable."""
    data = f.read_bytes()
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def path_text(p: Path | str) -> str:
    """``p`` as text the server stores and the CLI prints (document ids, ``metadata.path``,
    upload names, skipped paths): a name that is not UTF-8 on disk (Python spells its bytes
    as lone surrogates, which PostgreSQL refuses) keeps its other characters, each
    undecodable byte written as ``\\xNN``, and a backslash in the name is doubled, so no
    two names on disk share a spelling (``n<0xFE>.md`` is ``n\\xfe.md``, a file literally
    named ``n\\xfe.md`` is ``n\\\\xfe.md``)."""
    return os.fsencode(p).replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


def text_suffixes(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``--text-suffix`` values as suffixes to read as text: lower case with a leading dot
    (``rst`` → ``.rst``). Raises ``ValueError`` for a value that cannot be a name's last
    suffix (empty, ``.tar.gz``, ``*``, a path separator or white space), and a suffix RCLL
    already reads another way (``.jsonl`` and the document types: :data:`DOCUMENT_SUFFIXES`)."""
    out = []
    for v in values:
        s = v.strip().lower()
        s = s if s.startswith(".") else f".{s}"
        if not _SUFFIX.fullmatch(s):  # what Path.suffix can be: one dot, then a name
            raise ValueError(f"not a file suffix: {v!r} (one dot and letters, digits, "
                             "'_', '+' or '-', e.g. .rst; the last suffix of a name alone is "
                             "compared)")
        if s == ".jsonl" or s in DOCUMENT_SUFFIXES:
            raise ValueError(f"{s} files are already read as "
                             f"{'retain items' if s == '.jsonl' else 'documents'}")
        out.append(s)
    return tuple(dict.fromkeys(out))


def read_paths(paths: tuple[str, ...] | list[str], extra_text: tuple[str, ...] = (),
               extensionless: bool = False) -> Plan:
    """Items from files and folders: ``.txt``/``.md``/``.markdown`` files (one item each),
    files ending in one of ``extra_text`` (:func:`text_suffixes`, e.g. ``.rst``, ``.py``)
    and, when ``extensionless``, files whose name has no suffix (``README``,
    ``copyright``) — each one item, read as UTF-8 text and refused when binary or not UTF-8
    like any text file — and ``.jsonl`` item files (suffixes in any case); document files
    (:data:`DOCUMENT_SUFFIXES`) go to ``plan.files``. Everything that cannot be taken is listed
    in ``plan.skipped`` with its reason, never silently dropped and never fatal: a file of
    another type, a binary, non-UTF-8, unreadable or empty file, a JSONL line that is not a
    JSON object, a path that is not a regular file (a FIFO, socket or device, a broken or
    looping symbolic link, a missing path), a symbolic link to a folder inside a folder (not
    followed). Hidden files and folders (a name starting with ``.``, e.g. ``.git``) inside
    a folder are not read. A file named twice (a folder and a file in it) is read once.
    Raises nothing."""
    plan = Plan()
    seen: set[str] = set()
    for p in map(Path, paths):
        if p.is_dir():
            files = []
            for f in sorted(p.rglob("*")):
                if any(part.startswith(".") for part in f.relative_to(p).parts):
                    continue
                if f.is_dir():
                    if f.is_symlink():
                        plan.skipped.append(Skipped(
                            path_text(f), "symbolic link to a folder (not followed)"))
                    continue
                files.append(f)
        else:
            files = [p]
        for f in files:
            if not f.is_file():  # never opened: reading a FIFO would block
                plan.skipped.append(Skipped(path_text(f), "no such file" if not f.exists()
                                            and not f.is_symlink() else
                                            "not a regular file (a FIFO, socket, device or "
                                            "broken symbolic link)"))
                continue
            real = os.path.realpath(f)
            if real in seen:
                continue
            seen.add(real)
            suffix = f.suffix.lower()
            if suffix in DOCUMENT_SUFFIXES:
                plan.files.append(f)
                continue
            as_text = suffix in extra_text or (extensionless and not suffix)
            if suffix not in (*TEXT_SUFFIXES, ".jsonl") and not as_text:
                plan.skipped.append(Skipped(path_text(f), "unsupported file type (.txt, .md, "
                                            ".markdown, .jsonl, "
                                            f"{', '.join(DOCUMENT_SUFFIXES)}; "
                                            "--text-suffix SUFFIX or "
                                            "--extensionless-as-text take others "
                                            "as text)"))
                continue
            try:
                text = _read_text(f)
            except (OSError, ValueError) as exc:
                plan.skipped.append(Skipped(path_text(f), str(exc) or type(exc).__name__))
                continue
            if suffix == ".jsonl":
                _read_jsonl(f, text, plan)
            elif is_blank(text):
                plan.skipped.append(Skipped(path_text(f), "empty file"))
            else:
                plan.items.append({"content": text, "document_id": path_text(f),
                                   "metadata": {"path": path_text(f)}})
                plan.sources.append(path_text(f))
    return plan


def _read_jsonl(f: Path, text: str, plan: Plan) -> None:
    """One item per line. Lines end at ``\\n`` alone (JSON Lines): U+2028, U+0085 and the
    other breaks ``str.splitlines`` knows are valid inside a JSON string."""
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            item = parse_json(line)
        except MalformedJSON as exc:
            plan.skipped.append(Skipped(f"{path_text(f)}:{n}", f"invalid JSON: {exc}"))
            continue
        if not isinstance(item, dict):
            plan.skipped.append(Skipped(f"{path_text(f)}:{n}", "not a JSON object (an item)"))
            continue
        plan.items.append(item)
        plan.sources.append(f"{path_text(f)}:{n}")


def content_bytes(item: dict) -> int:
    """UTF-8 bytes of an item's ``content``: what batches are bounded and ordered by."""
    return len(str(item.get("content", "")).encode("utf-8"))


def batches(items: list[dict], max_items: int, max_bytes: int = BATCH_BYTES) -> list[range]:
    """Index ranges of consecutive items, each at most ``max_items`` items and about
    ``max_bytes`` of UTF-8 content; an item larger than ``max_bytes`` goes alone."""
    out, start, size = [], 0, 0
    for i, item in enumerate(items):
        n = content_bytes(item)
        if i > start and (i - start >= max_items or size + n > max_bytes):
            out.append(range(start, i))
            start, size = i, 0
        size += n
    if start < len(items):
        out.append(range(start, len(items)))
    return out


def submit(client, bank: str, plan: Plan, batch_size: int,
           on_sent: Callable[[int], None] | None = None,
           max_bytes: int = JOB_BYTES,
           ranges: list[range] | None = None) -> tuple[list[str], list[Skipped]]:
    """Send the plan's items (``ranges``: only these batches, else all of them in
    :func:`batches` of ``batch_size`` items and ``max_bytes``); ``(operation ids,
    skipped)``. A batch the server refuses with a 4xx (other than 429) is re-sent item by
    item, and an item refused alone is skipped with the server's code and message. 5xx and
    transport errors propagate (the server is away, not the input bad)."""
    from rcll.client import RCLLHTTPError

    ops: list[str] = []
    skipped: list[Skipped] = []

    def send(idx: range) -> None:
        try:
            ops.append(client.retain(bank, [plan.items[i] for i in idx])["operation_id"])
        except RCLLHTTPError as exc:
            if not 400 <= exc.status < 500 or exc.status == 429:
                raise
            if len(idx) == 1:
                skipped.append(Skipped(plan.sources[idx[0]], exc.describe()))
            else:
                for i in idx:
                    send(range(i, i + 1))
                return
        if on_sent:
            on_sent(len(idx))

    for idx in (batches(plan.items, batch_size, max_bytes) if ranges is None else ranges):
        send(idx)
    return ops, skipped


def _file_bytes(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:  # submit_files says why when it reads it
        return 0


def largest_first(files: list[Path]) -> list[Path]:
    """``files`` by size, largest first (ties keep their order): a file's bytes stand for
    its conversion and embedding work, so the longest jobs start first and the job that ends
    an ingest is a short one (longest-processing-time-first scheduling). Each file is its
    own document, so the order changes no version. An unreadable file counts as empty."""
    return sorted(files, key=_file_bytes, reverse=True)


def send_order(files: list[Path], items: list[dict],
               ranges: list[range]) -> list[tuple[str, list[Path] | range]]:
    """The order ``rcll ingest`` sends in: longest-processing-time first over the document
    ``files`` (already :func:`largest_first`) and the item batches ``ranges`` together, so
    that a large batch of text files is not queued behind many small documents and left to
    end the ingest on one worker process. A file's bytes and a batch's content bytes stand
    for their work. Each list keeps its own order (item batches must: two items of one
    document are applied in the order sent); at each step the larger of the next file and
    the next batch goes, the file on a tie (its conversion comes first). Returns steps
    ``("files", [path, ...])`` (consecutive files, one :func:`submit_files` call) and
    ``("items", range)``."""
    sizes = [sum(content_bytes(items[i]) for i in r) for r in ranges]
    file_sizes = [_file_bytes(f) for f in files]
    steps: list[tuple[str, list[Path] | range]] = []
    fi = bi = 0
    while fi < len(files) or bi < len(ranges):
        if bi >= len(ranges) or (fi < len(files) and file_sizes[fi] >= sizes[bi]):
            if steps and steps[-1][0] == "files":
                steps[-1][1].append(files[fi])  # type: ignore[union-attr]
            else:
                steps.append(("files", [files[fi]]))
            fi += 1
        else:
            steps.append(("items", ranges[bi]))
            bi += 1
    return steps


def submit_files(client, bank: str, files: list[Path], batch: int = FILE_BATCH,
                 max_bytes: int = BATCH_BYTES * 4,
                 on_sent: Callable[[int], None] | None = None) -> tuple[list[str], list[Skipped]]:
    """Upload document ``files`` to ``files/retain`` in requests of at most ``batch`` files
    and about ``max_bytes``, in order (:func:`largest_first` is the order ``rcll ingest``
    sends); ``(operation ids, skipped)``. A request the server refuses with
    a 4xx (other than 429) is re-sent file by file, and a file refused alone (413
    ``file_too_large``, 415, ...) or unreadable here is skipped with the reason. 5xx and
    transport errors propagate."""
    from rcll.client import RCLLHTTPError

    ops: list[str] = []
    skipped: list[Skipped] = []

    def send(group: list[tuple[Path, bytes]]) -> None:
        meta = [{"document_id": path_text(f), "metadata": {"path": path_text(f)}}
                for f, _ in group]
        try:
            ops.extend(client.retain_files(bank, [(path_text(f.name), data) for f, data in group],
                                           meta)["operation_ids"])
        except RCLLHTTPError as exc:
            if not 400 <= exc.status < 500 or exc.status == 429:
                raise
            if len(group) == 1:
                skipped.append(Skipped(path_text(group[0][0]), exc.describe()))
            else:
                for one in group:
                    send([one])
                return
        if on_sent:
            on_sent(len(group))

    group: list[tuple[Path, bytes]] = []
    size = 0
    for f in files:
        try:
            data = f.read_bytes()
        except OSError as exc:
            skipped.append(Skipped(path_text(f), str(exc) or type(exc).__name__))
            continue
        if not data:
            skipped.append(Skipped(path_text(f), "empty file"))
            continue
        if group and (len(group) >= batch or size + len(data) > max_bytes):
            send(group)
            group, size = [], 0
        group.append((f, data))
        size += len(data)
    if group:
        send(group)
    return ops, skipped
