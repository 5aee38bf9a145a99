"""Input of the lifecycle verbs: the fields of one unit, validated once for every channel
(HTTP, CLI, MCP). A :class:`pydantic.ValidationError` is a 400 ``invalid_request`` with the
field errors."""

from __future__ import annotations

import struct
from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, field_validator, model_validator

from rcll.hierarchy import Hall, Room
from rcll.text import is_blank
from rcll.validation import TextModel, clean_text, json_value, utc_in_range

Kind = Literal["fact", "note", "decision", "preference", "event", "summary"]
_DATETIME = TypeAdapter(datetime)
MAX_TEXT_CHARS = 100_000  # the token limit (the embedder's window) is checked by the service


def _tags(v: list[str] | None) -> list[str] | None:
    for tag in v or ():
        if not 1 <= len(tag) <= 200:
            raise ValueError("each tag must be 1-200 characters")
        clean_text(tag)
    return v


class UnitFields(TextModel):
    """Fields of a unit a caller may set; all optional (``None``: not given). ``audience``:
    ``'bank'`` or a member id; ``purposes``: non-empty subset of the configured set (checked
    by the service: 400 ``unknown_purpose``); times ISO 8601, naive means UTC;
    ``confidence`` in [0, 1]."""

    # strict: no coercion across JSON types (``true`` is not a layer, ``5`` not a time,
    # ``"2"`` not a revision); times are ISO 8601 strings, parsed by ``_iso_text``
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | None = Field(None, min_length=1, max_length=MAX_TEXT_CHARS)
    kind: Kind | None = None
    context: str | None = Field(None, max_length=10_000)
    room: Room | None = None
    hall: Hall | None = None
    layer: int | None = Field(None, ge=0, le=3)
    audience: str | None = Field(None, min_length=1, max_length=64)
    purposes: list[str] | None = Field(None, min_length=1, max_length=32)
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None
    mentioned_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = Field(None, max_length=64)
    confidence: float | None = Field(None, ge=0.0, le=1.0)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and is_blank(v):
            raise ValueError("text must not be blank")
        return v

    @field_validator("confidence")
    @classmethod
    def _real(cls, v: float | None) -> float | None:
        """As the column stores it (a 4-byte ``real``): a value too small for one is 0.0
        (PostgreSQL refused it with an underflow, a 500; found by schemathesis)."""
        return None if v is None else struct.unpack("f", struct.pack("f", v))[0]

    @field_validator("occurred_start", "occurred_end", "mentioned_at", mode="before")
    @classmethod
    def _iso_text(cls, v: Any) -> datetime | None:
        """An ISO 8601 string (or a ``datetime`` from Python callers) → ``datetime``; a
        number, boolean or anything else is refused (strict mode)."""
        if v is None or isinstance(v, datetime):
            return v
        if not isinstance(v, str):
            raise ValueError("must be an ISO 8601 date-time string")
        return _DATETIME.validate_python(v)

    @field_validator("occurred_start", "occurred_end", "mentioned_at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return utc_in_range(v)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: dict | None) -> dict | None:
        return json_value(v) if v is not None else v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str] | None) -> list[str] | None:
        return _tags(v)

    @model_validator(mode="after")
    def _order(self) -> UnitFields:
        if self.occurred_start and self.occurred_end and self.occurred_end < self.occurred_start:
            raise ValueError("occurred_end is before occurred_start")
        return self

    def given(self) -> dict:
        """The fields the caller set (explicit ``null`` counts as set for clearable ones)."""
        return {k: getattr(self, k) for k in self.model_fields_set}


class NewUnit(UnitFields):
    """A unit to create (remember, derive, supersede): ``text`` required."""

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)


def parse_new(unit: dict | NewUnit) -> NewUnit:
    """Validate a new unit's fields; raises ``pydantic.ValidationError``."""
    return unit if isinstance(unit, NewUnit) else NewUnit.model_validate(unit)


def parse_changes(changes: dict | UnitFields) -> UnitFields:
    """Validate ``correct``'s changes; raises ``pydantic.ValidationError``."""
    return changes if isinstance(changes, UnitFields) else UnitFields.model_validate(changes)
