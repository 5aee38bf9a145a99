"""Hindsight's directives routes: a bank's hard rules for reflect — list, create, read,
change, delete (:class:`rcll.directives.service.DirectiveService`: ``read`` on the bank to
list and read, ``admin`` to write, like the bank's configuration). Shapes are Hindsight's
``DirectiveResponse`` and ``DirectiveListResponse``; RCLL adds ``created_by``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from flask import Blueprint, jsonify, request
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import page_params
from api.schemas import check_bank_id
from rcll.directives.models import DirectiveCreate, DirectiveUpdate

bp = Blueprint("directives", __name__)
DIRECTIVES = "/v1/default/banks/<bank_id>/directives"
BOOLEANS = {"true": True, "false": False}


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class DirectiveResponse(_Open):
    id: str
    bank_id: str
    name: str
    content: str
    priority: int
    is_active: bool
    tags: list[str]
    created_at: str | None
    updated_at: str | None
    created_by: str | None = Field(None, description="RCLL: the member who made it")


class DirectiveListResponse(_Open):
    items: list[DirectiveResponse]
    total: int
    limit: int
    offset: int


class DeletedResponse(_Open):
    status: Literal["deleted"]


class DirectivesQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tags: list[str] | None = Field(None, description="the global directives and the tagged "
                                   "ones in scope of these tags (none: every directive)")
    tags_match: Literal["any", "all", "any_strict", "all_strict", "exact"] | None = None
    active_only: bool | None = Field(None, description="only active ones (default true)")


def _iso(v: datetime | None) -> str | None:
    return v.isoformat() if v is not None else None


def shape(row: dict) -> dict:
    """A directive row in Hindsight's ``DirectiveResponse`` shape."""
    return {"id": row["id"], "bank_id": row["bank_id"], "name": row["name"],
            "content": row["content"], "priority": row["priority"],
            "is_active": row["is_active"], "tags": list(row["tags"]),
            "created_at": _iso(row["created_at"]), "updated_at": _iso(row["updated_at"]),
            "created_by": row["created_by"]}


def _active_only() -> bool:
    raw = request.args.get("active_only")
    if raw is None:
        return True
    if raw.lower() not in BOOLEANS:
        raise APIError(400, "invalid_request", "active_only must be true or false",
                       {"field": "active_only"})
    return BOOLEANS[raw.lower()]


@bp.get(DIRECTIVES)
@requires("read")
@doc({200: DirectiveListResponse}, query=DirectivesQuery, paged=True, tags=["hindsight"])
def list_directives(bank_id: str):
    """The bank's directives, highest priority first (then oldest): ``?tags=`` (repeated)
    keeps the global ones and the tagged ones in scope of those tags by ``tags_match``
    (``any`` default, ``all``, ``any_strict``, ``all_strict``, ``exact``; omitted: every
    directive), ``active_only`` (default true), ``limit`` (1-1000, default 100),
    ``offset``."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    rows, total = services().directives.list(
        principal(), bank_id, tags=[t for t in request.args.getlist("tags") if t] or None,
        tags_match=request.args.get("tags_match") or "any", active_only=_active_only(),
        limit=limit, offset=offset)
    return jsonify({"items": [shape(r) for r in rows], "total": total, "limit": limit,
                    "offset": offset})


@bp.post(DIRECTIVES)
@requires("admin")
@doc({200: DirectiveResponse}, body=DirectiveCreate, tags=["hindsight"])
def create_directive(bank_id: str):
    """Add a directive (Hindsight's ``CreateDirectiveRequest``; the bank is made when
    missing) → 200 the directive. Audit ``directive.create``."""
    check_bank_id(bank_id)
    fields = DirectiveCreate.model_validate(json_body())
    return jsonify(shape(services().directives.create(principal(), bank_id, fields)))


@bp.get(DIRECTIVES + "/<directive_id>")
@requires("read")
@doc({200: DirectiveResponse}, errors={404: ["directive_not_found"]}, tags=["hindsight"])
def get_directive(bank_id: str, directive_id: str):
    """One directive; 404 ``directive_not_found``."""
    check_bank_id(bank_id)
    return jsonify(shape(services().directives.get(principal(), bank_id, directive_id)))


@bp.patch(DIRECTIVES + "/<directive_id>")
@requires("admin")
@doc({200: DirectiveResponse}, body=DirectiveUpdate, errors={404: ["directive_not_found"]},
     tags=["hindsight"])
def update_directive(bank_id: str, directive_id: str):
    """Change the fields given (Hindsight's ``UpdateDirectiveRequest``; ``null`` leaves a
    field as it is, ``tags: []`` makes the directive global) → the directive. Audit
    ``directive.update``; 404 ``directive_not_found``."""
    check_bank_id(bank_id)
    fields = DirectiveUpdate.model_validate(json_body())
    return jsonify(shape(services().directives.update(principal(), bank_id, directive_id,
                                                      fields)))


@bp.delete(DIRECTIVES + "/<directive_id>")
@requires("admin")
@doc({200: DeletedResponse}, errors={404: ["directive_not_found"]}, tags=["hindsight"])
def delete_directive(bank_id: str, directive_id: str):
    """Delete a directive → ``{"status": "deleted"}`` (as Hindsight). Audit
    ``directive.delete``; 404 ``directive_not_found``."""
    check_bank_id(bank_id)
    services().directives.delete(principal(), bank_id, directive_id)
    return jsonify({"status": "deleted"})
