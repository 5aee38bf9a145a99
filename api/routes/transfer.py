"""Bank export and import (issue 25 item 3): RCLL's own routes and Hindsight's transfer
routes, all calling :class:`rcll.transfer.service.TransferService`.

RCLL:
- ``GET /banks/{bank_id}/export?vectors=true&grants=false`` — the bank as an ``rcll-bank``
  JSON Lines stream (:mod:`rcll.transfer.format`), streamed as it is read (``read``; grants
  need ``admin``); ``?gzip=true`` compresses it.
- ``POST /banks/{bank_id}/import?ids=auto|keep|new&grants=true`` — body: an export (plain or
  gzip; raw, or multipart field ``file``); checked line by line (400 ``invalid_export`` with
  the line) → 202 with the import job (``write``; 409 ``bank_not_empty``).

Hindsight (``hindsight-client`` 1.1 ``BankTransferApi``):
- ``POST /v1/default/banks/{bank_id}/transfer/export`` → 202 ``{operation_id, status}``; the
  operation's ``result_metadata.download_url`` names the file when it has succeeded;
- ``GET /v1/default/files/download/{key}`` — that file (its submitter only);
- ``POST /v1/default/banks/{bank_id}/transfer/import`` (multipart ``file``; ``mode=restore``,
  ``target_bank_id``) → 202 ``{operation_id, status}``. ``mode=merge`` is 400
  ``unsupported_hindsight_value`` (an import goes into a new or empty bank). The archive is
  RCLL's format: Hindsight's own archives are refused with 400 ``invalid_export``.
"""

from __future__ import annotations

import zlib

from flask import Blueprint, Response, current_app, jsonify, request, stream_with_context
from pydantic import BaseModel, ConfigDict

from api import hindsight as hs
from api.auth import principal, requires
from api.errors import APIError
from api.openapi import doc
from api.schemas import check_bank_id
from rcll.retain.submit import accepted
from rcll.transfer import format as fmt
from rcll.transfer.service import TransferService, iter_file

bp = Blueprint("transfer", __name__)


class TransferSubmitResponse(BaseModel):
    """Hindsight's ``BankTransferSubmitResponse`` (RCLL's routes add ``operation``)."""

    model_config = ConfigDict(extra="allow")
    operation_id: str
    status: str = "pending"

BANK = "/v1/default/banks/<bank_id>"
ERRORS_EXPORT = {403: ["forbidden"], 404: ["bank_not_found"]}
ERRORS_IMPORT = {400: ["invalid_export", "invalid_request"],
                 409: ["bank_not_empty", "import_running"], 413: ["payload_too_large"],
                 503: ["queue_unavailable"]}


def transfer() -> TransferService:
    return current_app.extensions["rcll_transfer"]


def _flag(name: str, default: bool) -> bool:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise APIError(400, "invalid_request", f"{name} must be true or false", {"field": name})


def _gzip(lines):
    """``lines`` gzip-compressed as they come (one member, flushed per 1 MiB of input)."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    pending = 0
    for line in lines:
        out = z.compress(line)
        pending += len(line)
        if pending >= 1 << 20:
            out += z.flush(zlib.Z_SYNC_FLUSH)
            pending = 0
        if out:
            yield out
    yield z.flush()


def _upload():
    """The uploaded export as a binary stream: multipart field ``file``, else the raw body.
    Bounded by ``max_import_bytes`` (413), not the JSON routes' ``max_request_bytes``."""
    request.max_content_length = current_app.extensions["rcll"].settings.max_import_bytes
    if request.mimetype == "multipart/form-data":
        f = request.files.get("file")
        if f is None:
            raise APIError(400, "invalid_request", "multipart field 'file' is required",
                           {"field": "file"})
        return f.stream
    return request.stream


@bp.get("/banks/<bank_id>/export")
@requires("read")
@doc({200: None}, content_type=fmt.MEDIA_TYPE, errors=ERRORS_EXPORT)
def export_bank(bank_id: str):
    """The bank as an ``rcll-bank`` stream (``application/x-ndjson``; ``?gzip=true``:
    ``application/gzip``): ``?vectors=true`` (default) carries the vectors, ``?grants=true``
    the bank's grants (``admin``). Holds only what the caller may see."""
    check_bank_id(bank_id)
    vectors, grants, zipped = _flag("vectors", True), _flag("grants", False), _flag("gzip", False)
    lines = transfer().export(principal(), bank_id, vectors=vectors, grants=grants)
    body = stream_with_context(_gzip(lines) if zipped else lines)
    ext = "jsonl.gz" if zipped else "jsonl"
    return Response(body, mimetype="application/gzip" if zipped else fmt.MEDIA_TYPE,
                    headers={"Content-Disposition":
                             f'attachment; filename="rcll-bank.{ext}"',
                             "X-Accel-Buffering": "no"})


