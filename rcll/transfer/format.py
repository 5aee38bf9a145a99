"""RCLL's bank export format, ``rcll-bank`` version 1: JSON Lines, one record per line.

Every line is a JSON object with a ``type``; the stream is, in this order::

    {"type": "header", "format": "rcll-bank", "version": 1, "bank": {id, name, config,
     created_at}, "embedding": {"model", "dim", "input_stamp"} | null, "vectors": bool,
     "grants": bool, "scope": "full" | "member", "exported_at": ISO time}
    {"type": "document", ...}  document versions (table ``documents``)
    {"type": "chunk", ...}     chunks of those documents
    {"type": "entity", ...}    entities
    {"type": "unit", ...}      memory units, each with ``revisions`` (list), ``feedback``
                               (``{success, failure}`` or null) and, with vectors, ``vector``
                               (list of ``embedding.dim`` floats; absent: re-embedded on import)
    {"type": "link", ...}      unit–unit links (temporal, semantic, entity, causal, …)
    {"type": "mention", ...}   unit–entity mentions
    {"type": "closet", ...}    closet summaries (their summary unit is among the units)
    {"type": "grant", ...}     bank grants (only when asked for, by a bank admin)
    {"type": "end", "counts": {type: n}}   the record counts: a cut stream is detected

Field names are the table's column names (``bank_id`` left out: the bank is the header's);
times are ISO 8601 with offset, ids UUID strings. A record's fields are checked on import by
the models below (:func:`parse_line`); unknown fields are ignored (a later minor version may
add some), a missing required field or a wrong type is an :class:`ExportLineError` naming the
line. Tunnels (links between banks), the audit log, jobs, dedup and entity-merge proposals
are not part of a bank's export.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FORMAT = "rcll-bank"
VERSION = 1
MEDIA_TYPE = "application/x-ndjson"
MAX_LINE_BYTES = 64 * 1024 * 1024  # one unit with its vector and revisions fits many times


class ExportLineError(ValueError):
    """Line ``line`` (1-based) of an export is not a valid record: ``message`` says why,
    ``errors`` holds pydantic's error list when a field is wrong."""

    def __init__(self, line: int, message: str, errors: list | None = None) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message
        self.errors = errors or []


class _Rec(BaseModel):
    model_config = ConfigDict(extra="ignore")


class BankRec(_Rec):
    id: str = Field(min_length=1)
    name: str
    config: dict[str, Any] = {}
    created_at: datetime | None = None


class EmbeddingRec(_Rec):
    model: str
    dim: int = Field(gt=0)
    input_stamp: str


class Header(_Rec):
    type: Literal["header"]
    format: Literal["rcll-bank"]
    version: int
    bank: BankRec
    embedding: EmbeddingRec | None = None
    vectors: bool = False
    grants: bool = False
    scope: str = "full"
    exported_at: datetime | None = None


class DocumentRec(_Rec):
    type: Literal["document"]
    id: UUID
    document_id: str
    content_hash: str
    metadata: dict[str, Any] = {}
    created_at: datetime
    updated_at: datetime
    revision: int = 1
    version_seq: int = 0
    version_item: int = 0
    tags: list[str] = []
    context: str | None = None
    mentioned_at: datetime | None = None
    audience: str = "bank"
    purposes: list[str] = Field(min_length=1)


class ChunkRec(_Rec):
    type: Literal["chunk"]
    id: UUID
    document_id: UUID
    index: int
    text: str
    content_hash: str


class EntityRec(_Rec):
    type: Literal["entity"]
    id: UUID
    name: str
    normalized: str
    entity_type: str = "other"
    aliases: list[str] = []
    merged_into_id: UUID | None = None
    created_at: datetime
    updated_at: datetime


class RevisionRec(_Rec):
    revision: int
    text: str
    fields: dict[str, Any] = {}
    changed_by: str | None = None
    changed_at: datetime


class FeedbackRec(_Rec):
    success: int = Field(0, ge=0)
    failure: int = Field(0, ge=0)
    updated_at: datetime | None = None


class UnitRec(_Rec):
    type: Literal["unit"]
    id: UUID
    document_id: UUID | None = None
    chunk_id: UUID | None = None
    chunk_hash: str | None = None
    kind: str
    text: str
    context: str | None = None
    room: str = "general"
    hall: str = "fact"
    layer: int = Field(2, ge=0, le=3)
    audience: str = "bank"
    purposes: list[str] = Field(min_length=1)
    origin: str = "told"
    confidence: float = 1.0
    revision: int = 1
    superseded_by_id: UUID | None = None
    invalidated_reason: str | None = None
    occurred_start: datetime | None = None
    occurred_end: datetime | None = None
    mentioned_at: datetime | None = None
    created_at: datetime
    metadata: dict[str, Any] = {}
    tags: list[str] = []
    token_count: int | None = None
    document_revision: int | None = None
    extraction_version: str | None = None
    entity_names: list[str] = []
    forgotten_at: datetime | None = None
    nb_len: float | None = 0.0
    heading: str | None = None
    revisions: list[RevisionRec] = []
    feedback: FeedbackRec | None = None
    vector: list[float] | None = None


