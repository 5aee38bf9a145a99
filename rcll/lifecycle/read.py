"""``read``: one unit by id, with its links, entities and sources (spec §7, §8)."""

from __future__ import annotations

from rcll.access.principal import Principal
from rcll.access.purposes import unknown_purpose
from rcll.db import read_only
from rcll.errors import Rejected
from rcll.lifecycle import rules
from rcll.lifecycle.context import LifecycleContext
from rcll.store import banks, feedback, memories, unit_edits


def read(ctx: LifecycleContext, principal: Principal, bank_id: str, unit_id: str,
         purpose: str | None = None) -> dict:
    """The unit JSON (:func:`rcll.store.memories.get`: fields, ``revision``, ``audience``,
    ``purposes``, ``origin``, ``forgotten``/``forgotten_at``, ``links``, ``entities``,
    ``sources``), links and sources limited to units the caller sees (audience, and a
    purpose as below). A forgotten unit is returned as its tombstone (empty text,
    ``forgotten`` true).

    ``purpose`` (optional): read for that purpose — it must be one of the configured set
    (400 ``unknown_purpose``, as recall), granted to the caller on the bank (403
    ``purpose_not_granted``) and carried by the unit (else 404). Without it the unit must
    carry at least one purpose granted to the caller on the bank (else 404); the
    unrestricted principal (auth off) sees every purpose (:mod:`rcll.access.visibility`).
    Raises 403 ``forbidden`` (no read role), 400 ``invalid_unit_id``, 404 ``bank_not_found``,
    404 ``unit_not_found`` (missing, in another bank, or invisible to the caller: one answer).
    Runs in a READ ONLY transaction on the read pool — or the read replica when it has
    replayed the bank's last write (:mod:`rcll.replica`); writes nothing.
    """
    principal.require(bank_id, "read")
    uid = rules.unit_id(unit_id)
    if purpose is not None and purpose not in ctx.purposes:
        raise unknown_purpose([purpose], ctx.purposes)  # 400, as recall answers it
    if purpose is not None and purpose not in principal.purposes(bank_id):
        raise Rejected(403, "purpose_not_granted",
                       f"purpose {purpose!r} is not granted to this key on bank {bank_id!r}",
                       {"purpose": purpose, "granted": list(principal.purposes(bank_id))})
    with read_only(ctx.recall_pool(bank_id)) as conn:
        banks.get(conn, bank_id)
        row = conn.execute("SELECT audience, purposes FROM memory_units WHERE id = %s "
                           "AND bank_id = %s", (uid, bank_id)).fetchone()
        rules.visible_row(principal, bank_id, uid, row, purpose)
        return memories.get(conn, bank_id, uid, visible=rules.seen(principal, bank_id, purpose))


def history(ctx: LifecycleContext, principal: Principal, bank_id: str, unit_id: str) -> dict:
    """The unit's history for a unit the caller may read (the rule of :func:`read`):
    ``{"revision" (current), "state" ("valid", "superseded", "invalidated" or
    "forgotten"), "invalidated_reason", "superseded_by" (the unit that replaced it, or
    None), "supersedes" (the units it replaced), "revisions" (its earlier revisions,
    :func:`rcll.store.unit_edits.revisions`, newest first; a forgotten unit has none
    left), "feedback" ({"success", "failure", "worth"}, :func:`rcll.store.feedback.counts`)}``.
    ``superseded_by`` and each of ``supersedes`` is ``{"id", "revision", "created_at"}``,
    only for units the caller sees (another's is left out, as in a unit's links). Raises as
    :func:`read`: 403 ``forbidden``, 400 ``invalid_unit_id``, 404 ``bank_not_found`` /
    ``unit_not_found``. READ ONLY transaction on the read pool."""
    principal.require(bank_id, "read")
    uid = rules.unit_id(unit_id)
    with read_only(ctx.read_pool) as conn:
        banks.get(conn, bank_id)
        row = conn.execute(
            "SELECT audience, purposes, revision, superseded_by_id, invalidated_reason, "
            "forgotten_at FROM memory_units WHERE id = %s AND bank_id = %s",
            (uid, bank_id)).fetchone()
        rules.visible_row(principal, bank_id, uid, row, None)
        seen, params = rules.seen(principal, bank_id)
        newer = conn.execute(
            f"""SELECT o.id::text AS id, o.revision, o.created_at FROM memory_units o
                WHERE o.id = %(by)s AND {seen}""",
            {**params, "by": row["superseded_by_id"]}).fetchone() \
            if row["superseded_by_id"] else None
        older = conn.execute(
            f"""SELECT o.id::text AS id, o.revision, o.created_at FROM memory_units o
                WHERE o.superseded_by_id = %(u)s AND {seen} ORDER BY o.created_at, o.id""",
            {**params, "u": uid}).fetchall()
        state = ("forgotten" if row["forgotten_at"] else "superseded"
                 if row["superseded_by_id"] else "invalidated" if row["invalidated_reason"]
                 else "valid")

        def ref(r: dict) -> dict:
            return {"id": r["id"], "revision": r["revision"],
                    "created_at": r["created_at"].isoformat()}

        return {"revision": row["revision"], "state": state,
                "invalidated_reason": row["invalidated_reason"],
                "superseded_by": ref(newer) if newer else None,
                "supersedes": [ref(r) for r in older],
                "revisions": unit_edits.revisions(conn, uid),
                "feedback": feedback.counts(conn, uid)}
