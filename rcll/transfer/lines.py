"""Lines of an upload, bounded: plain or gzip (told by its first two bytes), at most
``max_line_bytes`` per line and ``max_bytes`` in all (after decompression), read a buffer at
a time so nothing holds more than one line of the stream."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rcll.errors import Rejected
from rcll.transfer.format import FormatError

GZIP_MAGIC = b"\x1f\x8b"
BUFFER = 1 << 16


@dataclass(frozen=True)
class Limits:
    """Bounds of one import: ``max_bytes`` of the (decompressed) stream, ``max_line_bytes``
    of one line. :meth:`from_settings` reads ``transfer_max_bytes`` and
    ``transfer_max_line_bytes``."""

    max_bytes: int = 8 << 30
    max_line_bytes: int = 16 << 20

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        return cls(settings.transfer_max_bytes, settings.transfer_max_line_bytes)


class _Raw(io.RawIOBase):
    """Any object with ``read(n)`` as a raw binary stream (a request body, an upload)."""

    def __init__(self, src: Any) -> None:
        self._src = src

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self._src.read(len(b))
        n = len(data)
        b[:n] = data
        return n


def too_large(limit: int) -> Rejected:
    """413 ``payload_too_large`` for an import past ``limit`` bytes (decompressed)."""
    return Rejected(413, "payload_too_large",
                    f"the export is larger than {limit} bytes (RCLL_TRANSFER_MAX_BYTES)",
                    {"limit_bytes": limit})


def read_lines(src: Any, limits: Limits) -> Iterator[tuple[int, bytes]]:
    """``(line number, line without its end)`` for each non-blank line of ``src`` (an object
    with ``read(n)``), plain or gzip. Raises :class:`FormatError` for a line longer than
    ``limits.max_line_bytes`` or a gzip stream that is corrupt or cut short, and
    :func:`too_large` (413) past ``limits.max_bytes``."""
    buffered = io.BufferedReader(_Raw(src), BUFFER)
    zipped = buffered.peek(2)[:2] == GZIP_MAGIC
    stream: Any = gzip.GzipFile(fileobj=buffered, mode="rb") if zipped else buffered
    total = 0
    n = 0
    while True:
        try:
            raw = stream.readline(limits.max_line_bytes + 2)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            what = "cut short" if isinstance(exc, EOFError) else f"corrupt ({exc})"
            raise FormatError(n + 1, f"the gzip stream is {what}") from None
        if not raw:
            return
        n += 1
        total += len(raw)
        if total > limits.max_bytes:
            raise too_large(limits.max_bytes)
        line = raw.rstrip(b"\r\n")
        if len(line) > limits.max_line_bytes:
            raise FormatError(n, f"line longer than {limits.max_line_bytes} bytes "
                                 "(RCLL_TRANSFER_MAX_LINE_BYTES)")
        if line.strip():
            yield n, line
