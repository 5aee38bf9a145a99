"""Memory Worth outcomes (spec §3 ``unit_feedback``, §5 post-processing): the SQL.

An agent that used a recalled unit reports whether it helped (``success``) or not
(``failure``); :func:`record` adds one outcome in a single atomic statement. Recall reads the
counts (:func:`rcll.search.post.worth_step`) and drops units with worth < 0.3 once they have
at least 20 outcomes.
"""

from __future__ import annotations

from psycopg import Connection
from psycopg.errors import ForeignKeyViolation

from rcll.errors import InvalidInput
from rcll.store.memories import UnitNotFound, parse_unit_id

OUTCOMES = ("success", "failure")


def worth(success: int, failure: int) -> float | None:
    """Memory Worth = ``success / (success + failure)`` in [0, 1]; ``None`` with no outcome.

    Source: spec §5 post-processing ("Memory Worth filter (exclude worth < 0.3 once a unit
    has at least 20 outcomes)") and the seed ../shared/seeds/003_4c8355635cfadf5f.txt line 39
    ("Memory Worth filter (exclude worth < 0.3)"), which name the filter and its threshold
    but give no formula; the success ratio is the definition issue 7 item 6 gives
    ("``success|failure`` records outcomes").
    """
    n = success + failure
    return None if n == 0 else success / n


def counts(conn: Connection, unit_id: str) -> dict:
    """The unit's outcomes: ``{"success", "failure", "worth"}`` (zeros and ``None`` when it
    has none)."""
    row = conn.execute("SELECT success, failure FROM unit_feedback WHERE unit_id = %s",
                       (unit_id,)).fetchone()
    s, f = (int(row["success"]), int(row["failure"])) if row else (0, 0)
    return {"success": s, "failure": f, "worth": worth(s, f)}


def parse_outcome(value) -> str:
    """``value`` if it is ``"success"`` or ``"failure"``; else :class:`InvalidInput` (400,
    code ``invalid_outcome``)."""
    if value not in OUTCOMES:
        err = InvalidInput("outcome must be 'success' or 'failure'",
                           {"field": "outcome", "allowed": list(OUTCOMES)})
        err.code = "invalid_outcome"
        raise err
    return value


def record(conn: Connection, bank_id: str, unit_id: str, outcome: str, *,
           visible: tuple[str, dict] = ("TRUE", {})) -> dict:
    """Add one ``outcome`` to unit ``unit_id`` of bank ``bank_id``, atomically (``INSERT … ON
    CONFLICT DO UPDATE``: concurrent calls each count once).

    Returns ``{"unit_id", "success", "failure", "worth"}`` (counts after this outcome; worth
    as in :func:`worth`). Raises :class:`~rcll.store.memories.UnitNotFound` when the unit does
    not exist in this bank (a unit of another bank is not found either), ``InvalidInput`` for
    a malformed id (``invalid_unit_id``) or outcome (``invalid_outcome``). ``visible``:
    ``(sql, params)`` on alias ``m`` (:func:`rcll.access.visibility.unit_filter`); a unit it
    refuses is not found either (no existence oracle). Run inside a transaction; the caller
    checks the bank exists.
    """
    uid = parse_unit_id(unit_id)
    outcome = parse_outcome(outcome)
    s, f = (1, 0) if outcome == "success" else (0, 1)
    # FOR KEY SHARE: a concurrent delete of the unit (or its bank) either waits for this
    # insert or, having won, leaves no row to lock — never a foreign-key violation.
    try:
        with conn.transaction():
            row = conn.execute(
                f"""WITH u AS (SELECT m.id, m.bank_id FROM memory_units m
                              WHERE m.id = %(u)s AND m.bank_id = %(b)s AND {visible[0]}
                              FOR KEY SHARE)
                   INSERT INTO unit_feedback AS fb (unit_id, bank_id, success, failure)
                   SELECT u.id, u.bank_id, %(s)s, %(f)s FROM u
                   ON CONFLICT (unit_id) DO UPDATE
                     SET success = fb.success + EXCLUDED.success,
                         failure = fb.failure + EXCLUDED.failure, updated_at = now()
                   RETURNING fb.success, fb.failure""",
                {"u": uid, "b": bank_id, "s": s, "f": f, **visible[1]}).fetchone()
    except ForeignKeyViolation:  # the bank row went away under us
        row = None
    if row is None:
        raise UnitNotFound(f"unit {uid} does not exist in bank {bank_id!r}",
                           {"unit_id": uid, "bank_id": bank_id})
    return {"unit_id": uid, "success": row["success"], "failure": row["failure"],
            "worth": worth(row["success"], row["failure"])}
