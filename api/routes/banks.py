"""Banks: list (paged) and delete (a bank is created on first retain)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api.deps import services
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll.cascade import invalidation
from rcll.store import banks

bp = Blueprint("banks", __name__)


@bp.get("/v1/default/banks")
def list_banks():
    """One page of banks, newest first: ``?limit=&offset=``."""
    limit, offset = page_params()
    with services().pool.connection() as conn:
        rows, total = banks.list_page(conn, limit, offset)
    return jsonify(page_body("banks", [{"bank_id": r["id"], "name": r["name"],
                                        "units": r["units"],
                                        "created_at": r["created_at"].isoformat()}
                                       for r in rows], limit, offset, total))


@bp.delete("/v1/default/banks/<bank_id>")
def delete_bank(bank_id: str):
    check_bank_id(bank_id)
    svc = services()
    with svc.pool.connection() as conn:
        banks.delete(conn, bank_id)
    invalidation.bank_dropped(svc.hot_tier, bank_id)  # committed: the cascade forgets it
    return jsonify({"success": True, "bank_id": bank_id})
