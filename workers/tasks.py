"""Named tasks. Each stage task re-reads its job by id, takes the job's lease and hands the
work to ``rcll.retain``; ``maintenance.sweep_jobs`` (run by beat) re-sends what the broker lost."""

from __future__ import annotations

import dataclasses
import functools
import logging

import psycopg
from celery.signals import task_postrun, task_prerun, worker_process_init, worker_process_shutdown

from rcll.bootstrap import Services, bootstrap
from rcll.consolidate import closets, dedup
from rcll.db import is_transient
from rcll.errors import BankNotFound
from rcll.files import stage as file_stage
from rcll.retain import lease, pipeline, recovery, stages
from rcll.retain.stages import Stage
from rcll.store import neighbour_length, vector_index
from rcll.transfer import embed as transfer_embed
from workers.celery_app import app
from workers.queues import (
    CLOSET_CHECK_TASK,
    CLOSETS_TASK,
    DEDUP_SCAN_TASK,
    DEDUP_SWEEP_TASK,
    HEBBIAN_DECAY_TASK,
    LLM_LOG_PURGE_TASK,
    SWEEP_TASK,
    VECTOR_INDEX_TASK,
    WEBHOOK_DELIVER_TASK,
    WEBHOOK_DISPATCH_TASK,
    QueueNames,
)

log = logging.getLogger(__name__)
_services: Services | None = None


@worker_process_init.connect
def _fresh_services(**_) -> None:  # pools must not cross a fork
    global _services
    _services = None


@worker_process_shutdown.connect
def _close_services(**_) -> None:  # the LLM request log's last entries, then the pools
    if _services is not None:
        try:
            _services.close()
        except Exception:
            log.warning("closing the services at shutdown failed", exc_info=True)


def services() -> Services:
    global _services
    if _services is None:
        _services = bootstrap(worker=True)
    return _services


_core_tokens: dict[str, list[int]] = {}  # task id -> the core token its process holds


@task_prerun.connect
def _take_core(task_id=None, **_) -> None:
    """A running task holds one core token, so the embedder of another pool process does not
    borrow this process's core (rcll.models.cores)."""
    leases = services().core_leases
    if leases is not None and task_id:
        _core_tokens[task_id] = leases.acquire()


@task_postrun.connect
def _give_core(task_id=None, **_) -> None:
    tokens = _core_tokens.pop(task_id, None)
    leases = services().core_leases
    if tokens and leases is not None:
        leases.release(tokens)


def _run(task, stage: Stage, job_id: str) -> Stage | None:
    """Run ``stage`` and move the job on; returns the next stage to send, or ``None``."""
    ctx = services().retain_context()
    try:
        counts = stage.run(ctx, job_id)
        return None if counts is None else stages.advance(ctx, job_id, stage, counts)
    except Exception as exc:
        if not is_transient(exc):
            log.exception("%s failed for job %s", stage.name, job_id)
            pipeline.fail(ctx.pool, job_id, f"{stage.name}: {type(exc).__name__}: {exc}")
            raise
        delay = stages.retry_delay(task.request.retries)  # database away: wait and resume
        if delay is not None:
            log.warning("%s for job %s: database unavailable (%s); retry in %s s",
                        stage.name, job_id, exc, delay)
            raise task.retry(exc=exc, countdown=delay, max_retries=len(stages.RETRY_DELAYS_S))
        pipeline.fail(ctx.pool, job_id, f"{stage.name}: database unavailable: {exc}")
        raise


def _register(stage: Stage):
    """One Celery task per retain stage: under the job's lease (a duplicate message for a job
    running elsewhere or already past this stage does nothing), run it, then send the next."""

    @app.task(name=stage.task_name, bind=True, max_retries=len(stages.RETRY_DELAYS_S))
    def task(self, job_id: str) -> None:
        svc = services()
        s = svc.settings
        try:
            with lease.hold(svc.pool, job_id, stage.name, first=stage is stages.first(),
                            lease_s=s.job_stale_after_s,
                            owner=lease.new_owner(self.request.id)) as held:
                nxt = _run(self, stage, job_id) if held else None
        except psycopg.OperationalError as exc:  # could not take or release the lease
            raise self.retry(exc=exc, countdown=2 ** min(self.request.retries, 5))
        if nxt is not None:  # if this send is lost, the sweep re-sends after the grace
            app.send_task(nxt.task_name, args=[job_id], queue=nxt.queue)

    task.__doc__ = f"Retain stage {stage.name!r} for a job id (queue {stage.queue!r})."
    return task