@bp.post("/banks/<bank_id>/import")
@requires("write")
@doc({202: TransferSubmitResponse}, body_required=False, body_content_type=fmt.MEDIA_TYPE,
     errors=ERRORS_IMPORT)
def import_bank(bank_id: str):
    """Import an export into ``bank_id`` (new or empty): ``?ids=auto|keep|new``,
    ``?grants=true`` (written for a bank admin only). 202 ``{operation_id, status,
    operation}``: poll ``/v1/default/banks/{bank_id}/operations/{operation_id}``."""
    check_bank_id(bank_id)
    ids, grants = request.args.get("ids", "auto"), _flag("grants", True)
    job = transfer().submit_import(principal(), bank_id, _upload(), ids=ids, grants=grants)
    return jsonify(accepted(job, principal())), 202


@bp.post(BANK + "/transfer/export")
@requires("read")
@doc({202: TransferSubmitResponse}, body_required=False, errors=ERRORS_EXPORT)
def hindsight_export(bank_id: str):
    """Hindsight's bank export: an ``export`` job → 202 ``{operation_id, status}``.
    ``include_data`` must be true (default; an export without the memories is 400
    ``unsupported_hindsight_value``); ``include_bank_config`` is always part of the header;
    ``include_history`` (audit log, LLM requests) is 400 when true; ``document_id``
    (a subset) is 400. RCLL's own ``vectors`` and ``grants`` flags apply too."""
    check_bank_id(bank_id)
    _hindsight_flags()
    if request.args.getlist("document_id"):
        raise hs.unsupported("document_id", request.args.getlist("document_id"),
                             "an export holds the whole bank")
    job = transfer().submit_export(principal(), bank_id, vectors=_flag("vectors", True),
                                   grants=_flag("grants", False))
    return jsonify({"operation_id": str(job["id"]), "status": "pending"}), 202


def _hindsight_flags() -> None:
    if not _flag("include_data", True):
        raise hs.unsupported("include_data", False, "an export always holds the memories")
    if _flag("include_history", False):
        raise hs.unsupported("include_history", True,
                             "the audit log and LLM requests are not part of an export")
    _flag("include_bank_config", True)


@bp.post(BANK + "/transfer/import")
@requires("write")
@doc({202: TransferSubmitResponse}, body_required=False,
     body_content_type="multipart/form-data", errors=ERRORS_IMPORT)
def hindsight_import(bank_id: str):
    """Hindsight's bank import (multipart ``file``): ``mode=restore`` (default) into
    ``target_bank_id`` (default: the archive's source bank), which must be new or empty.
    ``mode=merge`` is 400 ``unsupported_hindsight_value``. → 202 ``{operation_id, status}``;
    the operation is the target bank's."""
    check_bank_id(bank_id)
    mode = request.args.get("mode") or "restore"
    if mode != "restore":
        raise hs.unsupported("mode", mode, "only restore (into a new or empty bank) is "
                                           "supported")
    _hindsight_flags()
    target = request.args.get("target_bank_id") or None
    if target is not None:
        check_bank_id(target)
    job = transfer().submit_import(principal(), target, _upload(), ids="auto",
                                   grants=_flag("grants", True))
    return jsonify({"operation_id": str(job["id"]), "status": "pending",
                    "bank_id": job["bank_id"]}), 202


@bp.get("/v1/default/files/download/<key>")
@requires("member")
@doc({200: None}, content_type="application/gzip", errors={404: ["export_not_found"]})
def download(key: str):
    """The file of a finished export job (its ``result_metadata.storage_key``), gzip JSON
    Lines, streamed; only for the member who asked for the export."""
    path, name = transfer().download(principal(), key)
    return Response(iter_file(path), mimetype="application/gzip",
                    headers={"Content-Disposition": f'attachment; filename="{name}"',
                             "Content-Length": str(path.stat().st_size)})

