"""Files: ``POST /v1/default/banks/{bank_id}/files/retain`` in Hindsight's multipart shape.

``multipart/form-data`` with one or more ``files`` parts and an optional ``request`` part
holding JSON (``{"parser", "files_metadata": [...]}``, Hindsight's ``FileRetainRequest``).
One retain job per file, converted on the workers; the answer is 200 (as Hindsight's client
expects) ``{"operation_ids": [...], "operations": [...]}``.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from api import contracts as C
from api.auth import principal, requires
from api.deps import parse_json_text, retain_service, services
from api.errors import APIError
from api.openapi import doc
from api.schemas import check_bank_id
from rcll import api_types as T
from rcll.access.jobs import job_json
from rcll.files.service import FileLimits, FileRetainRequest, FileRetainService, Upload

bp = Blueprint("files", __name__)


def file_service() -> FileRetainService:
    """The app's file service (built once, on first use)."""
    svc = current_app.extensions.get("rcll_files")
    if svc is None:
        svc = FileRetainService(retain_service(), FileLimits.from_settings(services().settings))
        current_app.extensions["rcll_files"] = svc
    return svc


@bp.post("/v1/default/banks/<bank_id>/files/retain")
@requires("write")
@doc({200: T.FilesAnswer}, body=C.FilesRetainForm, body_content_type="multipart/form-data",
     errors={400: ["no_files", "files_metadata_mismatch", "empty_file", "invalid_request",
                  "malformed_json"],
             413: ["too_many_files", "file_too_large"],
             415: ["unsupported_media_type", "unsupported_file_type"],
             503: ["queue_unavailable"]})
def retain_files(bank_id: str):
    """Retain files (Hindsight's multipart shape): each file becomes a retain job, converted
    on the workers (docs/concepts/retain.md "Files") → 200 ``{operation_ids, operations}``."""
    check_bank_id(bank_id)
    if request.mimetype != "multipart/form-data":
        raise APIError(415, "unsupported_media_type",
                       "send multipart/form-data: 'files' parts and a 'request' JSON part")
    raw = request.form.get("request")
    body = parse_json_text(raw, "the 'request' part") if raw not in (None, "") else {}
    if not isinstance(body, dict):
        raise APIError(400, "invalid_request", "the 'request' part must be a JSON object")
    req = FileRetainRequest.model_validate(body)  # ValidationError: 400 invalid_request
    uploads = [Upload(name=f.filename or "", content_type=f.mimetype or None, data=f.read())
               for f in request.files.getlist("files")]
    created = file_service().submit(bank_id, uploads, req, principal=principal())
    return jsonify({"operation_ids": [str(j["id"]) for j in created],
                    "operations": [job_json(principal(), j) for j in created]}), 200
