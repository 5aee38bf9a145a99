"""Dedup proposals: list, scan now, decide (``merge`` | ``keep``). Nothing merges silently."""

from __future__ import annotations

from functools import partial

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api import contracts as C
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll.access.visibility import unit_filter
from rcll.cascade import invalidation
from rcll.consolidate.dedup import DedupSettings, scan_bank
from rcll.store import audit, banks, dedup

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


def _visible(bank_id: str) -> tuple[str, dict]:
    """Only proposals whose two units the caller may see (:mod:`rcll.access.visibility`)."""
    return dedup.pair_filter(partial(unit_filter, principal(), bank_id))


@bp.get(PREFIX)
@requires("read")
@doc({200: C.DedupPage}, query=C.DedupQuery, paged=True)
def list_proposals(bank_id: str):
    """One page of the bank's proposals, highest cosine first: ``?state=&limit=&offset=``."""
    check_bank_id(bank_id)
    state = request.args.get("state")
    if state is not None and state not in dedup.STATES:
        raise APIError(400, "invalid_request", f"state must be one of {', '.join(dedup.STATES)}",
                       {"field": "state"})
    limit, offset = page_params()
    with services().pool.connection() as conn:
        banks.get(conn, bank_id)
        rows, total = dedup.list_page(conn, bank_id, state, limit, offset,
                                      visible=_visible(bank_id))
    return jsonify(page_body("proposals", rows, limit, offset, total))


@bp.post(f"{PREFIX}/scan")
@requires("write")
@doc({200: C.Open})
def scan_now(bank_id: str):
    """Scan the bank now (synchronous, bounded to ``dedup_window`` units)."""
    check_bank_id(bank_id)
    svc = services()
    out = scan_bank(svc.pool, bank_id, DedupSettings.from_settings(svc.settings))
    with svc.pool.connection() as conn:
        audit.record(conn, principal().member_id, "dedup.scan", bank_id, None,
                     {k: v for k, v in out.items()
                      if isinstance(v, (int, float, str, bool)) and k != "bank_id"})
    return jsonify(out)


@bp.post(f"{PREFIX}/<proposal_id>")
@requires("admin")
@doc({200: C.Open}, body=DecideRequest,
    errors={404: ['dedup_proposal_not_found', 'unit_not_found'], 409: ['dedup_proposal_decided',
    'dedup_unit_not_live'], 400: ['invalid_proposal_id', 'invalid_unit_id']})
def decide(bank_id: str, proposal_id: str):
    """Decide one open proposal; 409 ``dedup_proposal_decided`` with its state if decided."""
    check_bank_id(bank_id)
    body = DecideRequest.model_validate(json_body())
    svc = services()
    with svc.pool.connection() as conn, conn.transaction():
        out = dedup.decide(conn, bank_id, proposal_id, body.action, body.keep_unit_id,
                           body.decided_by, visible=_visible(bank_id))
        merged = [u["id"] for u in (out["unit_a"], out["unit_b"]) if u["superseded_by_id"]]
        audit.record(conn, principal().member_id, "dedup.decide", bank_id,
                     merged[0] if merged else None,
                     {"proposal_id": out["id"], "action": body.action, "merged": merged,
                      "decided_by": body.decided_by})
    invalidation.units_left(svc.hot_tier, bank_id, merged)  # committed: leaves tier 1
    return jsonify(out)
