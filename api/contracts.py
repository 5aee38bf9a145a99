"""Models the OpenAPI document reads for routes whose views do not parse with a model of
their own: the query parameters of each GET, the bodies that views check field by field
(members, keys, grants, feedback, closets, entity edits), Hindsight's request bodies (RCLL's
strict model plus the allow-listed Hindsight fields of :mod:`api.hindsight`, built from
those tables) and the answers of RCLL's own routes. Views keep their own checks and error
codes; these models describe them (a drift shows as a schemathesis failure,
``tests/api/test_schemathesis.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from api import hindsight as hs
from api.schemas import BANK_ID_RULE, RetainRequest
from rcll.retain.models import RetainItem
from rcll.search.models import RecallQuery

_STRICT = ConfigDict(extra="forbid")
_OPEN = ConfigDict(extra="allow")
BankIdStr = Field(pattern=BANK_ID_RULE)
JobState = Literal["queued", "running", "succeeded", "failed", "partial", "cancelled"]
HindsightStatus = Literal["pending", "processing", "completed", "failed", "cancelled"]


# -- query parameters ----------------------------------------------------------------------

class OperationsQuery(BaseModel):
    """``state`` (RCLL's names) or ``status`` (Hindsight's)."""

    model_config = _STRICT
    state: JobState | None = None
    status: HindsightStatus | None = None


class JobsQuery(OperationsQuery):
    bank_id: str | None = Field(None, pattern=BANK_ID_RULE)


class RecallGetQuery(BaseModel):
    """``GET /banks/{bank_id}/recall``: RecallQuery's scalar fields as parameters
    (``tiers`` comma-separated)."""

    model_config = _STRICT
    query: str = Field(min_length=1)
    max_tokens: int | None = None
    limit: int | None = None
    recipe: str | None = None
    channels: str | None = None
    room: str | None = None
    hall: str | None = None
    max_layer: int | None = None
    include_archive: bool | None = None
    include_superseded: bool | None = None
    trace: bool | None = None
    context_tokens_left: int | None = None
    tiers: str | None = Field(None, description="comma-separated subset of hot,warm,cold")
    follow_tunnels: bool | None = None
    query_timestamp: str | None = None
    purpose: str | None = None


class PurposeQuery(BaseModel):
    model_config = _STRICT
    purpose: str | None = None


class ContextQuery(PurposeQuery):
    budget_tokens: int | None = Field(None, ge=1, le=32_000)


class MemoriesListQuery(BaseModel):
    model_config = _STRICT
    type: str | None = Field(None, description="Hindsight type or RCLL kind")
    q: str | None = Field(None, max_length=200)
    document_id: str | None = None
    entity_id: str | None = Field(None, description="a UUID")
    tags: list[str] | None = None
    tags_match: str | None = None
    state: Literal["valid", "invalidated"] | None = None


class MemoryGraphQuery(BaseModel):
    model_config = _STRICT
    type: str | None = Field(None, description="Hindsight type or RCLL kind")
    limit: int | None = Field(None, ge=0, le=1000, description="units shown (default 1000)")
    q: str | None = Field(None, max_length=200)
    tags: list[str] | None = None
    tags_match: str | None = None
    document_id: str | None = None
    chunk_id: str | None = Field(None, description="a UUID")


class EntityGraphQuery(BaseModel):
    model_config = _STRICT
    limit: int | None = Field(None, ge=0, le=1000, description="edges shown (default 1000)")
    min_count: int | None = Field(None, ge=1, description="units an edge needs (default 1)")
    tags: list[str] | None = None
    tags_match: str | None = None
    tag_groups: str | None = Field(None, description="refused when non-empty")


class TimeseriesQuery(BaseModel):
    model_config = _STRICT
    period: Literal["1h", "12h", "1d", "7d", "30d", "90d"] | None = None
    time_field: str | None = Field(None, description="created_at (default), mentioned_at or "
                                   "occurred_start; others fall back to created_at")


class TypeQuery(BaseModel):
    model_config = _STRICT
    type: str | None = Field(None, description="Hindsight type or RCLL kind")


class SearchQuery(BaseModel):
    model_config = _STRICT
    q: str | None = Field(None, max_length=200)


class DocumentsQuery(SearchQuery):
    tags: list[str] | None = None
    tags_match: str | None = None


class RoomHallQuery(BaseModel):
    model_config = _STRICT
    room: str | None = None
    hall: str | None = None


class DedupQuery(BaseModel):
    model_config = _STRICT
    state: str | None = None


class ProposalQuery(BaseModel):
    model_config = _STRICT
    state: Literal["open", "merged", "rejected"] | None = None


class AuditQuery(BaseModel):
    model_config = _STRICT
    action: str | None = None
    actor: str | None = None
    unit_id: str | None = Field(None, description="a UUID")


class TunnelsQuery(BaseModel):
    model_config = _STRICT
    bank_id: str = Field(pattern=BANK_ID_RULE)


# -- request bodies checked field by field in the views ------------------------------------

class MemberCreate(BaseModel):
    model_config = _STRICT
    member_id: str
    name: str | None = None
    kind: Literal["agent", "person"] | None = None
    is_admin: bool | None = None
    default_purposes: list[str] | None = None


class MemberUpdate(BaseModel):
    model_config = _STRICT
    name: str | None = None
    kind: Literal["agent", "person"] | None = None
    is_admin: bool | None = None
    default_purposes: list[str] | None = None
    disabled: bool | None = None


class KeyCreate(BaseModel):
    model_config = _STRICT
    label: str | None = None


class GrantSet(BaseModel):
    model_config = _STRICT
    role: Literal["read", "write", "admin"]
    purposes: list[str] | None = None


class FeedbackBody(BaseModel):
    model_config = _STRICT
    outcome: Literal["success", "failure"]


class ClosetsBody(BaseModel):
    model_config = _STRICT
    room: str | None = Field(None, min_length=1, max_length=100)
    hall: str | None = Field(None, min_length=1, max_length=100)


class MergeByIds(BaseModel):
    model_config = _STRICT
    entity_ids: list[str] = Field(min_length=1, max_length=1000)
    actor: str | None = None


class MergeByProposal(BaseModel):
    model_config = _STRICT
    proposal_id: str
    keep_id: str | None = None
    decision: Literal["merge", "reject"] | None = None
    actor: str | None = None


class MergeBody(BaseModel):
    """Either form of ``POST …/entities/merge``."""

    model_config = ConfigDict(extra="forbid")
    entity_ids: list[str] | None = Field(None, min_length=1, max_length=1000)
    proposal_id: str | None = None
    keep_id: str | None = None
    decision: Literal["merge", "reject"] | None = None
    actor: str | None = None


class SplitBody(BaseModel):
    model_config = _STRICT
    aliases: list[str] | None = None
    unit_ids: list[str] | None = None
    name: str | None = None
    actor: str | None = None


class ExportQuery(BaseModel):
    """``GET /banks/{bank_id}/export``."""

    model_config = _STRICT
    vectors: bool | None = Field(None, description="carry the vectors (default true; "
                                                   "without them the import re-embeds)")
    grants: bool | None = Field(None, description="carry the bank's grants (default false)")
    gzip: bool | None = Field(None, description="gzip the stream (default false)")


class ImportQuery(BaseModel):
    """``POST /banks/{bank_id}/import``."""

    model_config = _STRICT
    ids: Literal["auto", "keep", "new"] | None = Field(
        None, description="keep: the export's ids; new: ids derived for this bank; auto "
                          "(default): new when the export's source bank exists here")
    grants: bool | None = Field(None, description="write the export's grants (default true)")


class HindsightExportQuery(BaseModel):
    """Hindsight's ``POST …/transfer/export`` flags, plus RCLL's ``vectors`` and ``grants``."""

    model_config = _STRICT
    include_data: bool | None = None
    include_bank_config: bool | None = None
    include_history: bool | None = Field(None, description="accepted; RCLL carries no "
                                                           "audit log or LLM requests")
    document_id: list[str] | None = Field(None, description="only these documents")
    vectors: bool | None = None
    grants: bool | None = None


class HindsightImportQuery(BaseModel):
    """Hindsight's ``POST …/transfer/import`` flags (``mode=merge`` is refused)."""

    model_config = _STRICT
    mode: Literal["restore", "merge"] | None = None
    target_bank_id: str | None = Field(None, pattern=BANK_ID_RULE)
    document_conflict: Literal["skip", "replace", "new-id"] | None = None
    include_data: bool | None = None
    include_bank_config: bool | None = None
    include_history: bool | None = None
    grants: bool | None = None


