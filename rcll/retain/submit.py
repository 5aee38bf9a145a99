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
                  idempotency_key: str | None = None) -> tuple[dict, bool]:
    """Store a queued retain job holding the raw items; ``(job, created)``.

    A repeated ``idempotency_key`` for the bank with the same items returns the first job and
    ``created=False``; with other items it raises ``Rejected`` (409 ``idempotency_key_reused``).
    """
    banks.ensure(conn, bank_id)
    payload = [i.model_dump(mode="json") for i in items]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"))
                            .encode("utf-8")).hexdigest()
    return jobs.create(conn, bank_id, RETAIN_JOB, payload, {"items": len(items)},
                       idempotency_key, request_hash=digest)
