"""The ``convert`` step of a file job: file → retain items with provenance, then ``chunk``.

A file job (:mod:`rcll.files.service`) starts at stage ``convert``. This step converts the
file (:func:`rcll.files.convert.convert`), makes one retain item per page (PDF) or section
(the rest), and in one statement swaps the job's payload for those items and moves the job to
``chunk``; from there it is an ordinary retain job. Every item's ``metadata["file"]`` is the
provenance each unit keeps: ``name``, ``type`` (MIME), ``size`` (bytes), ``sha256``,
``document_id`` (the file's), and ``page``/``pages`` (PDF) or ``section``/``section_index``/
``sections``. Each page or section is its own document, ``<document_id>#p<page>`` or
``<document_id>#s<index>`` (a document's latest version is its only live one, so pages of one
file cannot share an id); a file of one section keeps ``document_id``.

Conversion runs in a child process bounded in time and memory, after cheap checks of the
file's structure (:mod:`rcll.files.sandbox`, :class:`rcll.files.convert.ConvertLimits` from
``ctx.convert_limits``). A file that cannot be converted, or passes a bound, ends its job
``failed`` with ``<name>: cannot convert: <reason>`` (a bound names its ``RCLL_FILE_*`` setting).
"""

from __future__ import annotations

import base64
import logging

from rcll.files import convert, sandbox
from rcll.retain.models import RetainItem
from rcll.retain.pipeline import RetainContext
from rcll.store import jobs, units

log = logging.getLogger(__name__)
STAGE = "convert"  # a file job's stage until its file is converted
TASK = "retain.convert"  # its Celery task (queue ``extract``)
NEXT_STAGE = "chunk"


def items_for(entry: dict, sections: list[convert.Section]) -> list[dict]:
    """Retain items (JSON, validated as :class:`RetainItem`) for the ``sections`` of the file
    in payload ``entry``. Raises pydantic's ``ValidationError`` for a field the request
    check let through (not expected)."""
    f = entry["file"]
    base_id = entry["document_id"]
    prov = {"name": f["name"], "type": f["type"], "size": f["size"], "sha256": f["sha256"],
            "document_id": base_id}
    out = []
    for i, s in enumerate(sections, 1):
        if s.page is not None:
            where = {"page": s.page, "pages": s.pages}
            doc_id = units.file_part_id(base_id, units.PAGE, s.page)
        else:
            where = {"section": s.section, "section_index": i, "sections": len(sections)}
            doc_id = base_id if len(sections) == 1 else units.file_part_id(base_id,
                                                                             units.SECTION, i)
        meta = {**(entry.get("metadata") or {}), "file": {**prov, **where}}
        item = RetainItem(content=s.text, document_id=doc_id, context=entry.get("context"),
                          metadata=meta, tags=entry.get("tags") or [],
                          timestamp=entry.get("timestamp"), audience=entry.get("audience"),
                          purposes=entry.get("purposes"))
        out.append(item.model_dump(mode="json"))
    return out


def run_convert(ctx: RetainContext, job_id: str) -> dict | None:
    """Convert a file job's file and move the job to ``chunk``; returns the counts (the
    caller sends ``retain.chunk``), or ``None`` when the job is gone, ended, already past
    ``convert`` or failed here (conversion error: the job ends ``failed`` with the reason).
    Counts: ``files`` 1, ``sections`` (items made), ``pages`` (a PDF's page count)
    and ``convert_ms``."""
    import time

    with ctx.pool.connection() as conn:
        loaded = jobs.payload(conn, job_id)
        if loaded is None or jobs.start(conn, job_id, STAGE) is None:
            return None
    job, payload = loaded
    if job["stage"] != STAGE or len(payload) != 1 or "file" not in payload[0]:
        log.warning("job %s is not a file job at %s; left alone", job_id, STAGE)
        return None
    entry = payload[0]
    f = entry["file"]
    started = time.perf_counter()
    try:
        limits = ctx.convert_limits or convert.DEFAULT_LIMITS
        sections = sandbox.convert_bounded(base64.b64decode(f["data"]), f["name"], f["type"],
                                           limits)
        items = items_for(entry, sections)
    except convert.ConversionError as exc:
        reason = f"{f['name']}: cannot convert: {exc}"
        with ctx.pool.connection() as conn:
            jobs.finish(conn, job_id, "failed",
                    {"files": 1, "files_failed": 1,
                     "convert_ms": round((time.perf_counter() - started) * 1000)}, reason)
        log.info("file job %s failed: %s", job_id, reason)
        return None
    log.info("file job %s: %s converted to %d sections in %.1f s", job_id, f["name"],
             len(items), time.perf_counter() - started)
    counts = {"files": 1, "items": len(items), "sections": len(items),
              "convert_ms": round((time.perf_counter() - started) * 1000)}
    if sections[0].pages is not None:
        counts["pages"] = sections[0].pages
    with ctx.pool.connection() as conn:
        if not jobs.replace_payload(conn, job_id, items, counts, STAGE, NEXT_STAGE):
            return None
    return counts
