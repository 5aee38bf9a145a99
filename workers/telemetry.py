"""The worker's metrics exporter and log set-up (Celery signals; docs/reference/metrics.md).

- ``setup_logging``: this receiver replaces Celery's logging set-up: JSON or text lines per
  ``RCLL_LOG_FORMAT`` (:mod:`rcll.telemetry.logs`), for the worker and beat alike.
- ``worker_init`` (the main process, before the pool forks): the exporter on
  ``RCLL_METRICS_HOST:RCLL_METRICS_PORT`` (loopback by default) serving every process of this worker — the pool children run the tasks
  and write their values to ``PROMETHEUS_MULTIPROC_DIR`` (set by ``rcll worker`` and the dev
  stack, :func:`rcll.telemetry.exposition.multiproc_env`).
- ``task_prerun`` / ``task_postrun`` (in the child running the task): the job context — job id,
  its bank and item count, looked up once by primary key — around every line the task logs,
  and the task's duration by outcome.
- ``worker_process_shutdown``: the child's multiprocess files are marked dead.
"""

from __future__ import annotations

import logging
import os
import time

from celery import signals

from rcll.config import get_settings
from rcll.telemetry import exposition, logs, metrics

log = logging.getLogger(__name__)
_running: dict[str, tuple[float, object]] = {}  # task id -> (start, job context token)
JOB_TASK_PREFIXES = ("retain.", "consolidate.closets")
BANK_TASKS = ("consolidate.dedup_scan",)


@signals.setup_logging.connect
def _setup_logging(loglevel=None, **_) -> None:
    logs.configure(get_settings().log_format, loglevel or logging.INFO)


@signals.worker_init.connect
def _start_exporter(**_) -> None:
    s = get_settings()
    if exposition.multiproc_dir() is None:
        log.warning("PROMETHEUS_MULTIPROC_DIR is not set: the exporter shows only the main "
                    "process, not the pool children running tasks; start workers with "
                    "`rcll worker`")
    exposition.start_exporter(s.metrics_port, s.metrics_host)


def _job_fields(task_name: str, args) -> dict:
    """The job context of a task: retain stages and closets jobs take a job id, a dedup scan a
    bank id. The job's bank and item count come from one primary-key read (skipped, with the
    job id alone, when the database does not answer)."""
    if not args:
        return {}
    if task_name in BANK_TASKS:
        return {"bank_id": str(args[0])}
    if not task_name.startswith(JOB_TASK_PREFIXES):
        return {}
    fields = {"job_id": str(args[0])}
    try:
        from workers.tasks import services

        with services().pool.connection(timeout=2) as conn:
            row = conn.execute("SELECT bank_id, (counts->>'items')::int AS items FROM jobs "
                               "WHERE id = %s", (fields["job_id"],)).fetchone()
        if row:
            fields.update(bank_id=row["bank_id"], items=row["items"])
    except Exception as exc:  # the stage's own retry handles an outage; log without the bank
        log.debug("job context of %s: %s", fields["job_id"], exc)
    return fields


@signals.task_prerun.connect
def _task_started(task_id=None, task=None, args=None, **_) -> None:
    token = logs.set_job(**_job_fields(getattr(task, "name", ""), args or ()))
    _running[task_id] = (time.perf_counter(), token)


@signals.task_postrun.connect
def _task_ended(task_id=None, task=None, state=None, **_) -> None:
    started = _running.pop(task_id, None)
    if started is None:
        return
    t0, token = started
    outcome = {"SUCCESS": "success", "RETRY": "retry"}.get(state or "", "failure")
    metrics.TASK_SECONDS.labels(getattr(task, "name", "unknown"), outcome).observe(
        time.perf_counter() - t0)
    try:
        logs.reset_job(token)
    except ValueError:  # set in another context (a pool thread): clear it instead
        logs.set_job()


@signals.worker_process_shutdown.connect
def _child_exit(pid=None, **_) -> None:
    exposition.process_dead(pid or os.getpid())
