"""Banks: list (paged) and delete (a bank is created on first retain); the rules live in
:class:`rcll.banks.service.BankService`."""

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

bp = Blueprint("banks", __name__)


@bp.get("/v1/default/banks")
@requires("member")
@doc({200: hs.BankListResponse}, paged=True)
def list_banks():
    """One page of the banks the caller holds a grant on (every bank for a deployment
    admin), newest first: ``?limit=&offset=``."""
    limit, offset = page_params()
    rows, total = services().banks.list(principal(), limit, offset)  # counts what it sees
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
    """Delete the bank and everything in it (units, vectors, documents, jobs, tier 1) →
    ``{success, bank_id, existed, message}`` (and ``deleted_count: 0`` when it did not exist). A bank that does not exist is
    done too (200, ``existed: false``, ``deleted_count: 0``), as Hindsight answers: its
    integrations (crewai, agno) reset a bank by deleting it, first run included."""
    check_bank_id(bank_id)
    existed = services().banks.delete(principal(), bank_id, missing_ok=True)
    body = {"success": True, "bank_id": bank_id, "existed": existed,
            "message": f"bank {bank_id} deleted" if existed
            else f"bank {bank_id} did not exist; nothing to delete"}
    if not existed:
        body["deleted_count"] = 0
    return jsonify(body)
