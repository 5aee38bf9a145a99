"""Closet prompt: the live units of one room × hall group → one summary (spec §3 closets).

``VERSION`` is stored on the closet (``closets.prompt_version``) and on its summary unit.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from rcll.llm.prompts import UNITS_CLOSE, UNITS_OPEN

VERSION = "summarize_closet/1"


class ClosetReply(BaseModel):
    """``{"title", "summary"}``: a short title and a summary of at most ~200 words."""

    title: str = Field("", max_length=200)
    summary: str = Field(min_length=1, max_length=4000)


SYSTEM = """You summarise a group of memory units of one topic (room) and knowledge type
(hall) for a long-term memory store. Return JSON only: {"title": "...", "summary": "..."}.
The summary states the main facts, decisions and open points in at most 200 words, names
people and things as written, keeps dates, and invents nothing."""


def build_messages(room: str, hall: str, units: list[tuple[str, str]]) -> list[dict]:
    """The chat messages for one group; ``units``: ``[(date or '', text)]``, newest first."""
    lines = "\n".join(f"[{date}] {text}" for date, text in units)
    user = f"Room: {room}\nHall: {hall}\nUnits, newest first:\n{UNITS_OPEN}\n{lines}\n{UNITS_CLOSE}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
