"""The retain pipeline as data: one ordered table of stages (name, queue, function).

The Celery tasks (one per stage, named ``retain.<stage>``), the synchronous path and the
recovery sweep all read this table, so adding a stage (entity resolution, consolidation) is
one entry here. A stage function takes ``(RetainContext, job_id)`` and returns the counts to
merge into the job, or ``None`` when the job must not continue (gone, ended or failed). The
runner then moves the job on (:func:`advance`): to the next stage, or to its end
(:func:`rcll.retain.pipeline.finish_job`) after the last one.

Order: ``chunk`` (chunk, classify, store; queue ``extract``) → ``extract`` (LLM facts; a no-op
in chunk mode) → ``entities`` (deterministic + LLM entity names, resolution, entity and
temporal links) → ``embed`` (queue ``embed``) → ``link`` (semantic links, after embedding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rcll.consolidate import closets
from rcll.files import stage as file_stage
from rcll.retain import entity_stage, extraction, link_stage, pipeline
from rcll.retain.pipeline import RetainContext
from rcll.transfer import embed as transfer_embed


@dataclass(frozen=True)
class Stage:
    """One pipeline step: ``name`` is what ``jobs.stage`` shows while it runs, ``queue`` the
    Celery queue whose workers run it, ``run(ctx, job_id) -> dict | None`` the work."""

    name: str
    queue: str
    run: Callable[[RetainContext, str], dict | None]
    task: str | None = None  # a task name other than retain.<name> (jobs of other kinds)

    @property
    def task_name(self) -> str:
        """The stable Celery task name, ``retain.<name>`` unless ``task`` names another."""
        return self.task or f"retain.{self.name}"


STAGES: tuple[Stage, ...] = (
    Stage("chunk", "extract", pipeline.run_chunk),
    Stage("extract", "extract", extraction.run_extract),
    Stage("entities", "extract", entity_stage.run_entities),
    Stage("embed", "embed", pipeline.run_embed),
    Stage("link", "embed", link_stage.run_link),
)

# Jobs of other kinds run one leased step that ends the job itself (returns None); the job's
# ``stage`` names it from creation, so the recovery sweep re-sends it here (:func:`by_name`).
JOB_STEPS: dict[str, Stage] = {
    closets.STAGE: Stage(closets.STAGE, "consolidate", closets.run_closets,
                         task="consolidate.closets"),
    # a file job's first step: convert the file, then it goes on at ``chunk`` (rcll.files)
    file_stage.STAGE: Stage(file_stage.STAGE, "extract", file_stage.run_convert,
                            task=file_stage.TASK),
    # an import's units that came without a usable vector (rcll.transfer)
    transfer_embed.STAGE: Stage(transfer_embed.STAGE, "embed", transfer_embed.run_import_embed,
                                task=transfer_embed.TASK),
}


# Seconds before each retry of a stage that met a database outage (rcll.db.is_transient):
# 1+2+4+8+15+30*6 = 210 s in all, enough to ride out a restart of a minute or two. Stages
# are idempotent, so a retry replays the stage from its start.
RETRY_DELAYS_S: tuple[int, ...] = (1, 2, 4, 8, 15, 30, 30, 30, 30, 30, 30)


def retry_delay(retries: int) -> int | None:
    """Seconds to wait before retry number ``retries + 1``, or ``None`` when spent."""
    return RETRY_DELAYS_S[retries] if retries < len(RETRY_DELAYS_S) else None


def first() -> Stage:
    """The stage a new job starts with."""
    return STAGES[0]


def by_name(name: str | None) -> Stage:
    """The stage called ``name``; an unknown or empty name means the first stage (a job
    that never started). Raises nothing."""
    for stage in STAGES:
        if stage.name == name:
            return stage
    if name in JOB_STEPS:
        return JOB_STEPS[name]
    return STAGES[0]


ALWAYS_RUN = frozenset({"chunk", "embed"})


def after(name: str, skip: frozenset[str] = frozenset()) -> Stage | None:
    """The stage that follows ``name`` (passing over the names in ``skip``, except the
    stages that always run: ``chunk`` and ``embed``), or ``None`` after the last one."""
    names = [s.name for s in STAGES]
    for stage in STAGES[names.index(name) + 1:]:
        if stage.name in ALWAYS_RUN or stage.name not in skip:
            return stage
    return None


def advance(ctx: RetainContext, job_id: str, stage: Stage, counts: dict) -> Stage | None:
    """After ``stage`` returned ``counts``: merge them and set the job's stage to the next
    one (returned, to be sent), or end the job after the last stage (returns ``None``).
    Call it while holding the stage's lease."""
    from rcll.store import jobs
    from rcll.telemetry import logs, metrics

    metrics.stage_done(stage.name, counts, logs.current_job().get("items") or counts.get("items"))
    nxt = after(stage.name, ctx.skip_stages)
    if nxt is None:
        pipeline.finish_job(ctx, job_id, counts)
        return None
    with ctx.pool.connection() as conn:
        jobs.progress(conn, job_id, counts, stage=nxt.name)
    return nxt


def run_sync(ctx: RetainContext, job_id: str) -> None:
    """Run every stage in order in this process (the ``async: false`` path), each under a
    job lease (:mod:`rcll.retain.lease`) so the recovery sweep does not re-send it meanwhile."""
    from rcll.retain import lease

    stage: Stage | None = STAGES[0]
    while stage is not None:
        with lease.hold(ctx.pool, job_id, stage.name, first=stage is STAGES[0]) as held:
            if not held:
                return
            counts = stage.run(ctx, job_id)
            if counts is None:
                return
            stage = advance(ctx, job_id, stage, counts)
