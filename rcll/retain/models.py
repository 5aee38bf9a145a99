"""Retain input: Hindsight's item shape plus RCLL's room, hall and layer."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from rcll.hierarchy import Hall, Room
from rcll.text import is_blank
from rcll.validation import TextModel, clean_text, json_value, utc_in_range


class RetainItem(TextModel):
    """One item to retain. ``content`` is required and non-blank; the rest is optional.

    ``timestamp`` is when the content was said or written (ISO 8601; naive means UTC);
    ``document_id`` is the upsert key (defaults to a hash of the content). ``audience``
    (``'bank'`` or a member id) and ``purposes`` (a non-empty subset of ``RCLL_PURPOSES``)
    go on every unit the item makes, chunks and facts alike
    (:func:`rcll.access.purposes.unit_access` checks them and fills the defaults).
    """

    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1)
    timestamp: datetime | None = None
    context: str | None = Field(None, max_length=10_000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    document_id: str | None = Field(None, min_length=1, max_length=512)
    tags: list[str] = Field(default_factory=list, max_length=64)
    room: Room | None = None
    hall: Hall | None = None
    layer: int = Field(2, ge=0, le=3)
    # who may recall the item's units (spec §7): 'bank' or one member id, and for which
    # purposes; None = the defaults the retain service fills in ('bank', the writer's
    # default purposes) before the job is stored
    audience: str | None = Field(None, min_length=1, max_length=64)
    purposes: list[str] | None = Field(None, max_length=16)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if is_blank(v):
            raise ValueError("content must not be blank")
        return v

    @field_validator("timestamp")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return utc_in_range(v)

    @field_validator("content", "context", "document_id")
    @classmethod
    def _text(cls, v: str | None) -> str | None:
        return clean_text(v) if v is not None else v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        for tag in v:
            if not 1 <= len(tag) <= 200:
                raise ValueError("each tag must be 1-200 characters")
            clean_text(tag)
        return v

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: dict) -> dict:
        return json_value(v)


