"""The events a webhook can subscribe to, and the body each one is delivered with.

Hindsight's event: ``{"event", "bank_id", "operation_id", "status", "timestamp", "data"}``,
``status`` ``completed`` or ``failed``. RCLL sends that envelope for the end of a job — a
retain job (``retain.completed``) and a closets job (``consolidation.completed``, RCLL's
consolidation) — with ``event_id`` (one per event, the same on every attempt and every
webhook: what a receiver deduplicates on; delivery is at least once) and ``data`` holding
what a redacted operation shows (:data:`rcll.access.jobs.SHOWN_REDACTED`): RCLL's ``state``
(``succeeded``, ``partial``, ``failed``) and the job ``kind``. Nothing about the job's items
(document ids, tags, errors) is in the body: the receiver reads the operation with its own
key, through the job visibility rule (:mod:`rcll.access.jobs`).

Pure functions, no I/O.
"""

from __future__ import annotations

import json
from uuid import UUID

# the job kinds whose end is an event, and its name
EVENT_BY_KIND = {"retain": "retain.completed", "closets": "consolidation.completed"}
EVENT_TYPES: tuple[str, ...] = ("retain.completed", "consolidation.completed")
# Hindsight's event types RCLL never fires (it has no memory defense)
HINDSIGHT_ONLY: tuple[str, ...] = ("memory_defense.triggered",)


def job_event(job: dict, event_id: UUID) -> tuple[str, str] | None:
    """``(event type, body)`` for the end of ``job`` (a row with ``id``, ``bank_id``,
    ``kind``, ``state``, ``finished_at``), or ``None`` when the end of a job of this kind is
    no event. ``body`` is compact JSON text (UTF-8 when sent), the exact text signed."""
    event = EVENT_BY_KIND.get(job.get("kind"))
    if event is None:
        return None
    finished = job.get("finished_at")
    body = {"event": event, "bank_id": job["bank_id"], "operation_id": str(job["id"]),
            "status": "failed" if job["state"] == "failed" else "completed",
            "timestamp": finished.isoformat() if hasattr(finished, "isoformat") else None,
            "event_id": str(event_id),
            "data": {"state": job["state"], "kind": job["kind"]}}
    return event, json.dumps(body, ensure_ascii=False, separators=(",", ":"))
