"""Bank export, import and clone (docs/guides/export-import.md): RCLL's own routes and
Hindsight's transfer routes, all calling :class:`rcll.transfer.service.TransferService`.
Every route needs ``admin`` on its bank.

RCLL:

- ``GET /banks/{bank_id}/export?vectors=&grants=&gzip=`` — the bank as an ``rcll-bank``
  JSON Lines stream (``application/x-ndjson``; ``gzip=true``: ``application/gzip``),
  streamed as it is read from one snapshot;
- ``POST /banks/{bank_id}/import?ids=&grants=`` — the body is an export (plain or gzip,
  raw or the multipart field ``file``), written in one transaction into the bank, which
  must be new or empty → 201 (or 202 while units that came without a vector are embedded).

Hindsight (``hindsight-client`` 1.1's ``BankTransferApi``): ``POST …/transfer/export`` →
202 and an operation whose ``result_metadata.download_url`` (``GET
/v1/default/files/download/{key}``) streams the export; ``POST …/transfer/import``
(multipart ``file``, ``mode=restore`` into ``target_bank_id``) and ``POST …/clone``
(``target_bank_id``) → 202 with the operation, recorded against the path's bank. The
archive is RCLL's format: a Hindsight transfer ZIP is 400 ``invalid_export``.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from flask import Blueprint, Response, current_app, jsonify, request

from api import contracts as C
from api import hindsight as hs
from api.auth import principal, requires
from api.errors import APIError
from api.openapi import doc
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.access.jobs import job_json
from rcll.transfer import format as fmt
from rcll.transfer.export import Selection
from rcll.transfer.service import TransferService

bp = Blueprint("transfer", __name__)
HS = "/v1/default/banks/<bank_id>"
_BOOLEANS = {"1": True, "true": True, "0": False, "false": False}
IMPORT_ERRORS = {400: ["invalid_export", "invalid_request", "unsupported_hindsight_value"],
                 409: ["bank_not_empty", "bank_busy", "ids_in_use"],
                 413: ["payload_too_large"]}


def transfer() -> TransferService:
    """The app's transfer service (its enqueuer is the app's; built on first use)."""
    svc = current_app.extensions.get("rcll_transfer")
    if svc is None:
        svc = current_app.extensions["rcll"].transfer_service(
            current_app.extensions["rcll_enqueue"])
        current_app.extensions["rcll_transfer"] = svc
    return svc


def _flag(name: str, default: bool) -> bool:
    raw = request.args.get(name)
    if raw is None:
        return default
    value = _BOOLEANS.get(raw.strip().lower())
    if value is None:
        raise APIError(400, "invalid_request", f"{name} must be true or false",
                       {"field": name, "value": raw[:64]})
    return value


def _choice(name: str, allowed: tuple[str, ...], default: str) -> str:
    raw = request.args.get(name)
    if raw is None:
        return default
    if raw not in allowed:
        raise APIError(400, "invalid_request", f"{name} must be one of {', '.join(allowed)}",
                       {"field": name, "allowed": list(allowed)})
    return raw


def _upload(field: str | None = None):
    """The upload as a binary stream: the multipart field ``file``, else the raw body;
    bounded by ``RCLL_TRANSFER_MAX_BYTES`` (413), not the JSON routes' request limit."""
    request.max_content_length = current_app.extensions["rcll"].settings.transfer_max_bytes
    if request.mimetype == "multipart/form-data" or field is not None:
        f = request.files.get(field or "file")
        if f is None:
            raise APIError(400, "invalid_request", "send the export as the multipart field "
                           "'file'", {"field": "file"})
        return f.stream
    return request.stream


def _stream(name: str, stream, gzip: bool) -> Response:
    """``stream`` as a download named ``name`` (a bank id is any text: the plain
    ``filename`` keeps ASCII letters, digits and ``._-``, ``filename*`` the whole name)."""
    name += ".jsonl.gz" if gzip else ".jsonl"
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return Response(stream, mimetype=fmt.GZIP_MEDIA_TYPE if gzip else fmt.MEDIA_TYPE,
                    headers={"Content-Disposition": f"attachment; filename=\"{plain}\"; "
                                                    f"filename*=UTF-8''{quote(name, safe='')}",
                             "X-Accel-Buffering": "no", "Cache-Control": "no-store"},
                    direct_passthrough=True)


@bp.get("/banks/<bank_id>/export")
@requires("admin")
@doc({200: None}, query=C.ExportQuery, content_type=(fmt.MEDIA_TYPE, fmt.GZIP_MEDIA_TYPE))
def export_bank(bank_id: str):
    """The bank as an ``rcll-bank`` JSON Lines stream (docs/guides/export-import.md), read
    from one snapshot and sent as it is read: ``?vectors=true`` (default) carries the
    vectors, ``?grants=true`` the bank's grants, ``?gzip=true`` compresses it. It holds what
    the caller may see (a member's private units stay out of another member's export)."""
    check_bank_id(bank_id)
    vectors, grants, gz = _flag("vectors", True), _flag("grants", False), _flag("gzip", False)
    stream = transfer().export(principal(), bank_id, Selection(vectors=vectors, grants=grants),
                               gzip=gz)
    return _stream(f"{bank_id}.rcll-bank", stream, gz)


@bp.post("/banks/<bank_id>/import")
@requires("admin")
@doc({201: T.ImportAnswer, 202: T.ImportAnswer}, query=C.ImportQuery, body=bytes,
     body_required=False, body_content_type="application/octet-stream", errors=IMPORT_ERRORS)
