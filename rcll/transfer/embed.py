"""The ``import_embed`` step: vectors for the units an import (or a clone) wrote without one.

An import commits its units in one transaction; the units whose export carried no vector,
or a vector of another embedder, are embedded afterwards by this step (queue ``embed``,
task ``transfer.embed``), as a retain's are (spec §1.3: vectors are a derived index).
Meanwhile they are searchable lexically. The step ends the import's job: ``succeeded``, or
``partial`` with the reason when the embedder cannot load (``rcll embeddings rebuild``
fills the gap later).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rcll.cascade import invalidation
from rcll.retain import pipeline
from rcll.store import jobs

if TYPE_CHECKING:
    from rcll.retain.pipeline import RetainContext

STAGE = "import_embed"
TASK = "transfer.embed"


def run_import_embed(ctx: RetainContext, job_id: str,
                     on_batch: Callable[[int], None] | None = None) -> None:
    """Embed the job's units that lack a vector for the current model and input stamp, then
    end the job (module doc); ``on_batch(units embedded so far)`` after each batch. ``None``
    always: the step ends the job itself."""
    job = pipeline.live_job(ctx, job_id)
    if job is None:
        return None
    with ctx.pool.connection() as conn:
        jobs.start(conn, job_id, STAGE)
    counts = dict(job["counts"])
    bank_id = counts.get("bank_id") or job["bank_id"]
    if ctx.embedder.get() is None:
        warning = pipeline.skipped_without_embedder(ctx, counts, "embedding")
        with ctx.pool.connection() as conn:
            jobs.finish(conn, job_id, "partial", warning, "; ".join(warning["warnings"]))
        return None
    done = int(counts.get("units_embedded", 0))

    def report(n: int) -> None:
        with ctx.pool.connection() as conn:
            jobs.progress(conn, job_id, {"units_embedded": done + n})
        if on_batch is not None:
            on_batch(n)

    n = pipeline.embed_missing(ctx, job_id=job_id, on_batch=report)
    with ctx.pool.connection() as conn:
        jobs.finish(conn, job_id, "succeeded", {"units_embedded": done + n})
    invalidation.bank_written(ctx.hot, bank_id)
    return None
