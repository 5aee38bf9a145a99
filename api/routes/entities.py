"""Entities of a bank: list, detail, merge proposals, explicit merge and split (spec §3, §4)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from api import contracts as C
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_body, page_params, search_param
from api.schemas import check_bank_id
from rcll.access.visibility import unit_filter
from rcll.store import audit, banks, entities, entity_edits

bp = Blueprint("entities", __name__)
BASE = "/v1/default/banks/<bank_id>/entities"
PROPOSAL_STATES = ("open", "merged", "rejected")
MAX_IDS = 1000


def _visible(bank_id: str) -> tuple[str, dict]:
    """Only units the caller may see count for entities, their mentions and proposals
    (:mod:`rcll.access.visibility`; alias ``vu``)."""
    return unit_filter(principal(), bank_id, alias="vu")


@bp.get(BASE)
@requires("read")
@doc({200: C.EntitiesPage}, query=C.SearchQuery, paged=True)
def list_entities(bank_id: str):
    """One page of the bank's entities, most mentioned first: ``?q=&limit=&offset=``."""
    check_bank_id(bank_id)
    limit, offset = page_params()
    q = search_param()
    with services().pool.connection() as conn:
        banks.get(conn, bank_id)
        rows, total = entities.list_page(conn, bank_id, limit, offset, q,
                                         visible=_visible(bank_id))
    body = page_body("entities", [entities.public(r) for r in rows], limit, offset, total)
    # Hindsight's shape beside RCLL's: ``items`` with ``canonical_name``
    body["items"] = [{**e, "canonical_name": e["name"]} for e in body["entities"]]
    return jsonify(body)


@bp.get(BASE + "/<entity_id>")
@requires("read")
@doc({200: C.EntityDetail}, paged=True, errors={404: ['entity_not_found'], 400: ['invalid_entity_id']})
def entity(bank_id: str, entity_id: str):
    """An entity with its aliases, one page of mentions (``?limit=&offset=``, newest first),
    the entities co-mentioned with it and its history — mentions, counts and co-mentions
    only from units the caller sees (an entity only they mention is 404)."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=20)
    with services().pool.connection() as conn:
        vis = _visible(bank_id)
        row = entities.get(conn, bank_id, entity_id, visible=vis)
        eid = str(row["id"])
        body = entities.public(row)
        body["mentions"] = page_body("items", entities.mentions(conn, eid, limit, offset, vis),
                                     limit, offset, int(row["mentions"]))
        body["linked_entities"] = entities.linked(conn, eid, visible=vis)
        body["history"] = entity_edits.history(conn, eid)
    return jsonify(body)


@bp.get(BASE + "/merge-proposals")
@requires("read")
@doc({200: C.ProposalsPage}, query=C.ProposalQuery, paged=True)
def merge_proposals(bank_id: str):
    """One page of entity-merge proposals, newest first: ``?state=open|merged|rejected``."""
    check_bank_id(bank_id)
    limit, offset = page_params()
    state = request.args.get("state")
    if state is not None and state not in PROPOSAL_STATES:
        raise APIError(400, "invalid_request", f"state must be one of {', '.join(PROPOSAL_STATES)}",
                       {"field": "state"})
    with services().pool.connection() as conn:
        banks.get(conn, bank_id)
        rows, total = entities.proposals_page(conn, bank_id, state, limit, offset,
                                              visible=_visible(bank_id))
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
    body = json_body()
    _fields(body, {"actor", "proposal_id", "keep_id", "decision"} if "proposal_id" in body
            else {"actor", "entity_ids"})
    actor = _string(body, "actor", required=False)
    with services().pool.connection() as conn, conn.transaction():
        banks.get(conn, bank_id)
        if "proposal_id" in body:
            pid = _string(body, "proposal_id")
            decision = body.get("decision", "merge")
            if decision not in ("merge", "reject"):
                raise APIError(400, "invalid_request", "decision must be merge or reject",
                               {"field": "decision"})
            if decision == "reject":
                if "keep_id" in body:
                    raise APIError(400, "invalid_request", "keep_id applies to a merge only",
                                   {"fields": ["keep_id"]})
                entity_edits.reject_proposal(conn, bank_id, pid, actor)
                audit.record(conn, principal().member_id, "entity.proposal_reject", bank_id,
                             None, {"proposal_id": pid, "actor": actor})
                return jsonify({"proposal_id": pid, "state": "rejected"})
            kept = entity_edits.merge_proposal(conn, bank_id, pid, actor,
                                               _string(body, "keep_id", required=False))
            merged = {"proposal_id": pid}
        else:
            ids = _ids(body, "entity_ids")
            kept = entity_edits.merge(conn, bank_id, ids, actor)
            merged = {"entity_ids": ids}
        audit.record(conn, principal().member_id, "entity.merge", bank_id, None,
                     {**merged, "kept": str(kept["id"]), "actor": actor})
    return jsonify({"entity": entities.public(kept)})


@bp.post(BASE + "/<entity_id>/split")
@requires("admin")
@doc({201: C.EntityAnswer}, body=C.SplitBody,
    errors={404: ['entity_not_found'], 400: ['invalid_entity_id', 'nothing_to_split'],
    409: ['split_takes_everything', 'entity_name_taken']})
def split(bank_id: str, entity_id: str):
    """Split a new entity off: ``{"aliases": [...]}`` or ``{"unit_ids": [...]}``, optional
    ``"name"`` and ``"actor"``. Answers the new entity (201)."""
    check_bank_id(bank_id)
    body = json_body()
    _fields(body, {"aliases", "unit_ids", "name", "actor"})
    with services().pool.connection() as conn, conn.transaction():
        banks.get(conn, bank_id)
        new = entity_edits.split(
            conn, bank_id, entity_id,
            aliases=_ids(body, "aliases") if "aliases" in body else None,
            unit_ids=_ids(body, "unit_ids") if "unit_ids" in body else None,
            name=_string(body, "name", required=False), actor=_string(body, "actor", required=False))
        audit.record(conn, principal().member_id, "entity.split", bank_id, None,
                     {"entity_id": entity_id, "new_id": str(new["id"]),
                      "aliases": body.get("aliases"), "unit_ids": body.get("unit_ids")})
    return jsonify({"entity": entities.public(new)}), 201


def _fields(body: dict, allowed: set[str]) -> None:
    """400 ``invalid_request`` naming fields the request does not take (a typo, or a field
    of the other form: ``proposal_id`` with ``entity_ids``, ``decision`` without a proposal)."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise APIError(400, "invalid_request",
                       f"unknown or contradictory fields: {', '.join(unknown)}",
                       {"fields": unknown, "allowed": sorted(allowed)})


def _string(body: dict, field: str, required: bool = True) -> str | None:
    value = body.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 500:
        raise APIError(400, "invalid_request", f"{field} must be a string of 1-500 characters",
                       {"field": field})
    return value


def _ids(body: dict, field: str) -> list[str]:
    value = body.get(field)
    if (not isinstance(value, list) or not 1 <= len(value) <= MAX_IDS
            or not all(isinstance(v, str) and 1 <= len(v) <= 500 for v in value)):
        raise APIError(400, "invalid_request",
                       f"{field} must be a list of 1-{MAX_IDS} non-empty strings", {"field": field})
    return value
