"""The ``rcll-bank`` format, version 1: a bank as JSON Lines, one record per line.

Every line is a JSON object with a ``type``; a stream holds, in this order::

    header            format, version, bank {id, name, config, created_at}, embedding
                      {model, dim, input_stamp} | null, vectors, grants, scope, documents,
                      exported_at, producer
    document*         document versions (table ``documents``: one row per lineage)
    chunk*            their chunks
    entity*           entities (``merged_into_id`` may point forward)
    unit*             memory units, each with ``revisions`` (the history of corrections),
                      ``feedback`` ({success, failure, updated_at} | null) and, when the
                      header says ``vectors``, ``vector`` (``embedding.dim`` floats, or null
                      for a unit that had none); ``superseded_by_id`` may point forward
    link*             unit-to-unit links (``link_type``: temporal, semantic, entity, …)
    mention*          unit-to-entity mentions, in the order they were made
    closet*           closet summaries (their summary unit is among the units)
    dedup_proposal*   duplicate proposals with their decision
    entity_proposal*  entity merge proposals with their decision
    grant*            the bank's grants (only when the export was asked for them)
    end               ``counts``: records per type, so a stream cut short is told apart

Field names are the table's column names (``bank_id`` left out: the bank is the header's);
times are ISO 8601 with an offset, ids UUID strings. Not part of an export: jobs, the
audit log, tunnels (they join two banks), entity history, tier-1 activation (Redis).

Parsing (:func:`parse_header`, :func:`parse_record`) checks each line against the models
below: unknown fields are ignored (a later minor revision may add some), a missing field,
a wrong type, a value the store refuses (a kind, origin, layer or link type outside its set,
NaN, a NUL or a lone surrogate in a string) is a :class:`FormatError` naming the line.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, ConfigDict, Field, ValidationError, field_validator

from rcll.validation import TextModel

FORMAT = "rcll-bank"
VERSION = 1
MEDIA_TYPE = "application/x-ndjson"
GZIP_MEDIA_TYPE = "application/gzip"

UNIT_KINDS = ("fact", "note", "decision", "preference", "event", "summary", "chunk")
ORIGINS = ("told", "derived", "migrated")
LINK_TYPES = ("temporal", "semantic", "entity", "causal", "derived_from", "about", "supersedes")
ROLES = ("read", "write", "admin")
ORDER: tuple[str, ...] = ("document", "chunk", "entity", "unit", "link", "mention", "closet",
                          "dedup_proposal", "entity_proposal", "grant")


class FormatError(ValueError):
    """Line ``line`` (1-based) is not a valid record: ``message`` says why; ``errors`` holds
    the field errors (``[{loc, msg, type}]``) when a field is wrong."""

    def __init__(self, line: int, message: str, errors: list | None = None) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message
        self.errors = errors or []


Text = Annotated[str, Field(max_length=1_000_000)]
Short = Annotated[str, Field(min_length=1, max_length=500)]
Purposes = Annotated[list[Short], Field(min_length=1, max_length=64)]


class _Rec(TextModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class BankRec(_Rec):
    id: Annotated[str, Field(min_length=1, max_length=256)]
    name: Annotated[str, Field(max_length=1000)]
    config: dict[str, Any] = {}
    created_at: AwareDatetime | None = None


class EmbeddingRec(_Rec):
    model: Short
    dim: int = Field(gt=0, le=16_000)
    input_stamp: Short


class ScopeRec(_Rec):
    full: bool = True
    member: str | None = None
    purposes: list[str] | None = None


class Header(_Rec):
    type: Literal["header"]
    format: Literal["rcll-bank"]
    version: int
    bank: BankRec
    embedding: EmbeddingRec | None = None
    vectors: bool = False
    grants: bool = False
    scope: ScopeRec = ScopeRec()
    documents: list[str] | None = None
    exported_at: AwareDatetime | None = None


class DocumentRec(_Rec):
    type: Literal["document"]
    id: UUID
    document_id: Annotated[str, Field(min_length=1, max_length=2000)]
    content_hash: Short
    metadata: dict[str, Any] = {}
    created_at: AwareDatetime
    updated_at: AwareDatetime
    revision: int = Field(1, ge=1)
    version_item: int = Field(0, ge=0)
    tags: list[Text] = []
    context: Text | None = None
    mentioned_at: AwareDatetime | None = None
    audience: Short = "bank"
    purposes: Purposes


class ChunkRec(_Rec):
    type: Literal["chunk"]
    id: UUID
    document_id: UUID
    index: int = Field(ge=0)
    text: Text
    content_hash: Short


class EntityRec(_Rec):
    type: Literal["entity"]
    id: UUID
    name: Text
    normalized: Text
    entity_type: Short = "other"
    aliases: list[Text] = []
    merged_into_id: UUID | None = None
    created_at: AwareDatetime
    updated_at: AwareDatetime


class RevisionRec(_Rec):
    revision: int = Field(ge=1)
    text: Text
    fields: dict[str, Any] = {}
    changed_by: str | None = None
    changed_at: AwareDatetime


class FeedbackRec(_Rec):
    success: int = Field(0, ge=0)
    failure: int = Field(0, ge=0)
    updated_at: AwareDatetime | None = None


class UnitRec(_Rec):
    type: Literal["unit"]
    id: UUID
    document_id: UUID | None = None
    chunk_id: UUID | None = None
    chunk_hash: Short | None = None
    kind: Literal[UNIT_KINDS]  # type: ignore[valid-type]
    text: Text
    context: Text | None = None
    heading: Text | None = None
    room: Short = "general"
    hall: Short = "fact"
    layer: int = Field(2, ge=0, le=3)
    audience: Short = "bank"
    purposes: Purposes
    origin: Literal[ORIGINS] = "told"  # type: ignore[valid-type]
    confidence: float = 1.0
    revision: int = Field(1, ge=1)
    superseded_by_id: UUID | None = None
    invalidated_reason: Text | None = None
    occurred_start: AwareDatetime | None = None
    occurred_end: AwareDatetime | None = None
    mentioned_at: AwareDatetime | None = None
    created_at: AwareDatetime
    forgotten_at: AwareDatetime | None = None
    metadata: dict[str, Any] = {}
    tags: list[Text] = []
    token_count: int | None = Field(None, ge=0)
    document_revision: int | None = None
    extraction_version: Short | None = None
    entity_names: list[Text] = []
    nb_len: float | None = 0.0
    revisions: list[RevisionRec] = []
    feedback: FeedbackRec | None = None
    vector: list[float] | None = None

    @field_validator("superseded_by_id")
    @classmethod
    def _not_self(cls, v, info):
        if v is not None and v == info.data.get("id"):
            raise ValueError("a unit cannot supersede itself")
        return v


class LinkRec(_Rec):
    type: Literal["link"]
    from_unit: UUID
    to_unit: UUID
    link_type: Literal[LINK_TYPES]  # type: ignore[valid-type]
    weight: float = 1.0
    created_at: AwareDatetime

    @field_validator("to_unit")
    @classmethod
    def _two_units(cls, v, info):
        if v == info.data.get("from_unit"):
            raise ValueError("a link joins two different units")
        return v


class MentionRec(_Rec):
    type: Literal["mention"]
    unit_id: UUID
    entity_id: UUID
    mention: Text
    source: Short = "deterministic"


class ClosetRec(_Rec):
    type: Literal["closet"]
    id: UUID
    room: Short
    hall: Short
    summary: Text
    unit_id: UUID | None = None
    model: Short | None = None
    prompt_version: Short | None = None
    source_unit_ids: list[UUID]
    created_at: AwareDatetime
    vector: list[float] | None = None


class DedupProposalRec(_Rec):
    type: Literal["dedup_proposal"]
    id: UUID
    unit_a: UUID
    unit_b: UUID
    members: list[UUID] = Field(min_length=2)
    cosine: float
    state: Literal["open", "merged", "kept"] = "open"
    decided_by: str | None = None
    decided_at: AwareDatetime | None = None
    created_at: AwareDatetime


class EntityProposalRec(_Rec):
    type: Literal["entity_proposal"]
    id: UUID
    entity_a: UUID
    entity_b: UUID
    score: float
    reason: Text
    state: Literal["open", "merged", "rejected"] = "open"
    decided_by: str | None = None
    decided_at: AwareDatetime | None = None
    created_at: AwareDatetime


class GrantRec(_Rec):
    type: Literal["grant"]
    member_id: Short
    role: Literal[ROLES]  # type: ignore[valid-type]
    purposes: Purposes


class EndRec(_Rec):
    type: Literal["end"]
    counts: dict[str, int]


RECORDS: dict[str, type[_Rec]] = {
    "document": DocumentRec, "chunk": ChunkRec, "entity": EntityRec, "unit": UnitRec,
    "link": LinkRec, "mention": MentionRec, "closet": ClosetRec,
    "dedup_proposal": DedupProposalRec, "entity_proposal": EntityProposalRec,
    "grant": GrantRec, "end": EndRec,
}


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number RCLL stores")


def loads(raw: bytes | str, line: int) -> dict:
    """One line as a JSON object. Raises :class:`FormatError` for text that is not JSON
    (NaN and Infinity included), not UTF-8, nested too deep, or not an object."""
    try:
        obj = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise FormatError(line, "nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise FormatError(line, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # JSONDecodeError and the NaN refusal
        raise FormatError(line, f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise FormatError(line, "a record must be a JSON object")
    return obj


def _validate(model: type[_Rec], obj: dict, line: int) -> _Rec:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        errors = [{"loc": ".".join(str(p) for p in e["loc"]), "msg": e["msg"], "type": e["type"]}
                  for e in exc.errors(include_url=False, include_input=False)][:20]
        first = errors[0]
        raise FormatError(line, f"{obj.get('type')} record: {first['loc'] or 'record'}: "
                                f"{first['msg']}", errors) from None


def parse_header(raw: bytes | str) -> Header:
    """Line 1. Raises :class:`FormatError` for anything but an ``rcll-bank`` header of
    version :data:`VERSION` (a Hindsight transfer ZIP, for one, is refused here)."""
    if raw[:2] == b"PK":
        raise FormatError(1, "this is a ZIP archive (Hindsight's transfer format?); RCLL "
                             f"imports its own {FORMAT} JSON Lines export")
    obj = loads(raw, 1)
    if obj.get("type") != "header" or obj.get("format") != FORMAT:
        raise FormatError(1, f"the first line must be the {FORMAT} header "
                             f'({{"type": "header", "format": "{FORMAT}", …}})')
    head = _validate(Header, obj, 1)
    if head.version != VERSION:  # type: ignore[attr-defined]
        raise FormatError(1, f"{FORMAT} version {head.version} is not read by this "  # type: ignore[attr-defined]
                             f"build (it reads version {VERSION})")
    return head  # type: ignore[return-value]


def parse_record(raw: bytes | str, line: int, after: str | None) -> _Rec:
    """The record at ``line``, which follows a record of type ``after`` (``None``: the
    header). Raises :class:`FormatError` for bad JSON, an unknown type, a record out of the
    order of :data:`ORDER`, a second header, anything after the end record, or a field of
    the wrong type or value."""
    obj = loads(raw, line)
    kind = obj.get("type")
    if kind == "header":
        raise FormatError(line, "a second header")
    if after == "end":
        raise FormatError(line, "a record after the end record")
    model = RECORDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise FormatError(line, f"unknown record type {kind!r}; known: {', '.join(RECORDS)}")
    if kind != "end" and after not in (None, kind) and ORDER.index(kind) < ORDER.index(after):
        raise FormatError(line, f"a {kind} record after {after} records (the order is "
                                f"{', '.join(ORDER)})")
    return _validate(model, obj, line)
