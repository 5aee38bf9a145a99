"""One memory unit on Hindsight's paths: ``GET …/memories/{unit_id}`` (with its links,
entities and sources), its history and ``PATCH`` — the lifecycle service's ``read``,
``history`` and ``correct``, the same as ``…/units/{unit_id}``, so both answer the same for
every caller. ``metadata`` holds strings here and RCLL's structured provenance is in
``provenance`` (:func:`api.hindsight.with_hindsight_metadata`); the unit's ``revision`` is
its ``ETag``."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, jsonify, request
from pydantic import ConfigDict, Field

from api import contracts as C
from api import hindsight as hs
from api.auth import principal, requires
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.lifecycle.models import UnitFields

bp = Blueprint("memories", __name__)
UNIT = "/v1/default/banks/<bank_id>/memories/<unit_id>"

# Hindsight's UpdateMemoryRequest fields RCLL's correct lacks: what RCLL does with each
# (the rest — text, context, occurred_start/end, mentioned_at, and RCLL's own unit fields
# — goes to correct's strict model, so a typo stays a 400)
UPDATE_FIELDS = {
    "fact_type": "honoured when it names an RCLL kind (fact, note, decision, preference, "
                 "event, summary); a Hindsight type (world, experience, opinion) is "
                 "ignored: RCLL's kinds are finer; observation refused (derived)",
    "entities": "ignored: RCLL finds a unit's entities in its text again when it changes",
    "resolve_entities": "ignored: entity resolution always runs",
    "state": "'valid' ignored (a unit that can be edited is valid); 'invalidated' refused: "
             "forget (DELETE …/units/{id}) or supersede (POST …/units/{id}/supersede)",
    "reason": "ignored: correct records the fields changed, not a reason",
    "revision": "RCLL: the revision the caller read (as If-Match); omitted: the current one",
}
_ETAG = re.compile(r'\s*(?:W/)?"?([0-9]{1,9})"?\s*')


class UpdateMemoryBody(UnitFields):
    """Hindsight's ``UpdateMemoryRequest`` and RCLL's unit fields (:data:`UPDATE_FIELDS`)."""

    model_config = ConfigDict(extra="forbid")
    fact_type: str | None = None
    entities: list[str] | None = None
    resolve_entities: bool | None = None
    state: str | None = None
    reason: str | None = Field(None, max_length=1000)
    revision: int | None = Field(None, ge=1)


def _if_match() -> int | None:
    """The revision of ``If-Match`` (``"3"``, ``W/"3"`` or ``3``; ``*`` or none: None).
    400 ``invalid_request`` for another value."""
    raw = request.headers.get("If-Match")
    if raw is None or raw.strip() == "*":
        return None
    m = _ETAG.fullmatch(raw)
    if m is None or int(m.group(1)) < 1:
        raise APIError(400, "invalid_request", 'If-Match must name a unit revision ("3")',
                       {"field": "If-Match"})
    return int(m.group(1))


def _with_etag(body: dict[str, Any], status: int = 200):
    resp = jsonify(body)
    resp.status_code = status
    if isinstance(body.get("revision"), int):
        resp.headers["ETag"] = f'"{body["revision"]}"'
    return resp


@bp.get(UNIT)
@requires("read")
@doc({200: T.Unit}, query=C.PurposeQuery,
     errors={400: ['invalid_unit_id', 'unknown_purpose'], 404: ['unit_not_found']})
def memory(bank_id: str, unit_id: str):
    """The unit (:func:`rcll.lifecycle.read.read` as the caller: audience and purposes
    apply, links and sources only to units it sees; ``?purpose=`` reads for one purpose);
    400 ``invalid_unit_id`` / ``unknown_purpose``, 403 ``purpose_not_granted``, 404
    ``bank_not_found`` / ``unit_not_found`` (also a unit the caller may not see). On this
    Hindsight path ``metadata`` holds strings and RCLL's structured provenance (an uploaded
    file's) is in ``provenance`` (:func:`api.hindsight.with_hindsight_metadata`); ``ETag``
    is its revision (``If-Match`` of a ``PATCH``)."""
    check_bank_id(bank_id)
    unit = services().lifecycle.read(principal(), bank_id, unit_id,
                                     purpose=request.args.get("purpose"))
    return _with_etag(hs.with_hindsight_metadata(unit))  # Hindsight's path: metadata as strings


@bp.get(UNIT + "/history")
@requires("read")
@doc({200: C.Open}, errors={400: ['invalid_unit_id'], 404: ['unit_not_found']},
     tags=["hindsight"])
def memory_history(bank_id: str, unit_id: str):
    """The unit's history (:func:`rcll.lifecycle.read.history`): ``{memory_id, revision,
    state (valid, superseded, invalidated, forgotten), invalidated_reason, superseded_by,
    supersedes, revisions (earlier ones, newest first: revision, text, fields, changed_by,
    changed_at), feedback}``; units beside it only when the caller sees them. 404
    ``unit_not_found`` also for a unit the caller may not see."""
    check_bank_id(bank_id)
    h = services().lifecycle.history(principal(), bank_id, unit_id)
    return _with_etag({"memory_id": unit_id, "bank_id": bank_id, **h})


@bp.patch(UNIT)
@requires("write")
@doc({200: T.Unit}, body=UpdateMemoryBody,
     errors={400: ['invalid_unit_id', 'unknown_purpose', 'invalid_purposes', 'invalid_audience',
                   'unknown_member', 'unsupported_hindsight_value'],
             403: ['audience_not_allowed', 'narrowing_not_allowed'], 413: ['unit_too_long'],
             404: ['unit_not_found'], 409: ['revision_conflict', 'unit_forgotten']},
     tags=["hindsight"])
def update_memory(bank_id: str, unit_id: str):
    """Curate one memory: Hindsight's ``UpdateMemoryRequest`` (text, context, times; the
    other fields as :data:`UPDATE_FIELDS` says) and RCLL's unit fields, applied by
    ``correct`` — revision-checked: ``If-Match: "<revision>"`` (or ``revision`` in the
    body) must be the unit's revision, else 409 ``revision_conflict`` with the current one;
    without either, the revision it has. → the unit (``ignored_fields`` named back; the
    new revision in ``ETag``). 404 ``unit_not_found`` also for a unit the caller may not
    see."""
    check_bank_id(bank_id)
    raw = {k: v for k, v in json_body(check_text_fields=False).items() if v is not None}
    body = UpdateMemoryBody.model_validate(raw)
    header, given = _if_match(), body.revision
    if header is not None and given is not None and header != given:
        raise APIError(400, "invalid_request", "If-Match and revision name different revisions",
                       {"if_match": header, "revision": given})
    changes, ignored = _changes(body)
    unit = services().lifecycle.correct(principal(), bank_id, unit_id,
                                        header if header is not None else given, changes)
    return _with_etag({**hs.with_hindsight_metadata(unit), "success": True,
                       "ignored_fields": ignored})


def _changes(body: UpdateMemoryBody) -> tuple[UnitFields, list[str]]:
    """``correct``'s changes from a PATCH body (:data:`UPDATE_FIELDS`), and the ignored
    field names. 400 ``unsupported_hindsight_value``."""
    given = body.model_fields_set - {"revision"}
    ignored = sorted(given & {"entities", "resolve_entities", "reason"})
    fields = {k: getattr(body, k) for k in given if k in UnitFields.model_fields}
    if body.state is not None:
        if body.state == "invalidated":
            raise hs.unsupported("state", body.state, "RCLL does not invalidate by hand: "
                                 "forget (DELETE …/units/{id}) or supersede the unit")
        if body.state != "valid":
            raise APIError(400, "invalid_request", "state must be valid or invalidated",
                           {"field": "state"})
        ignored.append("state")
    if body.fact_type is not None:
        t = body.fact_type
        if t == "observation":
            raise hs.unsupported("fact_type", t, "observations are derived; name an RCLL kind")
        if t in hs.TYPE_KINDS:
            ignored.append("fact_type")
        else:
            fields["kind"] = t  # an RCLL kind, checked by UnitFields
    return UnitFields.model_validate(fields), sorted(ignored)
