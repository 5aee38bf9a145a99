"""Session-start context: ``GET /banks/{bank_id}/context`` — the bank's L0 and L1 units and
its most recent units within a token budget, visible to the caller only
(:mod:`rcll.search.session_context`; MCP serves the same as a resource and a prompt)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import contracts as C
from api.auth import principal, requires
from api.deps import services
from api.errors import APIError
from api.openapi import doc
from api.schemas import check_bank_id
from rcll.search import session_context as sc

bp = Blueprint("context", __name__)


@bp.get("/banks/<bank_id>/context")
@requires("read")
@doc({200: C.ContextAnswer}, query=C.ContextQuery, errors={400: ['unknown_purpose']})
def context(bank_id: str):
    """Query ``purpose`` (default the deployment's) and ``budget_tokens`` (1-32,000,
    default 800) → :func:`rcll.search.session_context.session_context`'s JSON. 400
    ``invalid_request`` / ``unknown_purpose``, 403 ``forbidden`` / ``purpose_not_granted``,
    404 ``bank_not_found``."""
    check_bank_id(bank_id)
    raw = request.args.get("budget_tokens", str(sc.DEFAULT_BUDGET_TOKENS))
    if not (raw.isascii() and raw.isdigit()):
        raise APIError(400, "invalid_request", "budget_tokens must be an integer",
                       {"field": "budget_tokens", "value": raw[:64]})
    svc = services()
    s = svc.settings
    scope = sc.caller_scope(principal(), bank_id, request.args.get("purpose"), s.purposes,
                            s.default_purpose)
    return jsonify(sc.session_context(svc.recall_pool(bank_id), svc.tokens, scope,
                                      int(raw)))
