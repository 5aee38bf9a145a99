"""The ``link`` stage (after ``embed``): semantic links from a job's new units (spec §4.5).

Each live unit the job created that has a vector is linked to its ``top_k`` most similar
other live units of its bank with cosine ≥ ``min_cosine`` (weight = cosine), by
:func:`rcll.store.links.write_semantic`, one statement per batch of units.

Defaults ``RCLL_SEMANTIC_LINK_TOP_K`` = 5 and ``RCLL_SEMANTIC_LINK_MIN_COSINE`` = 0.60, from
the cosines of all-MiniLM-L6-v2 over three LoCoMo conversations (1,451 turns, one unit per
turn; benchmarks/link_cosines.py, output in benchmarks/results/link_cosines.txt): all turn
pairs p50 0.40, p90 0.59, p99 0.73 (the shared ``Speaker:`` prefix lifts every pair), a
turn's 5th neighbour p50 0.67. 0.60 is the p90 of all pairs — a link is more similar than
nine in ten of the conversation's pairs — and keeps 4.3 of 5 links per turn (5% of turns
get none); 0.70 would keep 2.6 and leave 30% of turns unlinked.

Idempotent: links are keyed ``(from_unit, to_unit, type)`` and written ``ON CONFLICT DO
NOTHING``, so a replayed stage writes nothing twice. Each batch is written under the job's
row lock (:func:`rcll.store.jobs.lock_for_work`): nothing is written for a job whose bank is
gone. No embedder → the stage is skipped with a job warning (the job ends ``partial``).
"""

from __future__ import annotations

import logging

from rcll.retain.pipeline import RetainContext
from rcll.store import jobs, links

log = logging.getLogger(__name__)
BATCH = 128  # units per kNN statement


def run_link(ctx: RetainContext, job_id: str, batch: int = BATCH) -> dict | None:
    """Write the semantic links of the units job ``job_id`` created (``ctx.semantic_link_top_k``
    per unit, cosine ≥ ``ctx.semantic_link_min_cosine``). Returns the counts
    (``semantic_links``: the job's units' semantic links, over every attempt;
    ``units_linked``: units looked at), a warning when the embedder is unavailable, or
    ``None`` when the job is gone or ended."""
    with ctx.pool.connection() as conn:
        try:
            job = jobs.get(conn, job_id)
        except Exception:
            return None
        if job["state"] in jobs.TERMINAL:
            return None
    counts = dict(job["counts"])
    embedder = ctx.embedder.get()
    if embedder is None:
        return {"warnings": [*counts.get("warnings", []),
                             f"semantic links skipped, embedder unavailable: {ctx.embedder.error}"]}
    model, bank_id = embedder.model_name, job["bank_id"]
    written = seen = 0
    after: str | None = None
    while True:
        with ctx.pool.connection() as conn, conn.transaction():
            if jobs.lock_for_work(conn, job_id) is None:
                log.warning("link for job %s stopped: the job or its bank is gone", job_id)
                return None
            ids = links.job_units_with_vectors(conn, job_id, model, after=after, limit=batch)
            if not ids:
                break
            written += links.write_semantic(conn, bank_id=bank_id, unit_ids=ids, model=model,
                                            top_k=ctx.semantic_link_top_k,
                                            min_cosine=ctx.semantic_link_min_cosine)
        seen += len(ids)
        after = ids[-1]
    with ctx.pool.connection() as conn:  # a replay finds its links there: count the job's
        total = links.count_for_job(conn, job_id, "semantic")
    log.info("link for job %s: %d units, %d semantic links written", job_id, seen, written)
    return {"semantic_links": total, "units_linked": seen}
