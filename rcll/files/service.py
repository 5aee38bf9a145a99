"""Retain document files: check the upload, store one retain job per file, enqueue it.

Conversion does not happen here: it is the job's first step, ``convert`` (queue ``extract``,
:mod:`rcll.files.stage`), so the API spends no CPU on a 300-page PDF and a file that cannot
be converted fails its own job with the reason. The file travels in the job's payload
(base64; it is replaced by the converted items once converted, so the bytes do not stay in
the database). Hindsight's shape: one operation per file (``operation_ids``).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from rcll.access.principal import Principal
from rcll.config import Settings
from rcll.errors import Rejected
from rcll.files import convert
from rcll.files.stage import STAGE, TASK
from rcll.retain.models import RetainItem
from rcll.retain.service import RetainService
from rcll.retain.submit import send_after_commit
from rcll.store import audit, banks, jobs
from rcll.validation import TextModel, clean_text

PARSERS = ("markitdown",)  # Hindsight's parser names RCLL accepts (it has one converter)


class FileMeta(TextModel):
    """One ``files_metadata`` entry (Hindsight's ``FileRetainMetadata``) plus RCLL's
    ``audience`` and ``purposes``. ``parser`` must name ``markitdown`` (alone or in a list);
    ``strategy`` is accepted and ignored (RCLL has one retain pipeline). Unknown fields: 400."""

    model_config = ConfigDict(extra="forbid")

    document_id: str | None = Field(None, min_length=1, max_length=480)
    context: str | None = Field(None, max_length=10_000)
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    timestamp: str | None = None
    parser: str | list[str] | None = None
    strategy: str | None = None
    audience: str | None = Field(None, min_length=1, max_length=64)
    purposes: list[str] | None = Field(None, max_length=16)

    @field_validator("parser")
    @classmethod
    def _parser(cls, v):
        return check_parser(v)


class FileRetainRequest(TextModel):
    """The multipart ``request`` field (Hindsight's ``FileRetainRequest``): ``parser`` (the
    default for every file) and ``files_metadata`` (one entry per file, in order)."""

    model_config = ConfigDict(extra="forbid")

    parser: str | list[str] | None = None
    files_metadata: list[FileMeta] | None = None

    @field_validator("parser")
    @classmethod
    def _parser(cls, v):
        return check_parser(v)


def check_parser(v: str | list[str] | None) -> str | list[str] | None:
    """``v`` if it is ``None`` or names only parsers RCLL has; raises ``ValueError``."""
    names = [v] if isinstance(v, str) else list(v or [])
    bad = [n for n in names if n not in PARSERS]
    if bad:
        raise ValueError(f"unknown parser(s) {bad}; available: {list(PARSERS)}")
    return v


@dataclass(frozen=True)
class Upload:
    """One uploaded file: its ``name`` as sent, declared ``content_type`` and ``data``."""

    name: str
    content_type: str | None
    data: bytes


@dataclass(frozen=True)
class FileLimits:
    """``max_files`` per request (413 ``too_many_files``) and ``max_file_bytes`` per file
    (413 ``file_too_large``); the whole request is bounded by ``RCLL_MAX_REQUEST_BYTES``."""

    max_files: int = 32
    max_file_bytes: int = 25 * 1024 * 1024

    @classmethod
    def from_settings(cls, s: Settings) -> FileLimits:
        """``RCLL_MAX_FILES_PER_REQUEST`` and ``RCLL_MAX_FILE_BYTES``."""
        return cls(max_files=s.max_files_per_request, max_file_bytes=s.max_file_bytes)


def check_uploads(uploads: list[Upload], request: FileRetainRequest, limits: FileLimits) -> None:
    """Refuse a request before anything is stored: 400 ``no_files``, 400 ``invalid_request``
    (a file name holding NUL or a lone surrogate, :func:`rcll.validation.clean_text`: the
    same rule as every text of the ``request`` part), 413 ``too_many_files``,
    400 ``files_metadata_mismatch`` (a list whose length is not the number of files),
    400 ``empty_file``, 413 ``file_too_large``, 415 ``unsupported_file_type`` (every
    offending file named in ``details``)."""
    if not uploads:
        raise Rejected(400, "no_files", "send one or more files in the multipart field 'files'")
    for i, u in enumerate(uploads):  # a file name is stored (jobs, metadata.file.name)
        try:
            clean_text(u.name)
        except ValueError as exc:
            raise Rejected(400, "invalid_request", f"files.{i}.filename: {exc}",
                           {"errors": [{"loc": ["files", i, "filename"], "msg": str(exc),
                                        "type": "value_error"}]}) from None
    if len(uploads) > limits.max_files:
        raise Rejected(413, "too_many_files", f"at most {limits.max_files} files per request",
                       {"files": len(uploads), "max": limits.max_files})
    metas = request.files_metadata
    if metas is not None and len(metas) != len(uploads):
        raise Rejected(400, "files_metadata_mismatch",
                       f"files_metadata has {len(metas)} entries for {len(uploads)} files",
                       {"files": len(uploads), "files_metadata": len(metas)})
    empty = [u.name for u in uploads if not u.data]
    if empty:
        raise Rejected(400, "empty_file", f"empty file: {', '.join(empty[:5])}", {"files": empty})
    big = [{"name": u.name, "bytes": len(u.data)} for u in uploads
           if len(u.data) > limits.max_file_bytes]
    if big:
        raise Rejected(413, "file_too_large",
                       f"{big[0]['name']} has {big[0]['bytes']} bytes; the limit is "
                       f"{limits.max_file_bytes} per file",
                       {"files": big, "max_bytes": limits.max_file_bytes})
    unknown = [{"name": u.name, "content_type": u.content_type} for u in uploads
               if convert.file_type(u.name, u.content_type) is None]
    if unknown:
        raise Rejected(415, "unsupported_file_type",
                       f"cannot convert {unknown[0]['name']!r}; supported: "
                       f"{', '.join(convert.supported())}",
                       {"files": unknown, "supported": convert.supported()})


def file_payload(upload: Upload, meta: FileMeta) -> dict:
    """The job payload entry for one file: the file (name, MIME type, size, SHA-256, base64
    bytes) and the item fields its units get. ``document_id`` defaults to
    ``file:sha256:<first 32 hex>`` (the same file uploaded twice is one document)."""
    suffix, mime = convert.file_type(upload.name, upload.content_type)
    digest = hashlib.sha256(upload.data).hexdigest()
    return {"file": {"name": upload.name, "type": mime, "suffix": suffix,
                     "size": len(upload.data), "sha256": digest,
                     "data": base64.b64encode(upload.data).decode("ascii")},
            "document_id": meta.document_id or f"file:sha256:{digest[:32]}",
            "context": meta.context, "metadata": meta.metadata or {}, "tags": meta.tags or [],
            "timestamp": meta.timestamp, "audience": meta.audience, "purposes": meta.purposes}


class FileRetainService:
    """Accepts file uploads for a bank; uses the retain service's pool, enqueuer and access
    rules (audience, purposes, the ``write`` role)."""

    def __init__(self, retain: RetainService, limits: FileLimits):
        self.retain = retain
        self.limits = limits

    def submit(self, bank_id: str, uploads: list[Upload], request: FileRetainRequest,
               principal: Principal | None = None) -> list[dict]:
        """One queued retain job per file, at stage ``convert``; returns the jobs (in file
        order). Everything is checked before anything is stored (:func:`check_uploads`; the
        items' ``audience``/``purposes``/``timestamp``/``tags``/``metadata`` as a retain item
        would be, so a bad field is a 400 now rather than a failed job later). Each job gets
        an audit entry ``retain.files``. Raises :class:`~rcll.errors.Rejected` (above, plus
        what :meth:`RetainService.with_access` raises) and ``503 queue_unavailable`` when a
        job could not be enqueued (that job is ``failed``; the others stand)."""
        check_uploads(uploads, request, self.limits)
        metas = request.files_metadata or [FileMeta() for _ in uploads]
        payloads = []
        for upload, meta in zip(uploads, metas, strict=True):
            entry = file_payload(upload, meta)
            probe = RetainItem(content="x", **_item_fields(entry))  # 400 on a bad field now
            [probe] = self.retain.with_access(bank_id, [probe], principal)
            entry.update(audience=probe.audience, purposes=probe.purposes)
            payloads.append(entry)
        created = []
        with self.retain.pool.connection() as conn, conn.transaction():
            banks.ensure(conn, bank_id)
            for entry in payloads:
                f = entry["file"]
                job, _ = jobs.create(conn, bank_id, "retain", [entry],
                                     {"items": 0, "file": {k: f[k] for k in
                                                           ("name", "type", "size", "sha256")}},
                                     submitted_by=principal.member_id if principal else None,
                                     scopes=jobs.item_scopes([entry]))
                jobs.set_stage(conn, str(job["id"]), STAGE)
                audit.record(conn, principal.member_id if principal else None, "retain.files",
                             bank_id, None, {"operation_id": str(job["id"]), "file": f["name"],
                                             "bytes": f["size"], "sha256": f["sha256"]})
                created.append(str(job["id"]))
        for job_id in created:
            send_after_commit(self.retain.enqueue, self.retain.pool, TASK, job_id,
                              what="file job",
                              message="could not enqueue the file's job; retry later",
                              details={"operation_id": job_id, "operation_ids": created})
        with self.retain.pool.connection() as conn:
            return [jobs.get(conn, j) for j in created]


def _item_fields(entry: dict) -> dict:
    """The retain-item fields of a payload entry (all but the file)."""
    return {k: v for k, v in entry.items() if k != "file"}
