"""The Celery app: broker from settings, late acks so a killed worker's task is redelivered,
and the beat schedule of the recovery sweep (run ``rcll beat`` once per deployment)."""

from __future__ import annotations

from celery import Celery
from kombu import Queue

from rcll.config import Settings, get_settings
from workers.queues import (
    CLOSET_CHECK_TASK,
    DEDUP_SWEEP_TASK,
    ROUTES,
    SWEEP_TASK,
    VECTOR_INDEX_TASK,
    QueueNames,
)


def make_celery(settings: Settings | None = None) -> Celery:
    """A Celery app for ``settings``; tasks are registered by ``workers.tasks``."""
    s = settings or get_settings()
    app = Celery("rcll", broker=s.broker, include=["workers.tasks"])
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,  # ack after the task ran: a killed worker's task comes back
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_queues=[Queue(name) for name in QueueNames.all()],
        task_default_queue=QueueNames.EXTRACT,
        task_routes=ROUTES,
        # A broker that accepts but never answers must not hang the API: bounded sockets
        # and a bounded publish retry, then the enqueue fails and the job says so.
        broker_transport_options={"visibility_timeout": s.broker_visibility_timeout_s,
                                  "socket_timeout": 5, "socket_connect_timeout": 5},
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0,
                                   "interval_step": 0.5, "interval_max": 1},
        broker_connection_retry_on_startup=True,
        # One scheduler re-sends what the broker lost (rcll.retain.recovery); a sweep that
        # waited longer than its interval is dropped, the next one does the same work.
        beat_schedule={"sweep-jobs": {
            "task": SWEEP_TASK, "schedule": float(s.job_sweep_interval_s),
            "options": {"queue": QueueNames.MAINTENANCE,
                        "expires": max(float(s.job_sweep_interval_s), 1.0)}},
            "vector-indexes": {
                "task": VECTOR_INDEX_TASK, "schedule": float(s.vector_index_interval_s),
                "options": {"queue": QueueNames.MAINTENANCE,
                            "expires": max(float(s.vector_index_interval_s), 1.0)}},
            "dedup-sweep": {
                "task": DEDUP_SWEEP_TASK, "schedule": float(s.dedup_scan_interval_s),
                "options": {"queue": QueueNames.CONSOLIDATE,
                            "expires": max(float(s.dedup_scan_interval_s), 1.0)}},
            "closet-check": {
                "task": CLOSET_CHECK_TASK, "schedule": float(s.closet_check_interval_s),
                "options": {"queue": QueueNames.CONSOLIDATE,
                            "expires": max(float(s.closet_check_interval_s), 1.0)}}},
        worker_hijack_root_logger=False,
    )
    return app


app = make_celery()