class HindsightCloneQuery(BaseModel):
    """Hindsight's ``POST …/clone``."""

    model_config = _STRICT
    target_bank_id: str = Field(pattern=BANK_ID_RULE)
    include_data: bool | None = None
    include_bank_config: bool | None = None
    include_history: bool | None = None
    grants: bool | None = None


class TransferImportForm(BaseModel):
    """``multipart/form-data`` of Hindsight's ``POST …/transfer/import``."""

    file: bytes = Field(description="an rcll-bank export (JSON Lines, plain or gzip)")


class FilesRetainForm(BaseModel):
    """``multipart/form-data`` of ``POST …/files/retain`` (Hindsight's ``retain_files``)."""

    files: list[bytes] = Field(description="one part per file (PDF, DOCX, PPTX, XLSX, HTML, "
                                           "EPUB, text, markdown); one retain job each")
    request: str | None = Field(None, description="JSON text of FileRetainRequest: "
                                                  "{parser, files_metadata: [...]}")


# the Hindsight fields whose values RCLL checks (the others are accepted as any value)
_HINDSIGHT_TYPES: dict[str, Any] = {
    "budget": Literal["low", "mid", "high"] | None,
    "types": list[str] | None,
    "min_scores": dict[str, float | None] | None,
    "update_mode": Literal["replace"] | None,
}


