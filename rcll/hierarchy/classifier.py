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
    """Ordered ``(name, compiled regex)`` lists for rooms and halls."""

    rooms: tuple[tuple[str, re.Pattern], ...]
    halls: tuple[tuple[str, re.Pattern], ...]

    def classify(self, text: str, room: str | None = None, hall: str | None = None) -> tuple[str, str]:
        """``(room, hall)`` for ``text``; given values win, else first match, else the fallback."""
        return (room or _first(self.rooms, text, DEFAULT_ROOM),
                hall or _first(self.halls, text, DEFAULT_HALL))


def _first(patterns: tuple[tuple[str, re.Pattern], ...], text: str, default: str) -> str:
    for name, rx in patterns:
        if rx.search(text):
            return name
    return default


def load(path: Path = PATTERNS_FILE) -> Classifier:
    """Read and compile a pattern file. Raises ``re.error`` or ``tomllib.TOMLDecodeError``."""
    data = tomllib.loads(path.read_text())
    compile_ = lambda rows: tuple((r["name"], re.compile(r["pattern"], re.I)) for r in rows)  # noqa: E731
    return Classifier(rooms=compile_(data.get("rooms", [])), halls=compile_(data.get("halls", [])))


@lru_cache(maxsize=1)
def default_classifier() -> Classifier:
    return load()
