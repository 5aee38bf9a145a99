"""Jobs: one row per retain request, its state machine, counts and error (spec §1.7, §3).

States: queued → running → succeeded | partial | failed, and cancelled (on request, from
queued or running: :func:`cancel`); a failed job can be queued again (:func:`retry`).
``stage`` says which pipeline step runs (extract, embed) so progress on long work is
visible. This table, not the broker, is the
source of truth: a stage runs under a lease its worker renews by heartbeat, and the recovery
sweep re-sends what the broker lost (:func:`claim_lost`).
"""

from __future__ import annotations

import json
from datetime import UTC
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.errors import JobNotFound, Rejected
from rcll.store import webhooks

TERMINAL = ("succeeded", "failed", "partial", "cancelled")
ACTIVE = ("queued", "running")
PUBLIC_COLUMNS = ("id, bank_id, kind, state, stage, counts, error, attempts, resends, "
                  "lease_expiries, llm_usage, "
                  "idempotency_key, created_at, updated_at, started_at, finished_at, "
                  "submitted_by, item_scopes")
# what a job stores for its visibility rule (rcll.access.jobs), never shown in its JSON
RULE_FIELDS = ("submitted_by", "item_scopes")


def item_scopes(items) -> list[dict]:
    """The distinct ``{"audience", "purposes"}`` of ``items`` (objects or dicts with those
    two fields, resolved by the retain service), sorted: what :func:`create` stores as the
    job's ``item_scopes`` (migration 0020)."""
    seen: set[tuple] = set()
    for i in items:
        get = i.get if isinstance(i, dict) else lambda k, _i=i: getattr(_i, k, None)
        purposes = get("purposes")
        seen.add((get("audience"), None if purposes is None else tuple(sorted(purposes))))
    return [{"audience": a, "purposes": None if p is None else list(p)}
            for a, p in sorted(seen, key=lambda t: (str(t[0]), t[1] or ()))]


def create(conn: Connection, bank_id: str, kind: str, payload: list, counts: dict,
           idempotency_key: str | None = None,
           request_hash: str | None = None, *, submitted_by: str | None = None,
           scopes: list[dict] | None = None) -> tuple[dict, bool]:
    """Insert a queued job; ``(job, created)``. ``submitted_by``: the submitting member's id
    (None: auth off, internal); ``scopes``: its items' :func:`item_scopes` (``[]``: no member
    items; None: unknown, the content is then shown to no member) — what
    :func:`rcll.access.jobs.job_visible` decides by. Idempotency keys are the submitter's own
    (unique per bank and ``submitted_by``, migration 0022). An existing key returns its job
    when ``request_hash`` matches the one stored with it; a different request under the same
    key raises :class:`~rcll.errors.Rejected` ``409 idempotency_key_reused`` (the first
    request's job stays as it was; the semantics of Stripe's and the IETF draft's
    Idempotency-Key header)."""
    row = conn.execute(
        f"""INSERT INTO jobs (bank_id, kind, payload, counts, idempotency_key, request_hash,
                              submitted_by, item_scopes)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (bank_id, submitted_by, idempotency_key)
              WHERE idempotency_key IS NOT NULL DO NOTHING
            RETURNING {PUBLIC_COLUMNS}""",
        (bank_id, kind, Jsonb(payload), Jsonb(counts), idempotency_key, request_hash,
         submitted_by, None if scopes is None else Jsonb(scopes)),
    ).fetchone()
    if row is not None:
        return row, True
    existing = conn.execute(
        f"""SELECT {PUBLIC_COLUMNS}, request_hash FROM jobs
            WHERE bank_id = %s AND submitted_by IS NOT DISTINCT FROM %s
              AND idempotency_key = %s""",
        (bank_id, submitted_by, idempotency_key),
    ).fetchone()
    stored = existing.pop("request_hash")
    if stored is not None and request_hash is not None and stored != request_hash:
        raise Rejected(409, "idempotency_key_reused",
                       "this Idempotency-Key was used for a different request; use a new key",
                       {"operation_id": str(existing["id"])})
    return existing, False


