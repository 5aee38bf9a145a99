"""Banks: list and delete (a bank is created on first retain)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api.deps import services
from api.schemas import check_bank_id
from rcll.store import banks

bp = Blueprint("banks", __name__)


@bp.get("/v1/default/banks")
def list_banks():
    with services().pool.connection() as conn:
        rows = banks.list_all(conn)
    return jsonify({"banks": [{"bank_id": r["id"], "name": r["name"], "units": r["units"],
                               "created_at": r["created_at"].isoformat()} for r in rows]})


@bp.delete("/v1/default/banks/<bank_id>")
def delete_bank(bank_id: str):
    check_bank_id(bank_id)
    with services().pool.connection() as conn:
        banks.delete(conn, bank_id)
    return jsonify({"success": True, "bank_id": bank_id})
