"""Accept a retain request: create the bank on first use and store a queued job.

The API calls this, commits, then enqueues the job id (enqueue after commit, STYLE §7).
"""

from __future__ import annotations

import hashlib
import json

from psycopg import Connection

from rcll.retain.models import RetainItem
from rcll.store import banks, jobs

RETAIN_JOB = "retain"


def submit_retain(conn: Connection, bank_id: str, items: list[RetainItem],
                  idempotency_key: str | None = None,
                  actor: str | None = None) -> tuple[dict, bool]:
    """Store a queued retain job holding the raw items; ``(job, created)``.

    A repeated ``idempotency_key`` for the bank with the same items from the same ``actor``
    (the writer's member id; ``None`` for auth off / internal calls) returns the first job
    and ``created=False``; other items, or the same key sent by another member, raise
    ``Rejected`` (409 ``idempotency_key_reused``) — a member never receives, nor silently
    replaces its write with, another member's job.
    """
    banks.ensure(conn, bank_id)
    payload = [i.model_dump(mode="json") for i in items]
    hashed: object = payload if actor is None else {"actor": actor, "items": payload}
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True, separators=(",", ":"))
                            .encode("utf-8")).hexdigest()
    return jobs.create(conn, bank_id, RETAIN_JOB, payload, {"items": len(items)},
                       idempotency_key, request_hash=digest, submitted_by=actor,
                       scopes=jobs.item_scopes(payload))
