"""Entities of a bank: list, detail, merge proposals, explicit merge and split (spec §3, §4).
The rules (roles, visibility, the checks of the edit bodies, audit) live in
:class:`rcll.entities.service.EntityService`; these views parse and answer."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import hindsight as hs

from api import contracts as C
from api.auth import principal, requires
from api.deps import json_body, services
from api.openapi import doc
from api.errors import APIError
from api.paging import limit_param, page_body, page_params, search_param
from rcll.search.models import TAGS_MATCH
from api.schemas import check_bank_id

bp = Blueprint("entities", __name__)
BASE = "/v1/default/banks/<bank_id>/entities"


def _entities():
    return services().entities


@bp.get(BASE)
@requires("read")
@doc({200: C.EntitiesPage}, query=C.SearchQuery, paged=True)
def list_entities(bank_id: str):
    """One page of the bank's entities, most mentioned first: ``?q=&limit=&offset=``."""
    check_bank_id(bank_id)
    limit, offset = page_params()
    q = search_param()
    rows, total = _entities().list(principal(), bank_id, limit, offset, q)
    body = page_body("entities", rows, limit, offset, total)
    # Hindsight's shape beside RCLL's: ``items`` with ``canonical_name``
    body["items"] = [{**e, "canonical_name": e["name"]} for e in body["entities"]]
    return jsonify(body)


@bp.get(BASE + "/graph")
@requires("read")
@doc({200: hs.EntityGraphResponse}, query=C.EntityGraphQuery,
     errors={400: ['unsupported_hindsight_value', 'invalid_paging', 'invalid_request']})
def entity_graph(bank_id: str):
    """Hindsight's entity co-occurrence graph over the units the caller sees: the
    ``?limit=`` (default 1000) most frequent pairs mentioned together by at least
    ``min_count`` units (default 1), counted only over units ``tags`` match when given;
    ``tag_groups`` is refused (as in recall)."""
    check_bank_id(bank_id)
    limit = limit_param(1000)
    raw = request.args.get("min_count") or "1"
    if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
        raise APIError(400, "invalid_request", "min_count must be an integer from 1",
                       {"field": "min_count"})
    if request.args.get("tag_groups") not in (None, "", "[]"):
        raise hs.unsupported("tag_groups", request.args["tag_groups"],
                             "boolean tag groups are not supported; use tags and tags_match")
    tags = request.args.getlist("tags") or None
    match = request.args.get("tags_match") or "any"
    if match not in TAGS_MATCH:
        raise APIError(400, "invalid_request", f"tags_match must be one of {', '.join(TAGS_MATCH)}",
                       {"field": "tags_match"})
    out = _entities().graph(principal(), bank_id, limit, int(raw), tags, match)
    nodes = [{"data": {"id": n["id"], "label": n["name"], "mentionCount": n["mentions"]}}
             for n in out["nodes"]]
    edges = [{"data": {"id": f"{e['source']}-{e['target']}", "source": e["source"],
                       "target": e["target"], "linkType": "cooccurrence", "weight": e["count"],
                       "lastCooccurred": e["last"].isoformat() if e["last"] else None}}
             for e in out["edges"]]
    return jsonify({"nodes": nodes, "edges": edges, "total_entities": out["total_entities"],
                    "total_edges": out["total_edges"], "limit": limit})


@bp.get(BASE + "/<entity_id>")
@requires("read")
@doc({200: C.EntityDetail}, paged=True, errors={404: ['entity_not_found'], 400: ['invalid_entity_id']})
def entity(bank_id: str, entity_id: str):
    """An entity with its aliases, one page of mentions (``?limit=&offset=``, newest first),
    the entities co-mentioned with it and its history — mentions, counts and co-mentions
    only from units the caller sees (an entity only they mention is 404)."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=20)
    out = _entities().get(principal(), bank_id, entity_id, limit, offset)
    body = out["entity"]
    body["mentions"] = page_body("items", out["mentions"], limit, offset, out["mentions_total"])
    body["linked_entities"] = out["linked_entities"]
    body["history"] = out["history"]
    return jsonify(body)


@bp.get(BASE + "/merge-proposals")
@requires("read")
@doc({200: C.ProposalsPage}, query=C.ProposalQuery, paged=True)
def merge_proposals(bank_id: str):
    """One page of entity-merge proposals, newest first: ``?state=open|merged|rejected``."""
    check_bank_id(bank_id)
    limit, offset = page_params()
    rows, total = _entities().proposals(principal(), bank_id, request.args.get("state"),
                                        limit, offset)
    return jsonify(page_body("proposals", rows, limit, offset, total))


@bp.post(BASE + "/merge")
@requires("admin")
@doc({200: C.MergeAnswer}, body=C.MergeBody,
    errors={404: ['entity_not_found', 'proposal_not_found'], 409: ['entity_already_merged',
    'entity_name_taken', 'proposal_closed'], 400: ['invalid_entity_id', 'invalid_proposal_id']})
def merge(bank_id: str):
    """Merge explicitly: ``{"entity_ids": [keep, other, ...]}`` or ``{"proposal_id", "keep_id"?}``,
    optional ``"actor"``; ``{"proposal_id", "decision": "reject"}`` closes a proposal."""
    check_bank_id(bank_id)
    return jsonify(_entities().merge(principal(), bank_id, json_body()))


@bp.post(BASE + "/<entity_id>/split")
@requires("admin")
@doc({201: C.EntityAnswer}, body=C.SplitBody,
    errors={404: ['entity_not_found'], 400: ['invalid_entity_id', 'nothing_to_split'],
    409: ['split_takes_everything', 'entity_name_taken']})
def split(bank_id: str, entity_id: str):
    """Split a new entity off: ``{"aliases": [...]}`` or ``{"unit_ids": [...]}``, optional
    ``"name"`` and ``"actor"``. Answers the new entity (201)."""
    check_bank_id(bank_id)
    return jsonify(_entities().split(principal(), bank_id, entity_id, json_body())), 201
