"""Dedup proposals: list, scan now, decide (``merge`` | ``keep``). Nothing merges silently.
The rules live in :class:`rcll.consolidate.service.ConsolidateService`."""

from __future__ import annotations

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api import contracts as C
from api.auth import principal, requires
from api.deps import consolidate_service, json_body
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll.consolidate.service import check_dedup_state

bp = Blueprint("dedup", __name__)
PREFIX = "/v1/default/banks/<bank_id>/dedup-proposals"


class DecideRequest(BaseModel):
    """``POST …/dedup-proposals/{id}``: ``action`` merge | keep; ``keep_unit_id`` (merge
    only, default the older unit); ``decided_by`` (free text, stored)."""

    model_config = ConfigDict(extra="forbid")

    action: str = Field(pattern="^(merge|keep)$")
    keep_unit_id: str | None = Field(None, max_length=64)
    decided_by: str | None = Field(None, max_length=200)

    @model_validator(mode="after")
    def _keep_unit_only_with_merge(self):
        if self.action == "keep" and self.keep_unit_id is not None:
            raise ValueError("keep_unit_id applies to action merge only")
        return self


@bp.get(PREFIX)
@requires("read")
@doc({200: C.DedupPage}, query=C.DedupQuery, paged=True)
def list_proposals(bank_id: str):
    """One page of the bank's proposals, highest cosine first: ``?state=&limit=&offset=``.
    Each is a pair (``unit_a``, ``unit_b``) plus its cluster: ``size`` and ``members``
    (``{id, text, live, superseded_by_id}`` each; a pair is a cluster of 2)."""
    check_bank_id(bank_id)
    state = check_dedup_state(request.args.get("state"))
    limit, offset = page_params()
    rows, total = consolidate_service().dedup_proposals(principal(), bank_id, state, limit,
                                                        offset)
    return jsonify(page_body("proposals", rows, limit, offset, total))


@bp.post(f"{PREFIX}/scan")
@requires("write")
@doc({200: C.Open})
def scan_now(bank_id: str):
    """Scan the bank now (synchronous, bounded to ``dedup_window`` units)."""
    check_bank_id(bank_id)
    return jsonify(consolidate_service().dedup_scan(principal(), bank_id))


@bp.post(f"{PREFIX}/<proposal_id>")
@requires("admin")
@doc({200: C.Open}, body=DecideRequest,
    errors={404: ['dedup_proposal_not_found', 'unit_not_found'], 409: ['dedup_proposal_decided',
    'dedup_unit_not_live'], 400: ['invalid_proposal_id', 'invalid_unit_id']})
def decide(bank_id: str, proposal_id: str):
    """Decide one open proposal for all its members (a cluster's N units: ``merge`` keeps
    one, supersedes the rest); the proposal plus ``merged_unit_ids``. 409
    ``dedup_proposal_decided`` with its state if decided."""
    check_bank_id(bank_id)
    body = DecideRequest.model_validate(json_body())
    return jsonify(consolidate_service().decide_dedup(principal(), bank_id, proposal_id,
                                                      body.action, body.keep_unit_id,
                                                      body.decided_by))
