"""Token-aware, conversation-aware chunking (spec §4.1).

A short item (≤ ``max_tokens``) is one chunk. A longer item that opens with a speaker
(``Speaker: ...``) is a conversation: it is split at turns and the turns are packed back up
to ``max_tokens``; a turn is never split, even when it alone is longer than the limit (the
embedder truncates it; the lexical index keeps all of it), so a one-turn item is one chunk.
Other text is split at paragraphs, then sentences, and packed the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TURN_START = re.compile(r"^(?:\[[^\]]{1,40}\]\s*)?[A-Za-z][\w .'-]{0,40}:\s", re.M)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def chunk_text(text: str, max_tokens: int, count: Callable[[list[str]], list[int]]) -> list[str]:
    """Split ``text`` into chunks of at most ``max_tokens`` tokens (turns stay whole).

    ``count`` maps a list of strings to their token counts. Empty text gives ``[]``.
    """
    text = text.strip()
    if not text:
        return []
    if count([text])[0] <= max_tokens:
        return [text]
    if TURN_START.match(text):
        return _pack(_split_turns(text), max_tokens, count)
    pieces: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        if count([para])[0] <= max_tokens:
            pieces.append(para)
        else:
            pieces.extend(s.strip() for s in SENTENCE_END.split(para) if s.strip())
    return _pack(pieces, max_tokens, count)


def _split_turns(text: str) -> list[str]:
    """Turns of a conversation. A line opener counts as a speaker only if its label occurs
    at least twice and the first speaker is one of them, so a single turn whose content has
    lines like ``Note: ...`` stays whole."""
    openers = [(m.start(), m.group(0).split(":")[0].strip().lower())
               for m in TURN_START.finditer(text)]
    labels = [label for _, label in openers]
    speakers = {label for label in labels if labels.count(label) >= 2}
    if not openers or labels[0] not in speakers:
        return [text]
    starts = [pos for pos, label in openers if label in speakers]
    bounds = starts + [len(text)]
    return [text[a:b].strip() for a, b in zip(bounds, bounds[1:], strict=False) if text[a:b].strip()]


def _pack(pieces: list[str], max_tokens: int, count: Callable[[list[str]], list[int]]) -> list[str]:
    sizes = count(pieces)
    chunks: list[str] = []
    cur: list[str] = []
    cur_size = 0
    for piece, size in zip(pieces, sizes, strict=False):
        if cur and cur_size + size > max_tokens:
            chunks.append("\n".join(cur))
            cur, cur_size = [], 0
        cur.append(piece)
        cur_size += size
    if cur:
        chunks.append("\n".join(cur))
    return chunks