def get(conn: Connection, job_id: str | UUID, bank_id: str | None = None) -> dict:
    """The public view of a job. Raises :class:`JobNotFound` (also for a malformed id)."""
    try:
        job_uuid = str(UUID(str(job_id)))
    except ValueError:
        raise JobNotFound(f"operation {job_id!r} does not exist", {"operation_id": str(job_id)})
    sql = f"SELECT {PUBLIC_COLUMNS} FROM jobs WHERE id = %s"
    params: list = [job_uuid]
    if bank_id is not None:
        sql += " AND bank_id = %s"
        params.append(bank_id)
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise JobNotFound(f"operation {job_id} does not exist", {"operation_id": str(job_id)})
    return row


def by_idempotency_key(conn: Connection, bank_id: str, key: str,
                       submitted_by: str | None = None) -> list[dict]:
    """The public views of ``bank_id``'s jobs created under idempotency ``key`` (one per
    submitter), ``submitted_by``'s own first, then the newest."""
    rows = conn.execute(
        """SELECT id FROM jobs WHERE bank_id = %s AND idempotency_key = %s
           ORDER BY submitted_by IS NOT DISTINCT FROM %s DESC, created_at DESC, id""",
        (bank_id, key, submitted_by)).fetchall()
    return [get(conn, r["id"], bank_id) for r in rows]


