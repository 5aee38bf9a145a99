"""Regex classifier for room and hall (spec §4.2): no model, first match wins.

Patterns live in ``patterns.toml`` beside this module; explicit request values always win.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rcll.hierarchy import DEFAULT_HALL, DEFAULT_ROOM

PATTERNS_FILE = Path(__file__).with_name("patterns.toml")


@dataclass(frozen=True)
class Classifier:
    """Ordered ``(name, compiled regex, on lower-cased text)`` lists for rooms and halls
    (:func:`compile_pattern`)."""

    rooms: tuple[tuple[str, re.Pattern, bool], ...]
    halls: tuple[tuple[str, re.Pattern, bool], ...]

    def classify(self, text: str, room: str | None = None, hall: str | None = None) -> tuple[str, str]:
        """``(room, hall)`` for ``text``; given values win, else first match, else the fallback."""
        if room and hall:
            return room, hall
        lowered = text.lower()
        return (room or _first(self.rooms, text, lowered, DEFAULT_ROOM),
                hall or _first(self.halls, text, lowered, DEFAULT_HALL))


def _first(patterns: tuple[tuple[str, re.Pattern, bool], ...], text: str, lowered: str,
           default: str) -> str:
    for name, rx, on_lower in patterns:
        if rx.search(lowered if on_lower else text):
            return name
    return default


def compile_pattern(pattern: str) -> tuple[re.Pattern, bool]:
    """``(regex, on_lower)``: matching is case-insensitive either way. A pattern without an
    upper-case letter is compiled as is and searched in the lower-cased text (``str.lower``),
    which is faster than ``re.IGNORECASE`` on these alternations (decision 0025); one
    with an upper-case letter (an escape such as ``\\S``, or a capital) gets
    ``re.IGNORECASE`` and searches the text itself. Raises ``re.error``."""
    if pattern == pattern.lower():
        return re.compile(pattern), True
    return re.compile(pattern, re.I), False


def load(path: Path = PATTERNS_FILE) -> Classifier:
    """Read and compile a pattern file. Raises ``re.error`` or ``tomllib.TOMLDecodeError``."""
    data = tomllib.loads(path.read_text())

    def compile_(rows: list[dict]) -> tuple[tuple[str, re.Pattern, bool], ...]:
        return tuple((r["name"], *compile_pattern(r["pattern"])) for r in rows)

    return Classifier(rooms=compile_(data.get("rooms", [])), halls=compile_(data.get("halls", [])))


@lru_cache(maxsize=1)
def default_classifier() -> Classifier:
    return load()
