"""One memory unit with its links, entities and sources: ``GET …/memories/{unit_id}``
(Hindsight's shape) — the ``read`` verb under its older path, the same service as
``GET /banks/{bank_id}/units/{unit_id}``, so both answer the same for every caller."""

from __future__ import annotations

from flask import Blueprint, jsonify, request


from api import contracts as C
from api import hindsight as hs
from api.auth import principal, requires
from api.deps import services
from api.openapi import doc
from api.schemas import check_bank_id
from rcll import api_types as T

bp = Blueprint("memories", __name__)


@bp.get("/v1/default/banks/<bank_id>/memories/<unit_id>")
@requires("read")
@doc({200: T.Unit}, query=C.PurposeQuery,
     errors={400: ['invalid_unit_id', 'unknown_purpose'], 404: ['unit_not_found']})
def memory(bank_id: str, unit_id: str):
    """The unit (:func:`rcll.lifecycle.read.read` as the caller: audience and purposes
    apply, links and sources only to units it sees; ``?purpose=`` reads for one purpose);
    400 ``invalid_unit_id`` / ``unknown_purpose``, 403 ``purpose_not_granted``, 404
    ``bank_not_found`` / ``unit_not_found`` (also a unit the caller may not see). On this
    Hindsight path ``metadata`` holds strings and RCLL's structured provenance (an uploaded
    file's) is in ``provenance`` (:func:`api.hindsight.with_hindsight_metadata`)."""
    check_bank_id(bank_id)
    unit = services().lifecycle.read(principal(), bank_id, unit_id,
                                     purpose=request.args.get("purpose"))
    return jsonify(hs.with_hindsight_metadata(unit))  # Hindsight's path: metadata as strings
