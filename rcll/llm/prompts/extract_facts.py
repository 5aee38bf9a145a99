"""Extraction prompt: a chunk → atomic, self-contained facts (spec §4 step 3).

Each fact: ``text``, ``kind`` (fact | note | decision | preference | event), ``occurred_start``
/ ``occurred_end`` (ISO 8601, only when the text states or implies a time), ``entities``
named in it, ``caused_by`` (indexes of facts of this reply that caused it) and
``supersedes`` (short ids ``E1``… of earlier facts shown in the prompt that it replaces).
``VERSION`` is stored on every fact unit (``memory_units.extraction_version``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from rcll.llm.prompts import CHUNK_CLOSE, CHUNK_OPEN

VERSION = "extract_facts/1"
MAX_FACTS = 40


class ExtractedFact(BaseModel):
    """One fact as the model states it (dates are checked later, see
    :func:`rcll.retain.extraction.grounded_time`)."""

    text: str = Field(min_length=1, max_length=2000)
    kind: Literal["fact", "note", "decision", "preference", "event"] = "fact"
    occurred_start: str | None = None
    occurred_end: str | None = None
    entities: list[str] = Field(default_factory=list, max_length=30)
    caused_by: list[int] = Field(default_factory=list, max_length=10)
    supersedes: list[str] = Field(default_factory=list, max_length=10)


class ExtractionReply(BaseModel):
    """The reply: ``{"facts": [...]}`` (an empty list when the chunk states nothing)."""

    facts: list[ExtractedFact] = Field(max_length=MAX_FACTS)


SYSTEM = f"""You extract memory facts from one chunk of text for a long-term memory store.
Return JSON only: {{"facts": [...]}}, at most {MAX_FACTS} facts.
Each fact is atomic and self-contained: one claim, understandable without the chunk
(replace pronouns by names, keep who said or did what).
kind: "fact" (a state of the world), "event" (something that happened), "decision"
(something decided), "preference" (a like, dislike or wish), "note" (anything else).
occurred_start / occurred_end: ISO 8601 dates (YYYY-MM-DD or YYYY-MM-DDTHH:MM) of when it
happened, ONLY when the text states or implies the time (resolve "yesterday", "last week"
from the time the chunk was said); otherwise null. Never guess a date.
entities: the people, places, organisations, products and other named things in the fact,
as written.
caused_by: indexes (0-based, in your list) of earlier facts of your list that caused this one.
supersedes: ids (E1, E2, ...) of earlier facts listed below that this fact replaces because
it updates or contradicts them; otherwise []."""


def build_messages(chunk_text: str, *, context: str | None = None,
                   mentioned_at: datetime | None = None,
                   earlier_facts: list[tuple[str, str]] = ()) -> list[dict]:
    """The chat messages for one chunk. ``earlier_facts``: ``[(short id, text)]`` of recent
    facts of the bank (short ids ``E1``…, resolved back by the caller)."""
    parts = []
    if context:
        parts.append(f"Context: {context}")
    parts.append(f"Said at: {mentioned_at.isoformat() if mentioned_at else 'unknown'}")
    if earlier_facts:
        parts.append("Earlier facts:\n" + "\n".join(f"{sid}: {text}" for sid, text in earlier_facts))
    parts.append(f"Chunk:\n{CHUNK_OPEN}\n{chunk_text}\n{CHUNK_CLOSE}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]