def _with_hindsight(name: str, base: type[BaseModel], fields: dict[str, str]) -> type[BaseModel]:
    """``base`` plus each allow-listed Hindsight field (null allowed), described by its
    entry of the table (what RCLL does with it)."""
    extra = {f: (_HINDSIGHT_TYPES.get(f, Any), Field(None, description=why))
             for f, why in fields.items() if f not in base.model_fields}
    return create_model(name, __base__=base, **extra)


HindsightRetainItem = _with_hindsight("HindsightRetainItem", RetainItem, hs.RETAIN_ITEM_FIELDS)


class HindsightRetainRequest(RetainRequest):
    """Hindsight's retain body: RCLL's items plus Hindsight's allow-listed fields."""

    items: list[HindsightRetainItem] = Field(min_length=1)  # type: ignore[valid-type]
    document_tags: list[str] | None = Field(None, description=hs.RETAIN_REQUEST_FIELDS["document_tags"])
    operation_id: str | None = Field(None, description=hs.RETAIN_REQUEST_FIELDS["operation_id"])
    idempotency_key: str | None = None


HindsightRecallRequest = _with_hindsight("HindsightRecallRequest", RecallQuery, hs.RECALL_FIELDS)
def _bank_field(name: str, why: str) -> tuple[Any, Any]:
    """The type of a Hindsight bank field as :func:`api.hindsight.bank_update` checks it
    (text, 1-5 traits); Hindsight's engine settings are stored as given (any value)."""
    if name == "name":
        return str | None, Field(None, min_length=1, max_length=200, description=why)
    if name in ("mission", "reflect_mission", "background"):
        return str | None, Field(None, max_length=10_000, description=why)
    if name == "disposition":
        return dict[str, int] | None, Field(None, description=why)
    if name.startswith("disposition_"):
        return int | None, Field(None, ge=1, le=5, description=why)
    return Any, Field(None, description=why)


BankUpdate = create_model("BankUpdate", __config__=_STRICT,
                          **{f: _bank_field(f, why) for f, why in hs.BANK_FIELDS.items()})


class ConfigPatch(BaseModel):
    model_config = _STRICT
    updates: BankUpdate  # type: ignore[valid-type]


# -- answers of RCLL's own routes ----------------------------------------------------------

def page(name: str, key: str, item: Any = dict[str, Any], **more: Any) -> type[BaseModel]:
    """An open page model ``{key: [item], limit, offset, total}`` (plus ``more`` fields)."""
    return create_model(name, __config__=_OPEN, **{key: (list[item], ...)},
                        limit=(int, ...), offset=(int, ...), total=(int, ...),
                        **{k: (v, ...) for k, v in more.items()})


class Open(BaseModel):
    """An object with fields beside the named ones."""

    model_config = _OPEN


class Status(Open):
    status: str


class Liveness(Open):
    status: str
    version: str
    uptime_seconds: float


class Readiness(Open):
    ready: bool
    checks: dict[str, dict[str, Any]]
    mode: str


class Member(Open):
    member_id: str
    kind: str
    is_admin: bool
    default_purposes: list[str]


class IssuedKey(Open):
    key: str


class KeysAnswer(Open):
    keys: list[dict[str, Any]]


class Grant(Open):
    bank_id: str
    member_id: str


class GrantsAnswer(Open):
    bank_id: str
    grants: list[dict[str, Any]]


class FeedbackAnswer(Open):
    unit_id: str
    success: int
    failure: int
    worth: float | None


class JobAccepted(Open):
    operation_id: str
    status: str
    operation: dict[str, Any]


class EntityAnswer(Open):
    entity: dict[str, Any]


class EntityDetail(Open):
    id: str
    name: str
    mentions: dict[str, Any]


class MergeAnswer(Open):
    entity: dict[str, Any] | None = None
    proposal_id: str | None = None
    state: str | None = None


class ContextAnswer(Open):
    bank_id: str


class Deleted(Open):
    success: bool


MembersPage = page("MembersPage", "members")
AuditPage = page("AuditPage", "entries")
ClosetsPage = page("ClosetsPage", "closets")
DedupPage = page("DedupPage", "proposals")
ProposalsPage = page("ProposalsPage", "proposals")
EntitiesPage = page("EntitiesPage", "entities", items=list[dict[str, Any]])
RecallGetAnswer = Open
