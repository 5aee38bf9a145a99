"""Answer shapes of the HTTP routes :class:`rcll.client.RCLLClient` calls, as ``TypedDict``s.

One definition serves two readers: the API's OpenAPI document (``api.openapi`` turns these
into JSON Schema with pydantic; each route declares them with ``api.openapi.doc``) and the
client, whose methods return them (plain ``dict`` at run time, typed for the checker).
Each shape lists the fields every answer carries (required) and the ones it may carry
(``NotRequired``); answers hold more fields beside them (``extra="allow"``: RCLL's and
Hindsight's names side by side, docs/guides/hindsight.md).
"""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

_OPEN = ConfigDict(extra="allow")


@with_config(_OPEN)
class Operation(TypedDict):
    """A job (retain, closets, …): RCLL's ``state`` (queued, running, succeeded, partial,
    failed, cancelled) and Hindsight's ``status`` (pending, processing, completed, failed,
    cancelled) beside it."""

    id: str
    operation_id: str
    bank_id: str
    state: str
    status: str
    task_type: str | None
    items_count: int
    error_message: str | None
    created_at: str
    kind: NotRequired[str]
    stage: NotRequired[str | None]
    counts: NotRequired[dict[str, Any]]
    error: NotRequired[str | None]
    updated_at: NotRequired[str | None]
    finished_at: NotRequired[str | None]
    # {"units_total": int | None, "units_done": int, "units_per_s": float | None,
    #  "eta_s": float | None} (rcll.store.jobs.unit_progress)
    unit_progress: NotRequired[dict[str, Any]]
    # a transfer's (export, import, clone): the download or the per-component counts
    result_metadata: NotRequired[dict[str, Any]]
    # true: the caller may not see the job's items; only its kind, state and times are shown
    # (rcll.access.jobs)
    redacted: NotRequired[bool]


@with_config(_OPEN)
class OperationDetail(Operation):
    """``GET …/operations/{id}``: the operation plus its items' errors (first page)."""

    item_errors: list[dict[str, Any]]
    item_errors_total: int


RetainAnswer = TypedDict("RetainAnswer", {
    "success": bool, "bank_id": str, "items_count": int, "async": bool,
    "operation_id": str, "operation_ids": list[str], "status": str, "state": str,
    "operation": Operation, "ignored_fields": NotRequired[list[str]]})
RetainAnswer.__pydantic_config__ = _OPEN  # type: ignore[attr-defined]
RetainAnswer.__doc__ = ("Retain's answer: Hindsight's ``{success, bank_id, items_count, async, "
                        "operation_id}`` and RCLL's ``state``, ``operation`` beside it.")


@with_config(_OPEN)
class FilesAnswer(TypedDict):
    """``POST …/files/retain``: one operation per file (each converts on the workers)."""

    operation_ids: list[str]
    operations: list[Operation]


@with_config(_OPEN)
class RecallScores(TypedDict):
    """A result's scores: ``final`` always; RCLL's per-channel ones (dense, lexical, rrf,
    rerank, …) and Hindsight's names (semantic, keyword, reranker) when they ran."""

    final: float


@with_config(_OPEN)
class RecallHit(TypedDict):
    """One recall result (RCLL's unit fields; on Hindsight's route also ``type`` and
    ``entities`` as names)."""

    id: str
    text: str
    scores: RecallScores
    kind: NotRequired[str]
    type: NotRequired[str]
    document_id: NotRequired[str | None]
    chunk_id: NotRequired[str | None]
    bank_id: NotRequired[str]
    tunnel: NotRequired[dict[str, Any] | None]


@with_config(_OPEN)
class RecallAnswer(TypedDict):
    """Recall's answer: ranked ``results`` cut to the token budget, and how they were found
    (``recipe``, ``tiers``, ``counts``, ``tokens_used``; ``timings_ms`` with ``trace``)."""

    results: list[RecallHit]
    tokens_used: NotRequired[int]
    counts: NotRequired[dict[str, Any]]
    tiers: NotRequired[dict[str, Any] | list[Any]]
    trace: NotRequired[dict[str, Any] | None]
    ignored_fields: NotRequired[list[str]]


@with_config(_OPEN)
class Unit(TypedDict):
    """One memory unit (``read``, ``remember``, ``derive``, ``correct``): its fields,
    ``revision``, ``audience`` and ``purposes``; ``read`` adds links, entities, sources."""

    id: str
    text: str
    revision: int
    audience: str
    purposes: list[str]


@with_config(_OPEN)
class SupersedeAnswer(TypedDict):
    """``supersede``: the old unit (now pointing at the new) and the new one."""

    superseded: dict[str, Any]
    unit: Unit


@with_config(_OPEN)
class ForgetAnswer(TypedDict):
    """``forget``: the unit's id and when it was forgotten (ISO 8601)."""

    unit_id: str
    forgotten_at: str


@with_config(_OPEN)
class JobsPage(TypedDict):
    """``GET /jobs``: one page of operations."""

    jobs: list[Operation]
    limit: int
    offset: int
    total: int


@with_config(_OPEN)
class Tunnel(TypedDict):
    """A tunnel between units of two banks (spec §6)."""

    id: str
    source_unit_id: str
    target_unit_id: str
    source_bank_id: str
    target_bank_id: str
    relationship: str
    bidirectional: bool


@with_config(_OPEN)
class TunnelsPage(TypedDict):
    """``GET /tunnels?bank_id=``: one page of tunnels (each with ``source_text`` and
    ``target_text``)."""

    tunnels: list[Tunnel]
    limit: int
    offset: int
    total: int


@with_config(_OPEN)
class DeletedTunnel(TypedDict):
    """``DELETE /tunnels/{id}``: the tunnel that was deleted."""

    deleted: Tunnel


@with_config(_OPEN)
class BridgeAnswer(TypedDict):
    """``POST /bridge``: the tunnel, whether it is new, and what each query matched (null
    for the id form)."""

    tunnel: Tunnel
    created: bool
    matched: dict[str, Any] | None


@with_config(_OPEN)
class DeletedBank(TypedDict):
    """``DELETE /v1/default/banks/{id}`` (``existed: false`` and ``deleted_count: 0`` for a
    bank that did not exist: Hindsight's answer, 200)."""

    success: bool
    bank_id: str
    message: str
    existed: NotRequired[bool]
    deleted_count: NotRequired[int]


@with_config(_OPEN)
class ImportAnswer(TypedDict):
    """``POST /banks/{id}/import`` and the clone: the bank written, its operation (``state``
    ``succeeded``, or ``queued`` while the units that came without a vector are embedded),
    the records written per type (``counts``), the ids mode used, the vectors reused and the
    units left for the embedder (:meth:`rcll.transfer.service.TransferService.answer`)."""

    bank_id: str
    operation_id: str
    status: str
    state: str
    ids: str
    counts: dict[str, int]
    vectors_reused: int
    units_to_embed: int
    grants_applied: int
    grants_skipped: list[str]
    dangling_references: int
    source_bank_id: str | None
    operation: Operation


@with_config(_OPEN)
class TransferSubmitted(TypedDict):
    """Hindsight's ``BankTransferSubmitResponse`` (202): poll
    ``GET /v1/default/banks/{bank_id}/operations/{operation_id}``; RCLL adds its own
    fields (``bank_id``, ``state``, the import's counts)."""

    operation_id: str
    status: str
