"""Hindsight's document routes beyond list, get and delete (those are in
:mod:`api.routes.hindsight`): a document's chunks, its history, its tags (``PATCH``), a
reprocess, and one chunk by id. Each view parses, calls one service —
:class:`rcll.documents.service.DocumentService`, or the retain service for a reprocess —
and shapes the answer with Hindsight's fields (``hindsight-client`` 1.1's models, below)
beside RCLL's. A document or chunk the caller may not see is 404, as one that does not
exist."""

from __future__ import annotations

from typing import Annotated, Any

from flask import Blueprint, jsonify
from pydantic import BaseModel, ConfigDict, Field

from api import hindsight as hs
from api.auth import principal, requires
from api.deps import json_body, retain_service, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_params
from api.routes.hindsight import AnyPath
from api.schemas import check_bank_id
from rcll.access.jobs import job_json
from rcll.validation import TextModel

bp = Blueprint("documents", __name__)
bp.record_once(lambda state: state.app.url_map.converters.setdefault("anypath", AnyPath))
DOC = "/v1/default/banks/<bank_id>/documents/<anypath:document_id>"
Tag = Annotated[str, Field(min_length=1, max_length=200)]

# Hindsight's PATCH …/documents/{id} fields: what RCLL does with each
UPDATE_FIELDS = {
    "tags": "honoured: replaces the document's tags and its units' ([] clears them)",
    "observation_scopes": "ignored: RCLL has no observations (closets summarise instead); "
                          "alone it is refused (400 unsupported_hindsight_value)",
}


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChunkResponse(_Open):
    chunk_id: str
    document_id: str
    bank_id: str
    chunk_index: int
    chunk_text: str
    created_at: str
    units: int | None = Field(None, description="RCLL: the units on this chunk the caller sees")


class ListChunksResponse(_Open):
    items: list[ChunkResponse]
    total: int
    limit: int
    offset: int


class DocumentEvent(_Open):
    document_id: str
    kind: str = Field(description="retain, reprocess, retag, fact_edited (correct), "
                      "fact_invalidated (supersede), fact_deleted (forget)")
    created_at: str | None = None
    operation_id: str | None = None
    fact_id: str | None = None
    facts_added: int = 0
    facts_removed: int = 0
    revision: int | None = Field(None, description="RCLL: the document revision it made")
    actor: str | None = Field(None, description="RCLL: the member who made the change")


class DocumentHistoryResponse(_Open):
    document_id: str
    total: int
    limit: int
    offset: int
    items: list[DocumentEvent]


class UpdateDocumentBody(TextModel):
    """Hindsight's ``UpdateDocumentRequest`` (:data:`UPDATE_FIELDS`)."""

    model_config = ConfigDict(extra="forbid")
    tags: list[Tag] | None = Field(None, max_length=64)
    observation_scopes: str | list[list[str]] | None = None


class UpdateDocumentResponse(_Open):
    success: bool
    document_id: str
    tags: list[str]
    units: int = Field(description="RCLL: units retagged")
    ignored_fields: list[str]


class ReprocessDocumentResponse(_Open):
    success: bool
    operation_id: str
    items_count: int
    status: str
    state: str
    operation: dict[str, Any]


@bp.get(DOC + "/chunks")
@requires("read")
@doc({200: ListChunksResponse}, paged=True, errors={404: ["document_not_found"]},
     tags=["hindsight"])
