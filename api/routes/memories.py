"""One memory unit with its links, entities and sources: ``GET …/memories/{unit_id}``."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api.auth import requires
from api.deps import services
from api.openapi import doc
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.store import banks, memories

bp = Blueprint("memories", __name__)


@bp.get("/v1/default/banks/<bank_id>/memories/<unit_id>")
@requires("read")
@doc({200: T.Unit}, errors={400: ['invalid_unit_id'], 404: ['unit_not_found']})
def memory(bank_id: str, unit_id: str):
    """The unit (:func:`rcll.store.memories.get`); 400 ``invalid_unit_id``, 404
    ``bank_not_found`` / ``unit_not_found``."""
    check_bank_id(bank_id)
    memories.parse_unit_id(unit_id)
    with services().read_pool.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        banks.get(conn, bank_id)
        return jsonify(memories.get(conn, bank_id, unit_id))