class LinkRec(_Rec):
    type: Literal["link"]
    from_unit: UUID
    to_unit: UUID
    link_type: str
    weight: float = 1.0
    created_at: datetime


class MentionRec(_Rec):
    type: Literal["mention"]
    unit_id: UUID
    entity_id: UUID
    mention: str
    source: str = "deterministic"


class ClosetRec(_Rec):
    type: Literal["closet"]
    id: UUID
    room: str
    hall: str
    summary: str
    unit_id: UUID | None = None
    model: str | None = None
    prompt_version: str | None = None
    source_unit_ids: list[UUID]
    created_at: datetime
    vector: list[float] | None = None


class GrantRec(_Rec):
    type: Literal["grant"]
    member_id: str
    role: Literal["read", "write", "admin"]
    purposes: list[str] = Field(min_length=1)


class EndRec(_Rec):
    type: Literal["end"]
    counts: dict[str, int]


RECORDS: dict[str, type[_Rec]] = {
    "document": DocumentRec, "chunk": ChunkRec, "entity": EntityRec, "unit": UnitRec,
    "link": LinkRec, "mention": MentionRec, "closet": ClosetRec, "grant": GrantRec,
    "end": EndRec,
}
ORDER: tuple[str, ...] = ("document", "chunk", "entity", "unit", "link", "mention", "closet",
                          "grant")


def _loads(raw: bytes | str, line: int) -> dict:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ExportLineError(line, f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ExportLineError(line, "a record must be a JSON object")
    return obj


def _validate(model: type[_Rec], obj: dict, line: int) -> _Rec:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
                  for e in exc.errors(include_url=False, include_input=False)]
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        raise ExportLineError(line, f"{obj.get('type')} record: {where}: {first['msg']}",
                              errors) from None


def parse_header(raw: bytes | str) -> Header:
    """Line 1. Raises :class:`ExportLineError` (line 1) for anything but an ``rcll-bank``
    header of a version this build reads (:data:`VERSION`)."""
    obj = _loads(raw, 1)
    if obj.get("type") != "header" or obj.get("format") != FORMAT:
        raise ExportLineError(1, f"the first line must be the {FORMAT} header "
                                 "(type \"header\", format \"rcll-bank\")")
    head = _validate(Header, obj, 1)
    if head.version != VERSION:
        raise ExportLineError(1, f"format version {head.version} is not supported "
                                 f"(this build reads version {VERSION})")
    return head


def parse_line(raw: bytes | str, line: int, after: str | None) -> _Rec:
    """Record at ``line`` (after a record of type ``after``; ``None`` after the header).
    Raises :class:`ExportLineError` for bad JSON, an unknown type, a record out of the
    order :data:`ORDER`, a second header, or a field of the wrong type."""
    obj = _loads(raw, line)
    kind = obj.get("type")
    if kind == "header":
        raise ExportLineError(line, "a second header")
    if after == "end":
        raise ExportLineError(line, "a record after the end record")
    model = RECORDS.get(kind)  # type: ignore[arg-type]
    if model is None:
        raise ExportLineError(line, f"unknown record type {kind!r}; known: "
                                    f"{', '.join(RECORDS)}")
    if kind != "end" and after is not None and ORDER.index(kind) < ORDER.index(after):
        raise ExportLineError(line, f"a {kind} record after {after} records "
                                    f"(order: {', '.join(ORDER)})")
    return _validate(model, obj, line)


def read_stream(lines, on_record=None):
    """Check a whole export from an iterable of lines (bytes or str, line ends allowed):
    yields ``(line_no, record)`` — the :class:`Header` first, then each record — and checks
    at the end that an ``end`` record came and that its counts equal the records seen.
    Raises :class:`ExportLineError` at the first bad line (a line over
    :data:`MAX_LINE_BYTES`, an empty stream, a missing or wrong end record)."""
    header = None
    after: str | None = None
    seen: dict[str, int] = {}
    ended = False
    n = 0
    for n, raw in enumerate(lines, 1):
        if len(raw) > MAX_LINE_BYTES:
            raise ExportLineError(n, f"line longer than {MAX_LINE_BYTES} bytes")
        if not raw.strip():
            if n == 1:
                raise ExportLineError(1, "the first line is empty; expected the header")
            continue
        if header is None:
            header = parse_header(raw)
            yield n, header
            continue
        rec = parse_line(raw, n, after)
        kind = rec.type  # type: ignore[attr-defined]
        if kind == "end":
            if rec.counts != seen:  # type: ignore[attr-defined]
                raise ExportLineError(n, f"the end record counts {rec.counts} but the "  # type: ignore[attr-defined]
                                         f"export holds {seen}")
            ended = True
        else:
            seen[kind] = seen.get(kind, 0) + 1
        after = kind
        yield n, rec
    if header is None:
        raise ExportLineError(1, "empty export; expected the header")
    if not ended:
        raise ExportLineError(n + 1, "the export ends without its end record (cut short?)")
