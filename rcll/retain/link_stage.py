"""The ``link`` stage (after ``embed``): semantic links from a job's new units (spec §4.5).

Each live unit the job created that has a vector is linked to its ``top_k`` most similar
other live units of its bank with cosine ≥ ``min_cosine`` (weight = cosine). Search, by the
size of the bank (benchmarks/link_stage.py, figures in
docs/decisions/0011-semantic-link-floor.md):

- up to :data:`EXACT_MAX_VECTORS` vectors: exact, in memory — the bank's live vectors are
  read once (binary COPY), a matrix product per batch of the job's units, top-k by
  ``numpy.argpartition``, all links inserted in one statement;
- above, or when the bank has its own HNSW index and the job is small (reading the bank
  would cost more than one graph search per unit: :func:`use_sql`): a LATERAL kNN per
  batch of units in SQL (:func:`rcll.store.links.write_semantic`) through that index.

Defaults ``RCLL_SEMANTIC_LINK_TOP_K`` = 5 and ``RCLL_SEMANTIC_LINK_MIN_COSINE`` = 0.60, from
the cosines of all-MiniLM-L6-v2 over LoCoMo turns (benchmarks/link_cosines.py, output in
benchmarks/results/link_cosines.txt; docs/decisions/0011-semantic-link-floor.md): the floor
is the p90 of all turn pairs' cosines.

Idempotent: links are keyed ``(from_unit, to_unit, type)`` and written ``ON CONFLICT DO
NOTHING``, so a replayed stage writes nothing twice. Each batch is written under the job's
row lock (:func:`rcll.store.jobs.lock_for_work`): nothing is written for a job whose bank is
gone. No embedder → the stage is skipped with a job warning (the job ends ``partial``).
"""

from __future__ import annotations

import logging

import numpy as np

from rcll.retain import pipeline
from rcll.retain.pipeline import RetainContext
from rcll.store import jobs, links, units

log = logging.getLogger(__name__)
BATCH = 128  # units per kNN statement (SQL path)
EXACT_BATCH = 512  # job units per matrix product: 512 × 20,000 float32 = 41 MB at most
# Banks up to this many vectors are searched exactly in memory: 20,000 × 384 float32 = 31 MB
# read per job. Above it the bank has (or soon gets) its own HNSW index, searched in SQL.
EXACT_MAX_VECTORS = 20_000
# Measured by benchmarks/link_stage.py on all of LoCoMo in one bank (5,882 vectors, 2 busy
# cores): a kNN through the bank's HNSW index costs ~2 ms per unit (ef_search 40: 554
# units/s), reading the bank's vectors for the in-memory search ~25 µs per vector.
HNSW_S_PER_UNIT = 0.002
READ_S_PER_VECTOR = 0.000025


def use_sql(n_bank: int, n_job: int, bank_indexed: bool) -> bool:
    """Whether to link a job of ``n_job`` units in a bank of ``n_bank`` vectors with the SQL
    kNN (else in memory): a bank too big to read, or one with its own HNSW index when
    ``n_job`` graph searches cost less than reading the bank."""
    if n_bank > EXACT_MAX_VECTORS:
        return True
    return bank_indexed and n_job * HNSW_S_PER_UNIT < n_bank * READ_S_PER_VECTOR


def top_k_pairs(ids: list[str], vecs: np.ndarray, rows: list[int], top_k: int,
                min_cosine: float) -> list[tuple[str, str, float]]:
    """For each row index in ``rows`` (the units to link), its ``top_k`` most similar other
    rows of ``vecs`` (n, dim; rows normalised here, so the dot product is the cosine) with
    cosine ≥ ``min_cosine``: ``(from id, to id, cosine)`` triples. Exact."""
    if not rows or len(ids) < 2 or top_k < 1:
        return []
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    unit = vecs / np.maximum(norms, 1e-12)
    k = min(top_k, len(ids) - 1)
    out: list[tuple[str, str, float]] = []
    for start in range(0, len(rows), EXACT_BATCH):
        batch = np.asarray(rows[start:start + EXACT_BATCH])
        sims = unit[batch] @ unit.T
        sims[np.arange(len(batch)), batch] = -np.inf  # not itself
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        cos = np.take_along_axis(sims, top, axis=1)
        keep_i, keep_j = np.nonzero(cos >= min_cosine)
        out += [(ids[s], ids[t], c) for s, t, c in zip(
            batch[keep_i].tolist(), top[keep_i, keep_j].tolist(), cos[keep_i, keep_j].tolist(),
            strict=True)]
    return out


def run_link(ctx: RetainContext, job_id: str, batch: int = BATCH) -> dict | None:
    """Write the semantic links of the units job ``job_id`` created (``ctx.semantic_link_top_k``
    per unit, cosine ≥ ``ctx.semantic_link_min_cosine``). Returns the counts
    (``semantic_links``: the job's units' semantic links, over every attempt;
    ``units_linked``: units looked at), a warning when the embedder is unavailable, or
    ``None`` when the job is gone or ended."""
    job = pipeline.live_job(ctx, job_id)
    if job is None:
        return None
    embedder = ctx.embedder.get()
    if embedder is None:
        return pipeline.skipped_without_embedder(ctx, job["counts"], "semantic links")
    model, bank_id = embedder.stamp, job["bank_id"]
    with ctx.pool.connection() as conn:
        sql_knn = use_sql(links.bank_vector_count(conn, bank_id, model),
                          units.count_for_job(conn, job_id), links.bank_has_hnsw(conn, bank_id))
    if sql_knn:
        out = _link_sql(ctx, job_id, bank_id, model, batch)
    else:
        out = _link_exact(ctx, job_id, bank_id, model)
    if out is None:
        log.warning("link for job %s stopped: the job or its bank is gone", job_id)
        return None
    seen, written = out
    with ctx.pool.connection() as conn:  # a replay finds its links there: count the job's
        total = links.count_for_job(conn, job_id, "semantic")
    log.info("link for job %s: %d units, %d semantic links written", job_id, seen, written)
    return {"semantic_links": total, "units_linked": seen}


def _link_exact(ctx: RetainContext, job_id: str, bank_id: str, model: str) -> tuple[int, int] | None:
    """In-memory exact search; ``(units looked at, links written)`` or ``None`` (job gone)."""
    with ctx.pool.connection() as conn, conn.transaction():
        if jobs.lock_for_work(conn, job_id) is None:
            return None
        ids, vecs = links.live_vectors(conn, bank_id, model)
        mine = set(links.job_units_with_vectors(conn, job_id, model, after=None, limit=None))
        rows = [i for i, uid in enumerate(ids) if uid in mine]
        pairs = top_k_pairs(ids, vecs, rows, ctx.semantic_link_top_k, ctx.semantic_link_min_cosine)
        return len(rows), links.insert_semantic(conn, bank_id, pairs)


def _link_sql(ctx: RetainContext, job_id: str, bank_id: str, model: str,
              batch: int) -> tuple[int, int] | None:
    """LATERAL kNN in SQL per batch of units; ``(units, links written)`` or ``None``."""
    written = seen = 0
    after: str | None = None
    while True:
        with ctx.pool.connection() as conn, conn.transaction():
            if jobs.lock_for_work(conn, job_id) is None:
                return None
            ids = links.job_units_with_vectors(conn, job_id, model, after=after, limit=batch)
            if not ids:
                return seen, written
            written += links.write_semantic(conn, bank_id=bank_id, unit_ids=ids, model=model,
                                            top_k=ctx.semantic_link_top_k,
                                            min_cosine=ctx.semantic_link_min_cosine)
        seen += len(ids)
        after = ids[-1]
