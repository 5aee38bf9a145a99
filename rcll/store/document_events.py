"""A document lineage's history (migration 0026): one ``document_events`` row per change —
each version applied (``retain``; ``reprocess`` for a version re-made from the stored one,
a job whose counts carry ``reprocess``) and each retag — plus, read from the audit log, the
lifecycle verbs run on its units (``fact_edited``: correct, ``fact_invalidated``:
supersede, ``fact_deleted``: forget). Written in the transaction of the change it
records; read through the caller's visibility rule like the document itself."""

from __future__ import annotations

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.access.visibility import EVERYONE, Rule

# audit actions on a document's units -> Hindsight's event kinds
VERB_KINDS = {"unit.correct": "fact_edited", "unit.supersede": "fact_invalidated",
              "unit.forget": "fact_deleted"}


def record_version(conn: Connection, document_pk: str, revision: int, job_id: str,
                   added: int, removed: int) -> None:
    """Record that job ``job_id`` applied ``revision`` of the lineage ``document_pk``
    (``added`` units created, ``removed`` replaced): one event per revision — a redelivered
    job adds its counts to the same row. The kind and the writer come from the job row
    (``counts.reprocess``, ``submitted_by``); nothing is recorded for a job that is gone."""
    conn.execute(
        """INSERT INTO document_events (document_id, kind, revision, operation_id, actor,
                                        units_added, units_removed)
           SELECT %(doc)s, CASE WHEN j.counts ? 'reprocess' THEN 'reprocess' ELSE 'retain' END,
                  %(rev)s, j.id, j.submitted_by, %(added)s, %(removed)s
           FROM jobs j WHERE j.id = %(job)s
           ON CONFLICT (document_id, revision) WHERE kind IN ('retain', 'reprocess')
             DO UPDATE SET units_added = document_events.units_added + EXCLUDED.units_added,
                           units_removed = document_events.units_removed
                                           + EXCLUDED.units_removed""",
        {"doc": document_pk, "rev": revision, "job": job_id, "added": added,
         "removed": removed})


def record_retag(conn: Connection, document_pk: str, actor: str | None, tags: list[str],
                 units: int) -> None:
    """Record a retag of the lineage ``document_pk`` (its tags are now ``tags``, on
    ``units`` units) by ``actor``, at the lineage's current revision."""
    conn.execute(
        """INSERT INTO document_events (document_id, kind, revision, actor, details)
           SELECT d.id, 'retag', d.revision, %s, %s FROM documents d WHERE d.id = %s""",
        (actor, Jsonb({"tags": tags, "units": units}), document_pk))


def _iso(v):
    return v.isoformat() if v is not None else None


def page(conn: Connection, document_pk: str, limit: int, offset: int, *,
         rule: Rule = EVERYONE) -> tuple[list[dict], int]:
    """The lineage's events, newest first (ties by kind of record, then id), and their
    total: ``[{"kind", "revision", "operation_id", "actor", "unit_id", "units_added",
    "units_removed", "details", "at"}]`` — the recorded events and the lifecycle verbs the
    audit log holds for its units the rule lets the caller see (tombstones included: a
    forget is a change too; ``unit_id`` names the unit, ``details`` the revisions)."""
    vis, params = rule.sql("u", "vis")
    params.update({"doc": document_pk, "limit": limit, "offset": offset,
                   "actions": list(VERB_KINDS)})
    union = f"""
        SELECT e.kind, e.revision, e.operation_id::text AS operation_id, e.actor,
               NULL::text AS unit_id, e.units_added, e.units_removed, e.details, e.at,
               0 AS src, e.id
        FROM document_events e WHERE e.document_id = %(doc)s
        UNION ALL
        SELECT a.action, NULL, NULL, a.actor, a.unit_id::text, 0,
               CASE WHEN a.action = 'unit.correct' THEN 0 ELSE 1 END, a.details, a.at, 1, a.id
        FROM audit_log a JOIN memory_units u ON u.id = a.unit_id
        WHERE u.document_id = %(doc)s AND a.action = ANY(%(actions)s) AND {vis}"""
    rows = conn.execute(f"""SELECT * FROM ({union}) h ORDER BY at DESC, src DESC, id DESC
                            LIMIT %(limit)s OFFSET %(offset)s""", params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM ({union}) h", params).fetchone()["n"]
    out = []
    for r in rows:
        details = dict(r["details"] or {})
        if r["src"] == 1:  # an audit entry: only the revisions, never a reason's text
            details = {k: details[k] for k in ("from_revision", "to_revision", "new_unit_id")
                       if k in details}
        out.append({"kind": VERB_KINDS.get(r["kind"], r["kind"]), "revision": r["revision"],
                    "operation_id": r["operation_id"], "actor": r["actor"],
                    "unit_id": r["unit_id"], "units_added": int(r["units_added"]),
                    "units_removed": int(r["units_removed"]), "details": details,
                    "at": _iso(r["at"])})
    return out, int(total)