TASKS = {stage.name: _register(stage) for stage in stages.STAGES}


def sweep_jobs(svc: Services, celery=None) -> list[str]:
    """Re-send lost jobs (:func:`rcll.retain.recovery.resend_lost`) through ``celery``
    (default: this app). Returns the re-sent job ids."""
    celery = celery or app

    def send(stage: Stage, job_id: str) -> None:
        celery.send_task(stage.task_name, args=[job_id], queue=stage.queue)

    s = svc.settings
    return recovery.resend_lost(svc.pool, send, s.job_queued_grace_s,
                                max_lease_expiries=s.job_max_lease_expiries)


@app.task(name=SWEEP_TASK, ignore_result=True)
def sweep_jobs_task() -> int:
    """The beat-scheduled recovery sweep (queue ``maintenance``); returns how many it re-sent.
    It also refreshes the neighbour lengths that writes outside the retain pipeline (edits,
    forgets, document deletes) left stale (:func:`rcll.store.neighbour_length.drain_all`)."""
    svc = services()
    resent = sweep_jobs(svc)
    neighbour_length.drain_all(svc.pool)
    return len(resent)


@app.task(name=VECTOR_INDEX_TASK, ignore_result=True)
def vector_indexes_task() -> dict:
    """Beat-scheduled (queue ``maintenance``): give banks of ``vector_index_min_units``
    vectors or more their own HNSW index, drop deleted banks' ones
    (:func:`rcll.store.vector_index.ensure_bank_indexes`). Returns what it did."""
    s = services().settings
    report = vector_index.ensure_bank_indexes(s.db_url, min_units=s.vector_index_min_units)
    return {"created": report.created, "rebuilt": report.rebuilt, "dropped": report.dropped}


@app.task(name=DEDUP_SWEEP_TASK, ignore_result=True)
def dedup_sweep_task() -> int:
    """Beat-scheduled (queue ``consolidate``): enqueue ``consolidate.dedup_scan`` for every
    bank with units created after its last scan. Returns how many it enqueued."""
    due = dedup.banks_due(services().pool)
    for bank_id in due:
        app.send_task(DEDUP_SCAN_TASK, args=[bank_id], queue=QueueNames.CONSOLIDATE)
    return len(due)


@app.task(name=DEDUP_SCAN_TASK, bind=True, ignore_result=True, max_retries=5)
def dedup_scan_task(self, bank_id: str) -> dict | None:
    """One bank's dedup scan (:func:`rcll.consolidate.dedup.scan_bank`); a bank deleted
    meanwhile is skipped, a database outage retried with backoff."""
    svc = services()
    try:
        return dedup.scan_bank(svc.pool, bank_id, dedup.DedupSettings.from_settings(svc.settings))
    except BankNotFound:
        return None
    except Exception as exc:
        if is_transient(exc):
            raise self.retry(exc=exc, countdown=2 ** min(self.request.retries, 5))
        raise


def _run_job_step(task, step: Stage, job_id: str) -> None:
    """Run a job step that is not in the retain stage table (closets, convert) under the
    job's lease; a lease that cannot be taken or released (database away) retries the task
    with backoff (2^retries s, at most 32 s)."""
    svc = services()
    try:
        with lease.hold(svc.pool, job_id, step.name, first=False,
                        lease_s=svc.settings.job_stale_after_s,
                        owner=lease.new_owner(task.request.id)) as held:
            if held:
                _run(task, step, job_id)
    except psycopg.OperationalError as exc:
        raise task.retry(exc=exc, countdown=2 ** min(task.request.retries, 5))


@app.task(name=CLOSETS_TASK, bind=True, max_retries=len(stages.RETRY_DELAYS_S))
def closets_task(self, job_id: str) -> None:
    """A ``closets`` job (queue ``consolidate``) under the job's lease
    (:func:`rcll.consolidate.closets.run_closets`); it ends the job itself."""
    step = dataclasses.replace(stages.JOB_STEPS[closets.STAGE], run=functools.partial(
        closets.run_closets, max_units=services().settings.closet_max_units))
    _run_job_step(self, step, job_id)