def list_chunks(bank_id: str, document_id: str):
    """The chunks of the document's live version, by index (the lineage ``GET
    …/documents/{id}`` shows; chunks holding a unit the caller sees): ``limit`` (default
    100), ``offset``. 404 ``document_not_found`` also for a document the caller may not
    see. A document whose own id ends in ``/chunks`` is read through the documents list."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    rows, total = services().documents.chunks(principal(), bank_id, document_id, limit,
                                              offset)
    return jsonify({"items": rows, "total": total, "limit": limit, "offset": offset})


@bp.get(DOC + "/history")
@requires("read")
@doc({200: DocumentHistoryResponse}, paged=True, errors={404: ["document_not_found"]},
     tags=["hindsight"])
def document_history(bank_id: str, document_id: str):
    """The document's changes, newest first: each version retained or reprocessed (the
    units it added and replaced), each retag, and correct / supersede / forget on its units
    the caller sees (``fact_id``); ``limit`` (default 100), ``offset`` count events. 404
    ``document_not_found``."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    h = services().documents.history(principal(), bank_id, document_id, limit, offset)
    items = [{"document_id": document_id, "kind": e["kind"], "created_at": e["at"],
              "operation_id": e["operation_id"], "fact_id": e["unit_id"],
              "facts_added": e["units_added"], "facts_removed": e["units_removed"],
              "revision": e["revision"], "actor": e["actor"], "details": e["details"]}
             for e in h["items"]]
    return jsonify({"document_id": document_id, "total": h["total"], "limit": limit,
                    "offset": offset, "items": items, "revision": h["revision"],
                    "audience": h["audience"], "purposes": h["purposes"]})


@bp.patch(DOC)
@requires("write")
@doc({200: UpdateDocumentResponse}, body=UpdateDocumentBody,
     errors={400: ["unsupported_hindsight_value"], 404: ["document_not_found"]},
     tags=["hindsight"])
def update_document(bank_id: str, document_id: str):
    """Replace the document's tags (and its units'; ``[]`` clears them) without
    re-processing it (:data:`UPDATE_FIELDS`); the change is in its history (``retag``).
    400 ``invalid_request`` without ``tags``, 400 ``unsupported_hindsight_value`` for
    ``observation_scopes`` alone, 404 ``document_not_found``."""
    check_bank_id(bank_id)
    body = UpdateDocumentBody.model_validate(
        {k: v for k, v in json_body().items() if v is not None})
    ignored = ["observation_scopes"] if body.observation_scopes is not None else []
    if body.tags is None:
        if ignored:
            raise hs.unsupported("observation_scopes", body.observation_scopes,
                                 "RCLL has no observations; send tags to change")
        raise APIError(400, "invalid_request", "send tags (the document's new tags)",
                       {"field": "tags"})
    out = services().documents.retag(principal(), bank_id, document_id, body.tags)
    return jsonify({"success": True, "document_id": document_id, "tags": out["tags"],
                    "units": out["units"], "lineages": out["lineages"],
                    "ignored_fields": ignored})


@bp.post(DOC + "/reprocess")
@requires("write")
@doc({200: ReprocessDocumentResponse},
     errors={404: ["document_not_found"], 409: ["nothing_to_reprocess"],
             413: ["item_too_large"], 503: ["queue_unavailable"]}, tags=["hindsight"])
def reprocess_document(bank_id: str, document_id: str):
    """Re-run the retain pipeline on the document's stored latest version as a new
    operation (queued; its live text, with the current chunking and classification): the
    answer names the operation, which makes the document's next revision (a ``reprocess``
    event in its history). 404 ``document_not_found``, 409 ``nothing_to_reprocess``."""
    check_bank_id(bank_id)
    who = principal()
    job = retain_service().reprocess(bank_id, document_id, who)
    op = job_json(who, job)
    return jsonify({"success": True, "operation_id": op["operation_id"], "items_count": 1,
                    "status": op["status"], "state": op["state"], "operation": op})


@bp.get("/v1/default/chunks/<chunk_id>")
@requires("member")
@doc({200: ChunkResponse}, errors={404: ["chunk_not_found"]}, tags=["hindsight"])
def get_chunk(chunk_id: str):
    """One chunk by id, in any bank the caller may read, while it holds a unit the caller
    sees there (an earlier version's chunk too). 404 ``chunk_not_found`` for a malformed,
    unknown or invisible id alike."""
    return jsonify(services().documents.chunk(principal(), chunk_id))
