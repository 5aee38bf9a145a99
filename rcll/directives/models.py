"""What a directive may hold: Hindsight's ``CreateDirectiveRequest`` and
``UpdateDirectiveRequest`` fields with RCLL's text rules (:mod:`rcll.validation`). Strict:
a priority must be an integer and ``is_active`` a boolean (``"1"`` or ``1`` is refused)."""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator

from rcll.text import is_blank
from rcll.validation import TextModel, clean_text

MAX_NAME = 256
MAX_CONTENT = 20_000
MAX_TAGS = 64
MAX_TAG = 200
PRIORITY_RANGE = 1_000_000_000  # |priority| at most this (a PostgreSQL integer holds it)


def _tags(v: list[str] | None) -> list[str] | None:
    if v is None:
        return v
    for tag in v:
        if not 1 <= len(tag) <= MAX_TAG:
            raise ValueError(f"each tag must be 1-{MAX_TAG} characters")
        clean_text(tag)
    return list(dict.fromkeys(v))


def _visible(v: str | None) -> str | None:
    if v is not None and is_blank(v):
        raise ValueError("must not be blank")
    return v


class DirectiveCreate(TextModel):
    """A new directive: ``name`` and ``content`` (not blank), ``priority`` (higher is
    injected first; default 0), ``is_active`` (default true), ``tags`` (empty or absent:
    global; else it applies only to a reflect whose tags match)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=MAX_NAME)
    content: str = Field(min_length=1, max_length=MAX_CONTENT)
    priority: int = Field(0, ge=-PRIORITY_RANGE, le=PRIORITY_RANGE)
    is_active: bool = True
    tags: list[str] | None = Field(None, max_length=MAX_TAGS)

    _check_tags = field_validator("tags")(_tags)
    _check_text = field_validator("name", "content")(_visible)


class DirectiveUpdate(TextModel):
    """The fields to change; a field left out or ``null`` stays as it is (Hindsight's
    client sends every field, unset ones as ``null``); ``tags: []`` makes it global."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = Field(None, min_length=1, max_length=MAX_NAME)
    content: str | None = Field(None, min_length=1, max_length=MAX_CONTENT)
    priority: int | None = Field(None, ge=-PRIORITY_RANGE, le=PRIORITY_RANGE)
    is_active: bool | None = None
    tags: list[str] | None = Field(None, max_length=MAX_TAGS)

    _check_tags = field_validator("tags")(_tags)
    _check_text = field_validator("name", "content")(_visible)

    def changes(self) -> dict:
        """The fields given a value (not ``null``)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}