def payload(conn: Connection, job_id: str) -> tuple[dict, list] | None:
    """``(job, raw items)`` for a worker, or ``None`` when the job is gone (bank deleted)."""
    row = conn.execute(
        f"SELECT {PUBLIC_COLUMNS}, payload FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    if row is None:
        return None
    items = row.pop("payload") or []
    return row, items


def start(conn: Connection, job_id: str, stage: str) -> dict | None:
    """Mark a job running (one more attempt). Returns ``None`` if it is gone or already ended."""
    return conn.execute(
        f"""UPDATE jobs SET state = 'running', stage = %s, attempts = attempts + 1,
                   started_at = coalesce(started_at, now()), updated_at = now()
            WHERE id = %s AND state IN ('queued', 'running')
            RETURNING {PUBLIC_COLUMNS}""",
        (stage, job_id),
    ).fetchone()


def progress(conn: Connection, job_id: str, counts: dict, stage: str | None = None) -> None:
    """Merge ``counts`` into the job's counts (and set the stage) while it runs (a job that
    ended meanwhile — cancelled — is left as it is)."""
    conn.execute(
        """UPDATE jobs SET counts = counts || %s, stage = coalesce(%s, stage), updated_at = now()
           WHERE id = %s AND state IN ('queued', 'running')""",
        (Jsonb(counts), stage, job_id),
    )


def finish(conn: Connection, job_id: str, state: str, counts: dict | None = None,
           error: str | None = None) -> None:
    """End a queued or running job in ``state`` (one of :data:`TERMINAL`) with its final
    counts and error; a job that ended already (cancelled while its worker ran, or a second
    finish) keeps its end.

    Every job ends here, so this is where its end becomes an event: in the same
    transaction, the webhook outbox gets one delivery per subscribed webhook of the bank
    (:func:`rcll.store.webhooks.enqueue_job_event`)."""
    assert state in TERMINAL
    with conn.transaction():
        before = conn.execute("SELECT state FROM jobs WHERE id = %s FOR UPDATE",
                              (job_id,)).fetchone()
        if before is None or before["state"] not in ACTIVE:
            return
        row = conn.execute(
            """UPDATE jobs SET state = %s, counts = counts || %s, error = %s, stage = 'done',
                      finished_at = now(), updated_at = now(),
                      payload = CASE WHEN %s = 'failed' THEN payload END
               WHERE id = %s RETURNING id, bank_id, kind, state, finished_at""",
            (state, Jsonb(counts or {}), error, state, job_id),
        ).fetchone()
        webhooks.enqueue_job_event(conn, row)


def requeue_failed_enqueue(conn: Connection, job_id: str) -> bool:
    """Put a job that failed only because it could not be enqueued back to ``queued``."""
    return conn.execute(
        """UPDATE jobs SET state = 'queued', error = NULL, finished_at = NULL, stage = NULL,
                  updated_at = now()
           WHERE id = %s AND state = 'failed' AND error LIKE 'enqueue failed%%'
             AND payload IS NOT NULL
           RETURNING id""", (job_id,)).fetchone() is not None


def lock(conn: Connection, job_id: str, bank_id: str) -> dict:
    """The public view of ``bank_id``'s job ``job_id``, its row locked ``FOR UPDATE`` for
    the caller's transaction (a worker's next :func:`lock_for_work` waits for it), with
    ``has_payload`` and ``payload_is_file`` (a file job not yet converted). Raises
    :class:`JobNotFound`."""
    get(conn, job_id, bank_id)  # the id's form and the bank, one answer for both
    return conn.execute(
        f"""SELECT {PUBLIC_COLUMNS}, payload IS NOT NULL AS has_payload,
                   coalesce(jsonb_typeof(payload) = 'array' AND jsonb_array_length(payload) = 1
                            AND payload -> 0 ? 'file', false) AS payload_is_file
            FROM jobs WHERE id = %s FOR UPDATE""", (str(UUID(str(job_id))),)).fetchone()


def cancel(conn: Connection, job_id: str, error: str) -> dict | None:
    """End a queued or running job ``cancelled`` with ``error`` (who cancelled it), its
    payload dropped (the items it did not store are not kept). A queued job is never
    started; a running one stops at its stage's next :func:`lock_for_work` (each item, each
    batch), which now returns ``None``; its lease is left to its holder to release. Returns
    the job, or ``None`` when it had already ended."""
    return conn.execute(
        f"""UPDATE jobs SET state = 'cancelled', error = %s, finished_at = now(),
                   updated_at = now(), payload = NULL
            WHERE id = %s AND state IN ('queued', 'running')
            RETURNING {PUBLIC_COLUMNS}""", (error, job_id)).fetchone()


# counts a run leaves that must not outlive it: a retried job's reasons are its new run's
RUN_COUNTS = ("errors", "warnings", "items_failed", "files_failed", "items_done",
              "units_embedded")


def retry(conn: Connection, job_id: str, stage: str | None) -> dict | None:
    """Put a ``failed`` job that still holds its payload back to ``queued`` at ``stage``
    (``None``: the retain pipeline's first), its error and the counts of its failed run
    (:data:`RUN_COUNTS`) cleared and ``counts.retries`` counted up; the caller sends the
    stage after the commit. Returns the job, or ``None`` when it is not failed or has no
    payload."""
    return conn.execute(
        f"""UPDATE jobs SET state = 'queued', stage = %s, error = NULL, finished_at = NULL,
                   lease_owner = NULL, lease_until = NULL, resends = 0, lease_expiries = 0,
                   updated_at = now(),
                   counts = (counts - %s::text[])
                            || jsonb_build_object('retries',
                                                  coalesce((counts ->> 'retries')::int, 0) + 1)
            WHERE id = %s AND state = 'failed' AND payload IS NOT NULL
            RETURNING {PUBLIC_COLUMNS}""", (stage, list(RUN_COUNTS), job_id)).fetchone()


def delete(conn: Connection, job_id: str) -> bool:
    """Delete the job's record (its item errors go with it; units keep their ``job_id``).
    A worker still running it stops at its next :func:`lock_for_work`. Whether it
    existed."""
    return conn.execute("DELETE FROM jobs WHERE id = %s RETURNING id",
                        (job_id,)).fetchone() is not None


def acquire_lease(conn: Connection, job_id: str, owner: str, stage: str, first: bool,
                  lease_s: float) -> bool:
    """Take the lease on ``job_id`` to run ``stage`` for ``lease_s`` seconds (renewed by
    :func:`renew_lease`). Taking over an expired lease counts a ``lease_expiries`` (its
    holder stopped without releasing it). False when the job is gone, ended, at another stage (a stale
    duplicate message) or leased by someone else whose lease has not expired. ``first``: this
    is the first stage, which also runs a job that never started (stage ``NULL``)."""
    return conn.execute(
        """UPDATE jobs SET lease_owner = %(owner)s, resends = 0, updated_at = now(),
                  lease_expiries = lease_expiries
                      + (lease_owner IS NOT NULL AND lease_owner <> %(owner)s)::int,
                  lease_until = now() + make_interval(secs => %(lease)s)
           WHERE id = %(id)s AND state IN ('queued', 'running')
             AND (stage = %(stage)s OR (%(first)s AND stage IS NULL))
             AND (lease_until IS NULL OR lease_until < now() OR lease_owner = %(owner)s)
           RETURNING id""",
        {"owner": owner, "lease": lease_s, "id": job_id, "stage": stage, "first": first},
    ).fetchone() is not None


def renew_lease(conn: Connection, job_id: str, owner: str, lease_s: float) -> bool:
    """Heartbeat: extend ``owner``'s lease and bump ``updated_at``. False if it lost the lease
    (it expired and another worker took the job) or the job is gone."""
    return conn.execute(
        """UPDATE jobs SET lease_until = now() + make_interval(secs => %s), updated_at = now()
           WHERE id = %s AND lease_owner = %s RETURNING id""",
        (lease_s, job_id, owner)).fetchone() is not None


def release_lease(conn: Connection, job_id: str, owner: str) -> None:
    """Give up ``owner``'s lease (the stage ended, however). ``updated_at`` restarts the
    sweep's grace period from now."""
    conn.execute(
        """UPDATE jobs SET lease_owner = NULL, lease_until = NULL, updated_at = now()
           WHERE id = %s AND lease_owner = %s""", (job_id, owner))


def claim_lost(conn: Connection, grace_s: float, limit: int = 500,
               max_backoff: int = 6) -> list[dict]:
    """Unfinished jobs nobody holds that made no progress for ``grace_s * 2**resends``
    seconds (``resends`` capped at ``max_backoff``): queued jobs whose message the broker lost,
    running jobs whose next stage was never sent, and running jobs whose lease expired (the
    worker died; counted in ``lease_expiries``). Bumps ``updated_at`` and ``resends`` and
    returns ``[{"id", "state", "stage", "lease_expiries"}]``, oldest first, at most
    ``limit``. Run it inside a transaction that commits
    only after the re-sends went out; ``SKIP LOCKED`` lets sweeps overlap without sending a
    job twice."""
    return conn.execute(
        """WITH due AS (
               SELECT id FROM jobs
               WHERE state IN ('queued', 'running')
                 AND (lease_until IS NULL OR lease_until < now())
                 AND updated_at < now() - make_interval(
                         secs => %(grace)s * power(2, least(resends, %(cap)s)))
               ORDER BY updated_at LIMIT %(limit)s
               FOR UPDATE SKIP LOCKED)
           UPDATE jobs j SET updated_at = now(), resends = j.resends + 1,
                             lease_expiries = j.lease_expiries + (j.lease_until IS NOT NULL)::int,
                             lease_owner = NULL, lease_until = NULL
           FROM due WHERE j.id = due.id
           RETURNING j.id, j.state, j.stage, j.lease_expiries""",
        {"grace": grace_s, "cap": max_backoff, "limit": limit}).fetchall()


def list_page(conn: Connection, bank_id: str | None = None, state: str | None = None,
              limit: int = 50, offset: int = 0,
              bank_ids: list[str] | None = None) -> tuple[list[dict], int]:
    """One page of jobs, newest first (ties broken by id, so pages never overlap), optionally
    for one bank and/or in one state; ``bank_ids``: only jobs of these banks (the caller's;
    ``None`` = all); ``(rows, total matching)``."""
    where, params = [], []
    if bank_id:
        where.append("bank_id = %s")
        params.append(bank_id)
    if bank_ids is not None:
        where.append("bank_id = ANY(%s)")
        params.append(list(bank_ids))
    if state:
        where.append("state = %s")
        params.append(state)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(
        f"""SELECT {PUBLIC_COLUMNS} FROM jobs {clause}
            ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s""",
        [*params, limit, offset],
    ).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM jobs {clause}", params).fetchone()["n"]
    return rows, total


def list_recent(conn: Connection, bank_id: str | None = None, state: str | None = None,
                limit: int = 50) -> list[dict]:
    """Newest jobs first, optionally for one bank and/or in one state."""
    return list_page(conn, bank_id, state, limit, 0)[0]


# RCLL's job states → the operation status names Hindsight's clients know (pending,
# processing, completed, failed, cancelled, not_found). A ``partial`` job stored what it
# could: ``completed``, with ``error_message`` saying what was skipped.
HINDSIGHT_STATUS = {"queued": "pending", "running": "processing", "succeeded": "completed",
                    "partial": "completed", "failed": "failed", "cancelled": "cancelled"}


# stages before units exist (their count is unknown) and before any is embedded
_BEFORE_UNITS = ("convert", "chunk")


def unit_progress(job: dict, now=None) -> dict:
    """How far a job is, in units: ``{"units_total", "units_done", "units_per_s",
    "eta_s"}``. ``units_total``: the units its ``chunk`` stage created (``None`` before
    that stage ended, or for a job that makes none); ``units_done``: units embedded (all of
    them once the job ended); ``units_per_s``: ``units_done`` over the seconds since the job
    started (till it finished), ``None`` before one is done; ``eta_s``: seconds left at that
    rate (0 once ended, ``None`` when unknown). ``now``: an aware datetime (default: now)."""
    from datetime import datetime

    counts = job.get("counts") or {}
    ended = job.get("state") in TERMINAL
    total = None
    if "units_created" in counts and (ended or job.get("stage") not in _BEFORE_UNITS):
        total = int(counts.get("units_created") or 0)
    done = int(counts.get("units_embedded") or 0)
    if total is not None:
        done = total if ended else min(done, total)
    started, finished = job.get("started_at"), job.get("finished_at")
    rate = None
    if done and hasattr(started, "timestamp"):
        end = finished if ended and hasattr(finished, "timestamp") else (
            now or datetime.now(UTC))
        seconds = (end - started).total_seconds()
        rate = round(done / seconds, 3) if seconds > 0 else None
    eta = 0.0 if ended else (round((total - done) / rate, 1)
                             if rate and total is not None else None)
    return {"units_total": total, "units_done": done, "units_per_s": rate, "eta_s": eta}


def to_json(job: dict) -> dict:
    """A job row as the API's operation object (ISO times, string ids): RCLL's ``state``
    (queued, running, succeeded, partial, failed) and, beside it, Hindsight's ``status``
    (:data:`HINDSIGHT_STATUS`), ``operation_id`` (= ``id``), ``task_type`` (= ``kind``),
    ``items_count`` and ``error_message`` (= ``error``), ``result_metadata`` (a transfer's,
    from its counts; :mod:`rcll.transfer.service`), and ``progress`` in units
    (:func:`unit_progress`). The rule's fields
    (:data:`RULE_FIELDS`) are left out. Unfiltered: routes show a job through
    :func:`rcll.access.jobs.job_json`, which redacts it for a caller who may not see it."""
    out = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in job.items()
           if k not in RULE_FIELDS}
    out["id"] = out["operation_id"] = str(job["id"])
    out["status"] = HINDSIGHT_STATUS.get(job["state"], job["state"])
    out["task_type"] = job.get("kind")
    counts = job.get("counts") or {}
    out["items_count"] = int(counts.get("items", counts.get("items_total", 0)) or 0)
    out["error_message"] = job.get("error")
    if "result_metadata" in counts:  # a transfer's: its download or per-component counts
        out["result_metadata"] = counts["result_metadata"]
    if "state" in job:
        out["unit_progress"] = unit_progress(job)
    return json.loads(json.dumps(out, default=str))