def import_bank(bank_id: str):
    """Import an export (the body, of any content type: plain or gzip JSON Lines; or the
    multipart field ``file``) into the bank, which must be new or empty, in one transaction: all of it or,
    on a bad line, nothing (400 ``invalid_export`` with the line). ``?ids=auto|keep|new``,
    ``?grants=false`` leaves the export's grants out. 201, or 202 while the units that came
    without a vector (or with another embedder's) are embedded by the operation."""
    check_bank_id(bank_id)
    ids, grants = _choice("ids", ("auto", "keep", "new"), "auto"), _flag("grants", True)
    answer = transfer().import_stream(principal(), bank_id, _upload(), ids=ids, grants=grants)
    return jsonify(answer), 202 if answer["state"] == "queued" else 201


@bp.post(HS + "/transfer/export")
@requires("admin")
@doc({202: T.TransferSubmitted}, query=C.HindsightExportQuery, tags=["hindsight"])
def hindsight_export(bank_id: str):
    """Hindsight's bank export → 202 ``{operation_id, status}``. The operation is done at
    once: its ``result_metadata.download_url`` streams the export (gzip ``rcll-bank``
    JSON Lines, not Hindsight's ZIP) from the bank as it is when downloaded, for the caller
    only. ``include_data=false``: the bank's header only; ``include_bank_config=false``:
    without its config; ``document_id`` (repeated): only those documents;
    ``include_history`` is accepted (RCLL carries no audit log or LLM requests). RCLL's
    ``vectors`` (default true) and ``grants`` (default false) apply too."""
    check_bank_id(bank_id)
    _flag("include_history", False)  # checked, then nothing: no history is carried
    docs = request.args.getlist("document_id") or None
    sel = Selection(vectors=_flag("vectors", True), grants=_flag("grants", False),
                    data=_flag("include_data", True), config=_flag("include_bank_config", True),
                    documents=tuple(docs) if docs else None)
    op = job_json(principal(), transfer().submit_export(principal(), bank_id, sel))
    return jsonify({"operation_id": op["operation_id"], "status": op["status"],
                    "bank_id": bank_id, "result_metadata": op.get("result_metadata")}), 202


@bp.post(HS + "/transfer/import")
@requires("admin")
@doc({202: T.TransferSubmitted}, query=C.HindsightImportQuery, body=C.TransferImportForm,
     body_content_type="multipart/form-data", errors=IMPORT_ERRORS, tags=["hindsight"])
def hindsight_import(bank_id: str):
    """Hindsight's bank import (multipart ``file``): ``mode=restore`` (the default) into
    ``target_bank_id`` (default: the export's own bank id), which must be new or empty
    (Hindsight: must not exist); ``mode=merge`` is 400 ``unsupported_hindsight_value``.
    ``include_data=false`` restores the bank's name and config only,
    ``include_bank_config=false`` the records only. The import runs in this request
    (one transaction); the operation, recorded against the path's bank, is 202 ``completed``
    — or ``pending`` while units that came without a vector are embedded."""
    check_bank_id(bank_id)
    mode = _choice("mode", ("restore", "merge"), "restore")
    if mode == "merge":
        raise hs.unsupported("mode", mode, "RCLL imports into a new or empty bank only "
                                           "(restore); merging into a bank is not built")
    _choice("document_conflict", ("skip", "replace", "new-id"), "skip")
    _flag("include_history", False)
    target = request.args.get("target_bank_id") or None
    if target is not None:
        check_bank_id(target)
    answer = transfer().import_stream(
        principal(), target, _upload("file"), ids="auto", grants=_flag("grants", True),
        data=_flag("include_data", True), config=_flag("include_bank_config", True),
        record_on=bank_id)
    return jsonify(_submitted(answer)), 202


@bp.post(HS + "/clone")
@requires("admin")
@doc({202: T.TransferSubmitted}, query=C.HindsightCloneQuery, tags=["hindsight"],
     errors={400: ["invalid_request"], 409: ["bank_exists"]})
def hindsight_clone(bank_id: str):
    """Hindsight's clone: copy the bank into ``target_bank_id``, which must not exist (409
    ``bank_exists``), in this request — the export and the import back to back in one
    service call, vectors reused, new ids; the copy then lives on its own. The operation is
    recorded against the source bank (202). ``include_data=false``: an empty bank with the
    source's config; ``include_bank_config=false``: without it; ``grants=true`` copies the
    grants too (default false)."""
    check_bank_id(bank_id)
    target = request.args.get("target_bank_id")
    if not target:
        raise APIError(400, "invalid_request", "target_bank_id is required",
                       {"field": "target_bank_id"})
    check_bank_id(target)
    _flag("include_history", False)
    answer = transfer().clone(principal(), bank_id, target,
                              data=_flag("include_data", True),
                              config=_flag("include_bank_config", True),
                              grants=_flag("grants", False))
    return jsonify(_submitted(answer)), 202


def _submitted(answer: dict) -> dict:
    """Hindsight's ``BankTransferSubmitResponse`` (``operation_id``, ``status``) and
    RCLL's answer beside it."""
    return {"operation_id": answer["operation_id"], "status": answer["status"],
            **{k: v for k, v in answer.items() if k not in ("operation_id", "status")}}


@bp.get("/v1/default/files/download/<key>")
@requires("member")
@doc({200: None}, content_type=fmt.GZIP_MEDIA_TYPE, errors={404: ["export_not_found"]},
     tags=["hindsight"])
def download(key: str):
    """The export a ``POST …/transfer/export`` operation names (its
    ``result_metadata.storage_key``): gzip ``rcll-bank`` JSON Lines, streamed from the bank
    as it is now; only for the member who asked for it, still admin on the bank (anyone
    else: 404 ``export_not_found``)."""
    name, stream = transfer().download(principal(), key)
    return _stream(name.removesuffix(".jsonl.gz"), stream, True)
