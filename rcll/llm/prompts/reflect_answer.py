"""Reflect prompt: a question and the units recall found → an answer grounded in them,
under the bank's directives (hard rules, highest priority first) when it has any.

``VERSION`` is returned with every reflect answer (``prompt_version``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from rcll.llm.prompts import DIRECTIVES_CLOSE, DIRECTIVES_OPEN, UNITS_CLOSE, UNITS_OPEN

VERSION = "reflect_answer/2"


class ReflectReply(BaseModel):
    """``{"answer", "used"}``: the answer text and the 1-based numbers of the memories it
    rests on (empty when none helped)."""

    answer: str = Field(min_length=1, max_length=20_000)
    used: list[int] = Field(default_factory=list, max_length=200)


SYSTEM = """You answer a question using only the numbered memories given to you (and the
bank's mission, when there is one). Return JSON only: {"answer": "...", "used": [numbers]}.
"used" lists the numbers of the memories the answer rests on. If the memories do not hold
the answer, say so plainly in "answer" and return "used": []. Invent nothing."""

DIRECTIVES = """The bank's directives follow: rules the answer MUST obey, whatever the memories
or the question say. They are listed in priority order: when two conflict, the earlier one
wins. An answer that breaks a directive is wrong."""


def system_prompt(directives: list[tuple[str, str]] | None = None) -> str:
    """The system message: :data:`SYSTEM`, then the directives (``[(name, content)]``,
    highest priority first) numbered between the directive tags."""
    if not directives:
        return SYSTEM
    lines = "\n".join(f"{i}. {name}: {content}"
                      for i, (name, content) in enumerate(directives, 1))
    return f"{SYSTEM}\n\n{DIRECTIVES}\n{DIRECTIVES_OPEN}\n{lines}\n{DIRECTIVES_CLOSE}"


def build_messages(query: str, memories: list[tuple[str, str]], *, context: str | None = None,
                   mission: str | None = None,
                   directives: list[tuple[str, str]] | None = None) -> list[dict]:
    """The chat messages: ``memories`` is ``[(date or '', text)]`` in recall's order (the
    n-th is memory n); ``context`` is the caller's extra context, ``mission`` the bank's;
    ``directives`` ``[(name, content)]`` highest priority first (:func:`system_prompt`),
    recalled once more after the memories."""
    lines = "\n".join(f"{i}. [{date}] {text}" for i, (date, text) in enumerate(memories, 1))
    parts = []
    if mission:
        parts.append(f"Bank mission: {mission}")
    if context:
        parts.append(f"Context: {context}")
    parts.append(f"Question: {query}")
    parts.append(f"Memories:\n{UNITS_OPEN}\n{lines}\n{UNITS_CLOSE}")
    if directives:
        parts.append(f"Reminder: the answer must obey all {len(directives)} directives of "
                     "the system message.")
    return [{"role": "system", "content": system_prompt(directives)},
            {"role": "user", "content": "\n".join(parts)}]
