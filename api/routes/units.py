"""The lifecycle verbs over HTTP (spec §7, §8; docs/concepts/lifecycle.md "Lifecycle verbs"): each
route parses its body with a pydantic model (unknown fields: 400 ``invalid_request`` with the field
errors), takes the caller from :func:`api.auth.principal` and calls
:class:`rcll.lifecycle.service.Lifecycle` — the same service MCP and the CLI use. Every
route is also served under ``/v1/default``."""

from __future__ import annotations

from flask import Blueprint, jsonify, request
from pydantic import ConfigDict, Field

from api import contracts as C
from api.auth import principal, requires
from api.deps import json_body, services
from api.openapi import doc
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.lifecycle.forget import MAX_REASON_CHARS
from rcll.lifecycle.models import NewUnit, UnitFields
from rcll.validation import TextModel

bp = Blueprint("units", __name__)
PREFIXES = ("", "/v1/default")


class DeriveBody(NewUnit):
    """``POST …/units/derive``: the new unit's fields plus ``source_ids`` (1–100)."""

    source_ids: list[str] = Field(min_length=1, max_length=100)


class CorrectBody(UnitFields):
    """``PATCH …/units/{id}``: ``revision`` (the one the caller read) plus the changes."""

    revision: int = Field(ge=1)


class SupersedeBody(NewUnit):
    """``POST …/units/{id}/supersede``: ``revision`` plus the new unit's fields."""

    revision: int = Field(ge=1)


class ForgetBody(TextModel):
    """``DELETE …/units/{id}``: optional ``reason`` (kept in the audit log)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    reason: str | None = Field(None, max_length=MAX_REASON_CHARS)


def _lc():
    return services().lifecycle


def _route(rule: str, **kw):
    """Register a view under every prefix of :data:`PREFIXES`."""
    def deco(view):
        for p in PREFIXES:
            bp.add_url_rule(p + rule, endpoint=(p.strip("/").replace("/", "_") + "_"
                                                + view.__name__), view_func=view, **kw)
        return view
    return deco


@_route("/banks/<bank_id>/units/<unit_id>", methods=["GET"])
@requires("read")
@doc({200: T.Unit}, query=C.PurposeQuery,
    errors={400: ['invalid_unit_id', 'unknown_purpose'], 404: ['unit_not_found']})
def read_unit(bank_id: str, unit_id: str):
    """One unit with links, entities and sources → 200; ``?purpose=`` reads for a purpose.
    404 ``unit_not_found`` also for a unit the caller may not see."""
    check_bank_id(bank_id)
    purpose = request.args.get("purpose")
    return jsonify(_lc().read(principal(), bank_id, unit_id, purpose=purpose))


@_route("/banks/<bank_id>/units", methods=["POST"])
@requires("write")
@doc({201: T.Unit}, body=NewUnit,
    errors={400: ['invalid_unit_id', 'unknown_purpose', 'invalid_purposes', 'invalid_audience',
    'unknown_member'], 403: ['audience_not_allowed'], 413: ['unit_too_long']})
def remember_unit(bank_id: str):
    """Remember one unit synchronously → 201 with the unit."""
    check_bank_id(bank_id)
    body = NewUnit.model_validate(json_body(check_text_fields=False))
    return jsonify(_lc().remember(principal(), bank_id, body)), 201


@_route("/banks/<bank_id>/units/derive", methods=["POST"])
@requires("write")
@doc({201: T.Unit}, body=DeriveBody,
    errors={400: ['invalid_unit_id', 'unknown_purpose', 'invalid_purposes', 'invalid_audience',
    'unknown_member'], 403: ['audience_not_allowed'], 413: ['unit_too_long'], 404: ['unit_not_found'],
    409: ['empty_intersection']})
def derive_unit(bank_id: str):
    """Derive a unit from ``source_ids`` → 201; 409 ``empty_intersection``."""
    check_bank_id(bank_id)
    body = DeriveBody.model_validate(json_body(check_text_fields=False))
    unit = NewUnit.model_validate(body.model_dump(exclude={"source_ids"}, exclude_unset=True))
    return jsonify(_lc().derive(principal(), bank_id, body.source_ids, unit)), 201


@_route("/banks/<bank_id>/units/<unit_id>", methods=["PATCH"])
@requires("write")
@doc({200: T.Unit}, body=CorrectBody,
    errors={400: ['invalid_unit_id', 'unknown_purpose', 'invalid_purposes', 'invalid_audience',
    'unknown_member'], 403: ['audience_not_allowed', 'narrowing_not_allowed'], 413: ['unit_too_long'], 404: ['unit_not_found'],
    409: ['revision_conflict', 'unit_forgotten']})
def correct_unit(bank_id: str, unit_id: str):
    """Correct text or fields at ``revision`` → 200; 409 ``revision_conflict``."""
    check_bank_id(bank_id)
    body = CorrectBody.model_validate(json_body(check_text_fields=False))
    changes = UnitFields.model_validate(body.model_dump(exclude={"revision"},
                                                        exclude_unset=True))
    return jsonify(_lc().correct(principal(), bank_id, unit_id, body.revision, changes))


@_route("/banks/<bank_id>/units/<unit_id>/supersede", methods=["POST"])
@requires("write")
@doc({201: T.SupersedeAnswer}, body=SupersedeBody,
    errors={400: ['invalid_unit_id', 'unknown_purpose', 'invalid_purposes', 'invalid_audience',
    'unknown_member'], 403: ['audience_not_allowed', 'narrowing_not_allowed'], 413: ['unit_too_long'], 404: ['unit_not_found'],
    409: ['revision_conflict', 'already_superseded', 'unit_forgotten']})
def supersede_unit(bank_id: str, unit_id: str):
    """Replace the unit with a new one → 201 ``{superseded, unit}``; 409
    ``revision_conflict`` / ``already_superseded``."""
    check_bank_id(bank_id)
    body = SupersedeBody.model_validate(json_body(check_text_fields=False))
    unit = NewUnit.model_validate(body.model_dump(exclude={"revision"}, exclude_unset=True))
    return jsonify(_lc().supersede(principal(), bank_id, unit_id, body.revision, unit)), 201


@_route("/banks/<bank_id>/units/<unit_id>", methods=["DELETE"])
@requires("write")
@doc({200: T.ForgetAnswer}, body=ForgetBody, body_required=False,
    errors={400: ['invalid_unit_id'], 404: ['unit_not_found']})
def forget_unit(bank_id: str, unit_id: str):
    """Forget the unit → 200 ``{unit_id, forgotten_at}`` (the same again on a repeat)."""
    check_bank_id(bank_id)
    raw = request.get_data(cache=True)
    body = ForgetBody.model_validate(json_body(check_text_fields=False) if raw.strip() else {})
    return jsonify(_lc().forget(principal(), bank_id, unit_id, body.reason))