def lock_for_work(conn: Connection, job_id: str) -> int | None:
    """Lock a job row ``FOR SHARE`` for the rest of the caller's transaction and return its
    submission sequence (``jobs.seq``); ``None`` when the job is gone (its bank was deleted)
    or already ended, so the work must stop.

    Every write a stage makes for a job runs after this lock, and deleting a bank locks the
    bank's job rows ``FOR UPDATE`` first: a delete waits for the item in flight, and nothing
    is written for a job after its bank is gone (a re-created bank starts empty).
    """
    row = conn.execute("SELECT seq, state FROM jobs WHERE id = %s FOR SHARE",
                       (job_id,)).fetchone()
    if row is None or row["state"] in TERMINAL:
        return None
    return int(row["seq"])


def set_stage(conn: Connection, job_id: str, stage: str) -> None:
    """Start a new job at ``stage`` instead of the retain pipeline's first one (a file job
    starts at ``convert``); call it in the transaction that created the job."""
    conn.execute("UPDATE jobs SET stage = %s WHERE id = %s", (stage, job_id))


def replace_payload(conn: Connection, job_id: str, payload: list, counts: dict,
                    from_stage: str, to_stage: str) -> bool:
    """Swap a running job's payload (a file job: its file for the converted items), merge
    ``counts`` and move it from ``from_stage`` to ``to_stage``, in one statement. False when
    the job is gone, ended or no longer at ``from_stage`` (nothing changed)."""
    return conn.execute(
        """UPDATE jobs SET payload = %s, counts = counts || %s, stage = %s, updated_at = now()
           WHERE id = %s AND stage = %s AND state IN ('queued', 'running')
           RETURNING id""",
        (Jsonb(payload), Jsonb(counts), to_stage, job_id, from_stage)).fetchone() is not None
