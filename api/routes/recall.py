"""Recall: synchronous, read-only, never calls a language model (spec §1.1)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api.deps import json_body, services
from api.errors import APIError
from api.schemas import check_bank_id
from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import RECIPES

bp = Blueprint("recall", __name__)


def _run(bank_id: str, params: dict):
    check_bank_id(bank_id)
    for key in ("recipe", "channels"):
        name = params.get(key)
        if isinstance(name, str) and name not in RECIPES:
            raise APIError(400, "unknown_recipe", f"unknown recipe {name!r}",
                           {"field": key, "recipe": name[:64], "known": sorted(RECIPES)})
    q = RecallQuery.model_validate(params)
    return jsonify(recall(services().recall_context(), bank_id, q).to_json())


@bp.post("/v1/default/banks/<bank_id>/memories/recall")
def recall_post(bank_id: str):
    return _run(bank_id, json_body(check_text_fields=False))  # RecallQuery checks text


@bp.get("/banks/<bank_id>/recall")
def recall_get(bank_id: str):
    params: dict = {k: v for k, v in request.args.items()}
    for key in ("max_tokens", "limit", "max_layer"):
        if key in params:
            try:
                params[key] = int(params[key])
            except ValueError:
                raise APIError(400, "invalid_request", f"{key} must be an integer",
                               {"field": key, "value": params[key]})
    for key in ("trace", "include_archive", "include_superseded"):
        if key in params:
            params[key] = params[key].lower() in ("1", "true", "yes")
    if "query" not in params:
        raise APIError(400, "invalid_request", "query parameter 'query' is required")
    return _run(bank_id, params)
