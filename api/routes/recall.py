"""Recall: synchronous, read-only, never calls a language model (spec §1.1). Runs the cascade
(rcll.cascade.cascade): hot and warm tiers, then the cold pipeline."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import contracts as C
from api import hindsight as hindsight_map
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.search.models import RecallQuery
from rcll.search.recipes import RECIPES

bp = Blueprint("recall", __name__)
_BOOLEANS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _run(bank_id: str, params: dict, hindsight: bool = False):
    check_bank_id(bank_id)
    ignored: list[str] = []
    floor = None
    nothing = False
    if hindsight:
        params, ignored, floor = hindsight_map.recall_body(params)
        nothing = hindsight_map.matches_nothing(params)
    for key in ("recipe", "channels"):
        name = params.get(key)
        # a name that is not storable text (NUL, lone surrogate) or too long is left to the
        # model's validation: 400 invalid_request like any other field
        if (isinstance(name, str) and name not in RECIPES and len(name) <= 64
                and name.isprintable() and not any(0xD800 <= ord(c) <= 0xDFFF for c in name)):
            raise APIError(400, "unknown_recipe", f"unknown recipe {name!r}",
                           {"field": key, "recipe": name, "known": sorted(RECIPES)})
    q = RecallQuery.model_validate(params)
    answer = services().cascade.recall(bank_id, q, principal()).to_json()
    if nothing:  # types naming no kind (["opinion"]): no results, as Hindsight
        answer["results"] = []
    if hindsight:
        answer = hindsight_map.recall_response(answer, ignored, floor)
    return jsonify(answer)


@bp.post("/v1/default/banks/<bank_id>/memories/recall")
@requires("read")
@doc({200: T.RecallAnswer}, body=C.HindsightRecallRequest,
    errors={400: ['unknown_recipe', 'unknown_purpose', 'unsupported_hindsight_value'],
            503: ['overloaded']})
def recall_post(bank_id: str):
    """Recall (Hindsight's route): RCLL's fields plus Hindsight's, mapped by
    :func:`api.hindsight.recall_body`; results carry Hindsight's ``type`` and
    ``scores.final``."""
    # Hindsight's route: its fields mapped (api.hindsight.recall_body), its result fields added
    return _run(bank_id, json_body(check_text_fields=False), hindsight=True)  # RecallQuery checks text


@bp.get("/banks/<bank_id>/recall")
@requires("read")
@doc({200: T.RecallAnswer}, query=C.RecallGetQuery,
     errors={400: ['unknown_recipe', 'unknown_purpose'], 503: ['overloaded']})
def recall_get(bank_id: str):
    """RCLL's recall as a GET: the query and its options as strict query parameters
    (docs/reference/http-conventions.md)."""
    repeated = sorted(k for k, v in request.args.to_dict(flat=False).items() if len(v) > 1)
    if repeated:
        raise APIError(400, "invalid_request", "each query parameter may be given once",
                       {"repeated": repeated})
    params: dict = {k: v for k, v in request.args.items()}
    if "tiers" in params:  # comma-separated in a query string
        params["tiers"] = params["tiers"].split(",")  # as strict as the JSON list: no trimming
    for key in ("max_tokens", "limit", "max_layer", "context_tokens_left"):
        if key in params:
            raw = params[key]
            if not (raw.isascii() and raw.lstrip("-").isdigit() and raw.count("-") <= 1):
                raise APIError(400, "invalid_request", f"{key} must be an integer",
                               {"field": key, "value": raw[:64]})
            params[key] = int(raw)
    for key in ("trace", "include_archive", "include_superseded", "follow_tunnels"):
        if key in params:
            raw = params[key].lower()
            if raw not in _BOOLEANS:
                raise APIError(400, "invalid_request", f"{key} must be true or false",
                               {"field": key, "value": params[key][:64],
                                "allowed": sorted(_BOOLEANS)})
            params[key] = _BOOLEANS[raw]
    if "query" not in params:
        raise APIError(400, "invalid_request", "query parameter 'query' is required")
    return _run(bank_id, params)
