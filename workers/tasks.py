"""Named tasks. Each re-reads its job by id and hands the work to ``rcll.retain.pipeline``."""

from __future__ import annotations

import logging
import threading
import time

from celery.signals import worker_process_init, worker_ready

from rcll.bootstrap import Services, bootstrap
from rcll.db import is_transient
from rcll.retain import pipeline, stages
from rcll.retain.stages import Stage
from rcll.store import jobs
from workers.celery_app import app

log = logging.getLogger(__name__)
_services: Services | None = None


@worker_process_init.connect
def _fresh_services(**_) -> None:  # pools must not cross a fork
    global _services
    _services = None


def services() -> Services:
    global _services
    if _services is None:
        _services = bootstrap()
    return _services


def _run(task, stage: str, fn, job_id: str):
    ctx = services().retain_context()
    try:
        return fn(ctx, job_id)
    except Exception as exc:
        if not is_transient(exc):
            log.exception("%s failed for job %s", stage, job_id)
            pipeline.fail(ctx, job_id, f"{stage}: {type(exc).__name__}: {exc}")
            raise
        delay = stages.retry_delay(task.request.retries)  # database away: wait and resume
        if delay is not None:
            log.warning("%s for job %s: database unavailable (%s); retry in %s s",
                        stage, job_id, exc, delay)
            raise task.retry(exc=exc, countdown=delay, max_retries=len(stages.RETRY_DELAYS_S))
        pipeline.fail(ctx, job_id, f"{stage}: database unavailable: {exc}")
        raise


def _register(stage: Stage):
    """One Celery task per retain stage: run it, then enqueue the next stage."""

    @app.task(name=stage.task_name, bind=True, max_retries=len(stages.RETRY_DELAYS_S))
    def task(self, job_id: str) -> None:
        if _run(self, stage.name, stage.run, job_id) is not None:
            nxt = stages.after(stage.name)
            if nxt is not None:
                app.send_task(nxt.task_name, args=[job_id], queue=nxt.queue)

    task.__doc__ = f"Retain stage {stage.name!r} for a job id (queue {stage.queue!r})."
    return task


TASKS = {stage.name: _register(stage) for stage in stages.STAGES}


def sweep_stale_jobs(svc: Services, celery=None) -> list[str]:
    """Re-enqueue running jobs whose worker died (no progress for ``job_stale_after_s``)
    through ``celery`` (default: this worker's app). Returns the re-enqueued job ids."""
    celery = celery or app
    with svc.pool.connection() as conn:
        stale = jobs.claim_stale(conn, svc.settings.job_stale_after_s)
    for job in stale:
        stage = stages.by_name(job["stage"])
        celery.send_task(stage.task_name, args=[str(job["id"])], queue=stage.queue)
        log.warning("re-enqueued stale job %s at stage %s", job["id"], job["stage"])
    return [str(j["id"]) for j in stale]


@worker_ready.connect
def _start_sweeper(**_) -> None:
    """A daemon thread in the worker's main process; redelivery no longer waits for the
    broker's visibility timeout when a worker dies mid-job."""
    svc = bootstrap()

    def loop() -> None:
        while True:
            try:
                sweep_stale_jobs(svc)
            except Exception:
                log.exception("stale-job sweep failed")
            time.sleep(svc.settings.job_sweep_interval_s)

    threading.Thread(target=loop, name="rcll-job-sweeper", daemon=True).start()