@app.task(name=file_stage.TASK, bind=True, max_retries=len(stages.RETRY_DELAYS_S))
def convert_task(self, job_id: str) -> None:
    """A file job's ``convert`` step (queue ``extract``) under the job's lease
    (:func:`rcll.files.stage.run_convert`), then its ``chunk`` stage is sent; a file that
    cannot be converted ends the job ``failed`` there."""
    converted: list[dict] = []

    def run(ctx, jid: str) -> None:  # never advances through the retain stage table
        counts = file_stage.run_convert(ctx, jid)
        if counts is not None:
            converted.append(counts)

    step = dataclasses.replace(stages.JOB_STEPS[file_stage.STAGE], run=run)
    _run_job_step(self, step, job_id)
    if converted:  # if this send is lost, the sweep re-sends the job at chunk
        nxt = stages.first()
        app.send_task(nxt.task_name, args=[job_id], queue=nxt.queue)


@app.task(name=transfer_embed.TASK, bind=True, max_retries=len(stages.RETRY_DELAYS_S))
def transfer_embed_task(self, job_id: str) -> None:
    """An import's ``import_embed`` step (queue ``embed``) under the job's lease
    (:func:`rcll.transfer.embed.run_import_embed`); it ends the job itself."""
    _run_job_step(self, stages.JOB_STEPS[transfer_embed.STAGE], job_id)


@app.task(name=CLOSET_CHECK_TASK, ignore_result=True)
def closet_check_task() -> int:
    """Beat-scheduled (queue ``consolidate``): a closets job for groups past
    ``closet_min_units`` new units (:func:`rcll.consolidate.closets.enqueue_due`); nothing in
    chunk mode. Returns how many jobs it sent."""
    svc = services()
    s = svc.settings

    def send(job_id: str) -> None:
        app.send_task(CLOSETS_TASK, args=[job_id], queue=QueueNames.CONSOLIDATE)

    return len(closets.enqueue_due(svc.pool, s.llm_provider != "none", s.closet_min_units, send))


@app.task(name=HEBBIAN_DECAY_TASK, ignore_result=True)
def hebbian_decay_task() -> dict:
    """Beat-scheduled (queue ``maintenance``): decay and prune the Hebbian co-recall weights
    of every bank (:func:`rcll.cascade.hebbian.decay_all`); nothing when activation is off.
    Redis down: logged, the next run decays by the whole elapsed time."""
    import redis

    from rcll.cascade import hebbian

    svc = services()
    if not svc.settings.activation:
        return {}
    try:
        return hebbian.decay_all(svc.redis, svc.hot_tier.prefix,
                                 svc.settings.hebbian_decay_interval_s)
    except redis.RedisError as exc:
        log.warning("hebbian decay skipped, Redis unavailable: %s", exc)
        return {}


@app.task(name=WEBHOOK_DISPATCH_TASK, ignore_result=True)
def webhook_dispatch_task() -> int:
    """Beat-scheduled (queue ``maintenance``): claim the webhook deliveries that are due and
    send one ``maintenance.webhook_deliver`` per claim (:func:`rcll.webhooks.delivery.
    dispatch_due`). Returns how many it claimed."""
    from rcll.webhooks import delivery

    svc = services()

    def send(delivery_id: str, claim: str) -> None:
        app.send_task(WEBHOOK_DELIVER_TASK, args=[delivery_id, claim],
                      queue=QueueNames.MAINTENANCE)

    return delivery.dispatch_due(svc.pool, send,
                                 delivery.DeliveryPolicy.from_settings(svc.settings))


@app.task(name=WEBHOOK_DELIVER_TASK, ignore_result=True)
def webhook_deliver_task(delivery_id: str, claim: str) -> dict | None:
    """One attempt of a webhook delivery under its claim (queue ``maintenance``;
    :func:`rcll.webhooks.delivery.deliver`). A stale or duplicate claim does nothing; a
    database outage leaves the delivery to the dispatcher once the claim's lease is over."""
    from rcll.webhooks import delivery

    svc = services()
    return delivery.deliver(svc.pool, delivery.DeliveryPolicy.from_settings(svc.settings),
                            delivery_id, claim)


@app.task(name=LLM_LOG_PURGE_TASK, ignore_result=True)
def purge_llm_requests_task() -> int:
    """Beat-scheduled (queue ``maintenance``, hourly): delete the LLM request log's calls
    older than ``llm_request_log_retention_days`` (:func:`rcll.llm.requests.purge`).
    Returns how many."""
    from rcll.llm.requests import purge

    svc = services()
    return purge(svc.pool, svc.settings.llm_request_log_retention_days)
