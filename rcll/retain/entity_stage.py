"""The ``entities`` retain stage: name extraction, per-bank resolution, entity and temporal links.

For the units a job created (chunks, and facts the ``extract`` stage derived), a batch of
:data:`BATCH` units at a time, in creation order:

1. outside any lock: the deterministic extractor (:func:`rcll.entities.extractor.extract`,
   text + item metadata) plus the names an LLM gave (``memory_units.entity_names``);
2. one transaction per batch: the job row lock (:func:`rcll.store.jobs.lock_for_work`, so a
   deleted bank gets nothing), then the bank's entity lock (a transaction-scoped advisory
   lock, :func:`rcll.store.entities.lock_bank`) — concurrent jobs of one bank resolve one at
   a time, other banks and every other stage stay parallel — then set-based resolution,
   mentions, entity links and temporal links.

Links (``memory_links``, written once):

- ``entity`` — co-mention: each mention links its unit to the :data:`ENTITY_LINKS_PER_MENTION`
  most recent other units that mention the same entity (bounded so a speaker named in every
  turn does not make a quadratic graph);
- ``temporal`` — each unit to the :data:`TEMPORAL_LINKS_PER_UNIT` units just before it on the
  bank's timeline within :data:`TEMPORAL_WINDOW_S` (a LoCoMo session's turns share a time,
  so these are the preceding turns of the session), or the previous chunk of its document
  when it has no time (:func:`rcll.store.entity_links.temporal`).

Idempotent: a replay re-resolves names to the entities it created, and every insert is
``ON CONFLICT DO NOTHING``. Runs in every mode (chunk mode included).
"""

from __future__ import annotations

import logging

from rcll.entities.extractor import Mention, extract, normalize
from rcll.retain import pipeline
from rcll.retain.pipeline import RetainContext
from rcll.store import entities, entity_links, jobs, neighbour_length

log = logging.getLogger(__name__)
BATCH = 500
ENTITY_LINKS_PER_MENTION = 5
TEMPORAL_LINKS_PER_UNIT = 2
TEMPORAL_WINDOW_S = 3600.0
MAX_NAME_CHARS = 200


def unit_mentions(unit: dict) -> list[tuple[Mention, str]]:
    """The entities of one unit ``{"text", "metadata", "entity_names"}`` as ``(mention,
    source)``: the deterministic extractor's (``deterministic``) then the LLM's names not
    already found (``llm``). One per normalized name."""
    out: dict[str, tuple[Mention, str]] = {}
    for m in extract(unit["text"], unit.get("metadata") or {}):
        out.setdefault(m.normalized, (m, "deterministic"))
    for name in unit.get("entity_names") or ():
        name = name.strip()[:MAX_NAME_CHARS]
        norm = normalize(name)
        if len(norm) >= 2:
            out.setdefault(norm, (Mention(name, norm, "other"), "llm"))
    return list(out.values())


def _units(ctx: RetainContext, job_id: str, after: tuple | None) -> list[dict]:
    with ctx.pool.connection() as conn:
        return conn.execute(
            """SELECT id, text, metadata, entity_names, created_at FROM memory_units
               WHERE job_id = %s AND (%s::timestamptz IS NULL OR (created_at, id) > (%s, %s))
               ORDER BY created_at, id LIMIT %s""",
            (job_id, after and after[0], after and after[0], after and after[1], BATCH)).fetchall()


def write_batch(conn, bank_id: str, batch: list[tuple[str, list[tuple[Mention, str]]]]) -> dict:
    """Resolve and store one batch ``[(unit_id, [(mention, source)])]`` (units in creation
    order) under the bank's entity lock; returns the counts written. Run in a transaction."""
    entities.lock_bank(conn, bank_id)
    names: dict[str, tuple[str, str]] = {}
    for _, found in batch:
        for m, _src in found:
            names.setdefault(m.normalized, (m.surface, m.entity_type))
    res = entities.resolve(conn, bank_id, names)
    unit_ids = [u for u, _ in batch]
    ent_ids = sorted({res.ids[m.normalized] for _, found in batch for m, _ in found})
    history = entities.recent_mentions(conn, ent_ids, unit_ids, ENTITY_LINKS_PER_MENTION)
    rows, links = [], []
    for unit_id, found in batch:
        seen = set()
        for m, src in found:
            eid = res.ids[m.normalized]
            if eid in seen:  # two names of one unit resolved to one entity
                continue
            seen.add(eid)
            rows.append((unit_id, eid, m.surface, src))
            before = history.setdefault(eid, [])
            links += [(unit_id, other, 1.0) for other in before[-ENTITY_LINKS_PER_MENTION:]]
            before.append(unit_id)
    mentions = entities.add_mentions(conn, bank_id, rows)
    return {"entities_created": res.created, "entity_mentions": mentions,
            "entity_proposals": res.proposals,
            "entity_links": entity_links.insert(conn, bank_id, "entity", links),
            "temporal_links": entity_links.temporal(conn, unit_ids, TEMPORAL_WINDOW_S,
                                                    TEMPORAL_LINKS_PER_UNIT)}


def run_entities(ctx: RetainContext, job_id: str) -> dict | None:
    """The stage function (see the module doc). Returns the counts to merge into the job
    (``entities_created``, ``entity_mentions``, ``entity_proposals``, ``entity_links``,
    ``temporal_links``: added over this job's runs), or ``None`` when the job is gone or
    ended. Database errors propagate (the task retries transient ones)."""
    job = pipeline.live_job(ctx, job_id)
    if job is None:
        return None
    bank_id = job["bank_id"]
    counts = {k: int(job["counts"].get(k, 0)) for k in
              ("entities_created", "entity_mentions", "entity_proposals", "entity_links",
               "temporal_links")}
    after = None
    while units := _units(ctx, job_id, after):
        after = (units[-1]["created_at"], units[-1]["id"])
        batch = [(str(u["id"]), unit_mentions(u)) for u in units]
        with ctx.pool.connection() as conn, conn.transaction():
            if jobs.lock_for_work(conn, job_id) is None:
                log.warning("entities for job %s stopped: the job or its bank is gone", job_id)
                return None
            written = write_batch(conn, bank_id, batch)
            for k, v in written.items():
                counts[k] += v
            last = len(units) < BATCH  # the last batch: the runner merges the counts
            if not last:
                jobs.progress(conn, job_id, counts)  # with the batch: a replay adds on top
        # the batch's links are committed: refresh the neighbour lengths they made stale, in
        # a short transaction of its own that waits for no lock (rcll.store.neighbour_length)
        with ctx.pool.connection() as conn, conn.transaction():
            neighbour_length.drain(conn)
        if last:
            break
    return counts
