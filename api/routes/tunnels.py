"""Tunnels between banks (spec §6): ``POST /tunnels``, ``GET /tunnels?bank_id=``,
``GET``/``DELETE /tunnels/{id}``, ``POST /bridge``.

No bank in the path: the routes declare ``member`` and the service checks the roles on the
banks involved (:mod:`rcll.hierarchy.tunnels`). Write routes answer 403
``read_only_deployment`` in a read-only deployment before touching anything.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import contracts as C
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.hierarchy.tunnels import BridgeRequest, TunnelRequest

bp = Blueprint("tunnels", __name__)


def _writable() -> None:
    if services().settings.read_only:
        raise APIError(403, "read_only_deployment",
                       "this deployment serves only recall and read; tunnels cannot change here")


@bp.post("/tunnels")
@requires("member")
@doc({201: T.Tunnel, 200: T.Tunnel}, body=TunnelRequest,
    errors={400: ['invalid_unit_id', 'same_bank'], 404: ['unit_not_found'], 409: ['tunnel_exists']})
def create_tunnel():
    """``{source_unit_id, target_unit_id, relationship="related", bidirectional=true}`` →
    201 the tunnel (200 when an equal one existed). 400 ``invalid_request`` /
    ``invalid_unit_id`` / ``same_bank``, 403 ``forbidden`` (write on both banks needed),
    404 ``unit_not_found``, 409 ``tunnel_exists``."""
    _writable()
    req = TunnelRequest.model_validate(json_body())
    tunnel, created = services().tunnels.create(principal(), req)
    return jsonify(tunnel), 201 if created else 200


@bp.get("/tunnels")
@requires("member")
@doc({200: T.TunnelsPage}, query=C.TunnelsQuery, paged=True,
    errors={400: ['invalid_bank_id'], 404: ['bank_not_found']})
def list_tunnels():
    """``?bank_id=&limit=&offset=`` → ``{tunnels, limit, offset, total}``: the tunnels
    touching the bank whose other end the caller may read and see, oldest first. 400
    ``invalid_request`` (no bank_id) / ``invalid_bank_id``, 403, 404 ``bank_not_found``."""
    bank_id = request.args.get("bank_id")
    if bank_id is None:
        raise APIError(400, "invalid_request", "query parameter 'bank_id' is required")
    check_bank_id(bank_id)
    limit, offset = page_params()
    rows, total = services().tunnels.list(principal(), bank_id, limit, offset)
    return jsonify(page_body("tunnels", rows, limit, offset, total))


@bp.get("/tunnels/<tunnel_id>")
@requires("member")
@doc({200: T.Tunnel}, errors={400: ['invalid_tunnel_id'], 404: ['tunnel_not_found']})
def get_tunnel(tunnel_id: str):
    """The tunnel; 400 ``invalid_tunnel_id``, 404 ``tunnel_not_found`` (also one the caller
    may not see)."""
    return jsonify(services().tunnels.get(principal(), tunnel_id))


@bp.delete("/tunnels/<tunnel_id>")
@requires("member")
@doc({200: T.DeletedTunnel}, errors={400: ['invalid_tunnel_id'], 404: ['tunnel_not_found']})
def delete_tunnel(tunnel_id: str):
    """Delete → 200 ``{"deleted": tunnel}``; 400 ``invalid_tunnel_id``, 403 (write on one of
    its banks needed), 404 ``tunnel_not_found``."""
    _writable()
    return jsonify({"deleted": services().tunnels.delete(principal(), tunnel_id)})


@bp.post("/bridge")
@requires("member")
@doc({201: T.BridgeAnswer, 200: T.BridgeAnswer}, body=BridgeRequest,
    errors={400: ['invalid_unit_id', 'same_bank', 'invalid_bank_id', 'unknown_purpose'],
    404: ['unit_not_found', 'no_match', 'bank_not_found'], 409: ['tunnel_exists']})
def bridge():
    """``{source_unit_id, target_unit_id}`` or ``{source: {bank_id, query}, target: {bank_id,
    query}}`` plus ``relationship``, ``bidirectional``, ``purpose`` → 201 ``{tunnel, created,
    matched}`` (200 when the tunnel existed). 404 ``no_match`` (details name the side),
    ``bank_id``/``unit_not_found``; otherwise as ``POST /tunnels``."""
    _writable()
    body = json_body()
    for side in ("source", "target"):
        if isinstance(body.get(side), dict) and isinstance(body[side].get("bank_id"), str):
            check_bank_id(body[side]["bank_id"])
    out = services().tunnels.bridge(principal(), BridgeRequest.model_validate(body))
    return jsonify(out), 201 if out["created"] else 200
