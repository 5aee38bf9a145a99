"""Token-aware, conversation-aware chunking (spec §4.1). No chunk exceeds ``max_tokens``.

A short item (≤ ``max_tokens``) is one chunk. A longer item that opens with a speaker
(``Speaker: ...``) is a conversation: it is split at turns and the turns are packed back up
to ``max_tokens``; a turn longer than the limit is split like prose and each part keeps the
speaker label (``Bob: …``). Other text is split at the softest boundary that works —
paragraphs, then lines, then sentences, then spaces — and, when none does (a long line
without spaces, CJK text), hard at token boundaries; the pieces are packed back up to the
limit. Every chunk is at most ``max_tokens`` tokens by ``count`` (and ``MAX_CHARS_PER_TOKEN``
characters per token), and the chunks together
hold every non-blank character of the input, in order. The write path gives the chunker the
item's text without its markup-only lines (:func:`rcll.retain.markup.strip_markup`, in
:func:`rcll.retain.pipeline.drafts_for`): the promise is about that cleaned text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

TURN_START = re.compile(r"^(?:\[[^\]]{1,40}\]\s*)?[A-Za-z][\w .'-]{0,40}:\s", re.M)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])|(?<=[。！？])")
# Softer to harder boundaries for text with no turns; each splits a piece that is too long.
BOUNDARIES = (re.compile(r"\n\s*\n"), re.compile(r"\n"), SENTENCE_END, re.compile(r"\s+"))

Count = Callable[[list[str]], list[int]]
# A tokenizer maps a long unbroken string (a hash, base64) to one unknown token, so a chunk
# is also held to this many characters per allowed token; prose averages about 4 to 5.
MAX_CHARS_PER_TOKEN = 32


def chunk_text(text: str, max_tokens: int, count: Count) -> list[str]:
    """Split ``text`` into chunks of at most ``max_tokens`` tokens.

    ``count`` maps a list of strings to their token counts (the embedder's tokenizer,
    without special tokens). Empty text gives ``[]``. Raises ``ValueError`` if
    ``max_tokens < 8`` (too small to hold a speaker label and some text).
    """
    if max_tokens < 8:
        raise ValueError("max_tokens must be at least 8")
    tokens = count

    too_long = max_tokens * MAX_CHARS_PER_TOKEN

    def count(texts: list[str]) -> list[int]:  # noqa: F811 - tokens, bounded by characters
        # a text over ``too_long`` characters is over the limit without tokenizing it (a
        # document of tens of MB is never tokenized whole)
        short = [t for t in texts if len(t) <= too_long]
        exact = iter(tokens(short) if short else [])
        return [max(next(exact), -(-len(t) // MAX_CHARS_PER_TOKEN)) if len(t) <= too_long
                else -(-len(t) // MAX_CHARS_PER_TOKEN) for t in texts]

    text = text.strip()
    if not text:
        return []
    if count([text])[0] <= max_tokens:
        return [text]
    if TURN_START.match(text):
        pieces: list[str] = []
        for turn in _split_turns(text):
            pieces.extend(_split_turn(turn, max_tokens, count))
        return _pack(pieces, max_tokens, count)
    return _pack(_split(text, max_tokens, count, 0), max_tokens, count)


def _split_turns(text: str) -> list[str]:
    """Turns of a conversation. A line opener counts as a speaker only if its label occurs
    at least twice and the first speaker is one of them, so a single turn whose content has
    lines like ``Note: ...`` stays one turn."""
    openers = [(m.start(), m.group(0).split(":")[0].strip().lower())
               for m in TURN_START.finditer(text)]
    labels = [label for _, label in openers]
    speakers = {label for label, n in Counter(labels).items() if n >= 2}
    if not openers or labels[0] not in speakers:
        return [text]
    starts = [pos for pos, label in openers if label in speakers]
    bounds = starts + [len(text)]
    return [text[a:b].strip() for a, b in zip(bounds, bounds[1:], strict=False) if text[a:b].strip()]


def _split_turn(turn: str, max_tokens: int, count: Count) -> list[str]:
    """A turn as is, or, when longer than the limit, its body split like prose with the
    speaker label (``Bob: ``) repeated on each part."""
    if count([turn])[0] <= max_tokens:
        return [turn]
    m = TURN_START.match(turn)
    if m is None:
        return _pack(_split(turn, max_tokens, count, 0), max_tokens, count)
    label, body = m.group(0), turn[m.end():]
    room = max_tokens - count([label.strip()])[0]
    if room < max_tokens // 2:  # a very long label: split the turn as plain text
        return _pack(_split(turn, max_tokens, count, 0), max_tokens, count)
    return [label + part for part in _pack(_split(body, room, count, 0), room, count)]


# A piece is (separator before it in the source, text); packing re-joins with the separator.
Piece = tuple[str, str]
JOINERS = ("\n\n", "\n", " ", " ")


def _split(text: str, max_tokens: int, count: Count, level: int) -> list[Piece]:
    """Pieces of ``text`` each at most ``max_tokens``: split at ``BOUNDARIES[level]`` and
    recurse into pieces still too long with the next, harder boundary; tokens last."""
    text = text.strip()
    if not text:
        return []
    if level >= len(BOUNDARIES):
        return [("", t) for t in _split_tokens(text, max_tokens, count)]
    parts = [p.strip() for p in BOUNDARIES[level].split(text) if p.strip()]
    if len(parts) <= 1:
        return _split(text, max_tokens, count, level + 1)
    out: list[Piece] = []
    for part, size in zip(parts, count(parts), strict=True):
        sub = [("", part)] if size <= max_tokens else _split(part, max_tokens, count, level + 1)
        if sub:
            out.append((JOINERS[level], sub[0][1]))
            out.extend(sub[1:])
    return out


def _split_tokens(text: str, max_tokens: int, count: Count) -> list[str]:
    """Hard split of text without usable boundaries: the longest prefix within the limit
    (binary search over characters, so the tokenizer decides), repeated."""
    out: list[str] = []
    while text:
        hi = min(len(text), max_tokens * 8)  # grow a window until it is over the limit
        while count([text[:hi]])[0] <= max_tokens:
            if hi == len(text):
                out.append(text)
                return out
            hi = min(len(text), hi * 2)
        lo = 1  # count(text[:lo]) <= max_tokens < count(text[:hi])
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count([text[:mid]])[0] <= max_tokens:
                lo = mid
            else:
                hi = mid
        out.append(text[:lo])
        text = text[lo:].lstrip()
    return out


def _pack(pieces: list[Piece] | list[str], max_tokens: int, count: Count) -> list[str]:
    """Join consecutive pieces (with their separators; plain strings with a newline) while
    the joined text stays within the limit."""
    pieces = [("\n", p) if isinstance(p, str) else p for p in pieces]
    sizes = count([text for _, text in pieces])
    chunks: list[str] = []
    cur: list[Piece] = []
    cur_size = 0
    for piece, size in zip(pieces, sizes, strict=True):
        if cur and cur_size + size > max_tokens:
            chunks.extend(_close(cur, max_tokens, count))
            cur, cur_size = [], 0
        cur.append(piece)
        cur_size += size
    if cur:
        chunks.extend(_close(cur, max_tokens, count))
    return chunks


def _close(pieces: list[Piece], max_tokens: int, count: Count) -> list[str]:
    """The joined chunk, or the pieces apart when joining made it longer than the limit
    (possible with an approximate counter or a join inside a word)."""
    joined = pieces[0][1] + "".join(sep + text for sep, text in pieces[1:])
    if len(pieces) == 1 or count([joined])[0] <= max_tokens:
        return [joined]
    return [text for _, text in pieces]


HEADING_LINE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
# A first paragraph this short, on one line, followed by more text is the item's title.
TITLE_MAX_CHARS = 300


def chunk_headings(text: str, chunks: list[str], title: str | None = None) -> list[str | None]:
    """Each chunk's context: the item's title and the Markdown headings open where the chunk
    starts (``"Title / Section / Subsection"``), leaving out what the chunk's text already
    opens with; None when nothing is left — the first chunk of a titled document, every
    chunk of a one-chunk item and of a conversation (a text opening with a speaker label).

    ``title``: the item's title when given (``metadata["title"]``); otherwise the first
    paragraph of ``text`` when it is one line of at most :data:`TITLE_MAX_CHARS` characters
    followed by more text. ``chunks`` are :func:`chunk_text`'s, in order."""
    text = text.strip()
    if len(chunks) < 2 or TURN_START.match(text):
        return [None] * len(chunks)
    if not title:
        first, sep, _rest = text.partition("\n\n")
        first = first.strip()
        title = first if sep and "\n" not in first and len(first) <= TITLE_MAX_CHARS \
            and not HEADING_LINE.match(first) else None
    out: list[str | None] = []
    at = 0
    for chunk in chunks:
        start = text.find(chunk[:64], at)
        start = at if start < 0 else start
        open_: dict[int, str] = {}
        for m in HEADING_LINE.finditer(text, 0, start):
            level = len(m.group(1))
            open_ = {lv: h for lv, h in open_.items() if lv < level}
            open_[level] = m.group(2)
        path = [p for p in ([title] if title else []) + [open_[lv] for lv in sorted(open_)]
                if p and not chunk.lstrip("# ").startswith(p)]
        out.append(" / ".join(dict.fromkeys(path)) or None)
        at = start + max(len(chunk) // 2, 1)
    return out
