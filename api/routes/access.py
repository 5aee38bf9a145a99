"""Members, API keys, bank grants, who-am-I and the audit log (spec §7; issue 9 items 1, 7).

Members and keys: a deployment admin (the bootstrap key or a member with ``is_admin``); a
member may list and revoke its own keys. Grants and the audit log of a bank: an admin of
that bank. The rules live in :class:`rcll.access.service.AccessService`; these views parse
and answer.
"""

from __future__ import annotations

import uuid

from flask import Blueprint, jsonify, request

from api import contracts as C
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_body, page_params
from api.schemas import check_bank_id

bp = Blueprint("access", __name__)


def _access():
    return services().access


def _fields(body: dict, allowed: set[str], required: set[str] = frozenset()) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        raise APIError(400, "invalid_request", f"unknown field(s) {', '.join(extra)}",
                       {"unknown": extra, "allowed": sorted(allowed)})
    missing = sorted(required - set(body))
    if missing:
        raise APIError(400, "invalid_request", f"missing field(s) {', '.join(missing)}",
                       {"missing": missing})


# --- members ------------------------------------------------------------------------------
@bp.post("/members")
@requires("admin")
@doc({201: C.Member}, body=C.MemberCreate,
    errors={409: ['member_exists'], 400: ['unknown_purpose', 'invalid_member_id', 'reserved_member_id']})
def create_member():
    """``{member_id, name?, kind? (agent|person), is_admin?, default_purposes?}`` → 201 member."""
    body = json_body()
    _fields(body, {"member_id", "name", "kind", "is_admin", "default_purposes"}, {"member_id"})
    if "is_admin" in body and not isinstance(body["is_admin"], bool):
        raise APIError(400, "invalid_request", "is_admin must be true or false",
                       {"field": "is_admin"})
    member = _access().create_member(principal(), body["member_id"], body.get("name"),
                                     body.get("kind", "agent"), body.get("is_admin", False),
                                     body.get("default_purposes"))
    return jsonify(member), 201


@bp.get("/members")
@requires("admin")
@doc({200: C.MembersPage}, paged=True)
def list_members():
    """One page of members, oldest first: ``?limit=&offset=``."""
    limit, offset = page_params()
    rows, total = _access().list_members(principal(), limit, offset)
    return jsonify(page_body("members", rows, limit, offset, total))


@bp.get("/members/<member_id>")
@requires("member")
@doc({200: C.Member}, errors={404: ['member_not_found']})
def get_member(member_id: str):
    """The member and its grants (the member itself or a deployment admin)."""
    return jsonify(_access().get_member(principal(), member_id))


@bp.patch("/members/<member_id>")
@requires("admin")
@doc({200: C.Member}, body=C.MemberUpdate, errors={404: ['member_not_found'], 400: ['unknown_purpose']})
def update_member(member_id: str):
    """``{name?, kind?, is_admin?, default_purposes?, disabled?}`` → the member."""
    return jsonify(_access().update_member(principal(), member_id, json_body()))


@bp.delete("/members/<member_id>")
@requires("admin")
@doc({200: C.Member}, errors={404: ['member_not_found']})
def disable_member(member_id: str):
    """Disable (not delete): its keys stop working at once; keys, grants and units stay."""
    return jsonify(_access().disable_member(principal(), member_id))


# --- keys ---------------------------------------------------------------------------------
@bp.post("/members/<member_id>/keys")
@requires("admin")
@doc({201: C.IssuedKey}, body=C.KeyCreate, body_required=False,
    errors={404: ['member_not_found'], 409: ['member_disabled']})
def issue_key(member_id: str):
    """``{label?}`` → 201 with ``key``: the only time the key is shown."""
    body = json_body() if request.get_data() else {}
    _fields(body, {"label"})
    return jsonify(_access().issue_key(principal(), member_id, body.get("label"))), 201


@bp.get("/members/<member_id>/keys")
@requires("member")
@doc({200: C.KeysAnswer}, errors={404: ['member_not_found']})
def list_keys(member_id: str):
    """The member's keys (prefix, label, times; never the key or its hash)."""
    return jsonify({"keys": _access().list_keys(principal(), member_id)})


@bp.delete("/keys/<key_id>")
@requires("member")
@doc({200: C.Open}, errors={404: ['key_not_found']})
def revoke_key(key_id: str):
    """Revoke a key (deployment admin, or the key's own member); idempotent."""
    return jsonify(_access().revoke_key(principal(), key_id))


# --- grants -------------------------------------------------------------------------------
@bp.put("/banks/<bank_id>/grants/<member_id>")
@requires("admin")
@doc({200: C.Grant}, body=C.GrantSet, errors={400: ['unknown_purpose', 'invalid_role']})
def set_grant(bank_id: str, member_id: str):
    """``{role: read|write|admin, purposes?}`` → the grant (created or replaced)."""
    check_bank_id(bank_id)
    body = json_body()
    _fields(body, {"role", "purposes"}, {"role"})
    return jsonify(_access().set_grant(principal(), bank_id, member_id, body["role"],
                                       body.get("purposes")))


@bp.get("/banks/<bank_id>/grants")
@requires("admin")
@doc({200: C.GrantsAnswer})
def list_grants(bank_id: str):
    """The bank's grants (member, role, purposes)."""
    check_bank_id(bank_id)
    return jsonify({"bank_id": bank_id, "grants": _access().list_grants(principal(), bank_id)})


@bp.delete("/banks/<bank_id>/grants/<member_id>")
@requires("admin")
@doc({200: C.Open}, errors={404: ['member_not_found', 'grant_not_found']})
def revoke_grant(bank_id: str, member_id: str):
    """Revoke the member's grant on the bank; 404 ``grant_not_found``."""
    check_bank_id(bank_id)
    return jsonify(_access().revoke_grant(principal(), bank_id, member_id))


# --- who am I, audit ----------------------------------------------------------------------
@bp.get("/me")
@requires("member")
@doc({200: C.Open})
def me():
    """The caller: member id, deployment admin or not, grants (bank, role, purposes)."""
    return jsonify(_access().whoami(principal()))


@bp.get("/banks/<bank_id>/audit")
@requires("admin")
@doc({200: C.AuditPage}, query=C.AuditQuery, paged=True, errors={400: ['invalid_unit_id']})
def bank_audit(bank_id: str):
    """The bank's audit entries, newest first: ``?action=&actor=&unit_id=&limit=&offset=``."""
    check_bank_id(bank_id)
    filters = {k: request.args.get(k) for k in ("action", "actor", "unit_id")}
    if filters["unit_id"] is not None:
        try:
            filters["unit_id"] = str(uuid.UUID(filters["unit_id"]))
        except ValueError:
            raise APIError(400, "invalid_unit_id", "unit_id must be a UUID",
                           {"field": "unit_id"})
    limit, offset = page_params()
    rows, total = _access().audit(principal(), bank_id, limit=limit, offset=offset, **filters)
    return jsonify(page_body("entries", [audit_json(r) for r in rows], limit, offset, total))


def audit_json(row: dict) -> dict:
    """An audit row as JSON (ISO time)."""
    return {**row, "at": row["at"].isoformat()}
