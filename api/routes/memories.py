"""One memory unit with its links, entities and sources: ``GET …/memories/{unit_id}`` — the
``read`` verb under its older path, so both answer the same for every caller."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api.auth import principal, requires
from api.deps import services
from api.schemas import check_bank_id

bp = Blueprint("memories", __name__)


@bp.get("/v1/default/banks/<bank_id>/memories/<unit_id>")
@requires("read")
def memory(bank_id: str, unit_id: str):
    """The unit (:func:`rcll.lifecycle.read.read` as the caller: links and sources only to
    units it sees); 400 ``invalid_unit_id``, 404 ``bank_not_found`` / ``unit_not_found``
    (also a unit the caller may not see)."""
    check_bank_id(bank_id)
    return jsonify(services().lifecycle.read(principal(), bank_id, unit_id))
