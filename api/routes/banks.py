"""Banks: list (paged) and delete (a bank is created on first retain)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api import hindsight
from api import hindsight as hs
from api.auth import principal, requires
from api.deps import services
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.access.visibility import grants_filter
from rcll.cascade import invalidation
from rcll.store import audit, banks

bp = Blueprint("banks", __name__)


@bp.get("/v1/default/banks")
@requires("member")
@doc({200: hs.BankListResponse}, paged=True)
def list_banks():
    """One page of the banks the caller holds a grant on (every bank for a deployment
    admin), newest first: ``?limit=&offset=``."""
    limit, offset = page_params()
    who = principal()
    only = None if who.is_admin else sorted(who.grants)  # the banks the caller holds a grant on
    with services().pool.connection() as conn:
        rows, total = banks.list_page(conn, limit, offset, only,
                                      visible=grants_filter(who, "u"))  # counts what it sees
    return jsonify(page_body("banks", [{"bank_id": r["id"], "name": r["name"],
                                        "units": r["units"], "fact_count": r["units"],
                                        "disposition": hindsight.disposition(r["config"] or {}),
                                        "mission": (r["config"] or {}).get("mission"),
                                        "created_at": r["created_at"].isoformat()}
                                       for r in rows], limit, offset, total))


@bp.delete("/v1/default/banks/<bank_id>")
@requires("admin")
@doc({200: T.DeletedBank})
def delete_bank(bank_id: str):
    """Delete the bank and everything in it (units, vectors, documents, jobs, tier 1)."""
    check_bank_id(bank_id)
    svc = services()
    with svc.pool.connection() as conn:
        banks.delete(conn, bank_id)
        audit.record(conn, principal().member_id, "bank.delete", bank_id=bank_id)
    invalidation.bank_dropped(svc.hot_tier, bank_id)  # committed: the cascade forgets it
    return jsonify({"success": True, "bank_id": bank_id, "message": f"bank {bank_id} deleted"})
