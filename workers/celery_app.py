"""The Celery app: broker from settings, late acks so a killed worker's task is redelivered,
and the beat schedule of the recovery sweep (run ``rcll beat`` once per deployment)."""

from __future__ import annotations

from celery import Celery
from kombu import Queue

from rcll.config import Settings, get_settings
from workers.queues import (
    CLOSET_CHECK_TASK,
    DEDUP_SWEEP_TASK,
    HEBBIAN_DECAY_TASK,
    LLM_LOG_PURGE_TASK,
    ROUTES,
    SWEEP_TASK,
    VECTOR_INDEX_TASK,
    WEBHOOK_DISPATCH_TASK,
    QueueNames,
)

LLM_LOG_PURGE_INTERVAL_S = 3600.0  # the request log's retention is in days: hourly is enough


def _every(task: str, interval_s: float, queue: str) -> dict:
    """A beat entry: ``task`` on ``queue`` every ``interval_s`` seconds; a run that waited
    longer than its interval expires (the next one does the same work)."""
    interval = float(interval_s)
    return {"task": task, "schedule": interval,
            "options": {"queue": queue, "expires": max(interval, 1.0)}}


def _transport_options(s: Settings) -> dict:
    """Broker transport options. Redis: unacked tasks come back after the visibility timeout
    (a dead worker's), bounded sockets. AMQP (RabbitMQ): there is no visibility timeout — an
    unacked message returns to its queue as soon as the consumer's connection or channel
    closes (a killed worker), the same redelivery with acks_late; publisher confirms so an
    enqueue the broker did not take fails like a Redis one. RabbitMQ's ``consumer_timeout``
    (default 30 min) must stay above the longest task, as the visibility timeout must."""
    from rcll.telemetry.collectors import is_amqp

    if is_amqp(s.broker):
        return {"confirm_publish": True, "connect_timeout": 5}
    return {"visibility_timeout": s.broker_visibility_timeout_s,
            "socket_timeout": 5, "socket_connect_timeout": 5}


def make_celery(settings: Settings | None = None) -> Celery:
    """A Celery app for ``settings``; tasks are registered by ``workers.tasks``."""
    from rcll.telemetry.collectors import is_amqp

    s = settings or get_settings()
    app = Celery("rcll", broker=s.broker, include=["workers.tasks"])
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,  # ack after the task ran: a killed worker's task comes back
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Redis: take a message only when a pool process is free to run it, so a worker
        # holds no waiting task another replica (scaled up on the queue's length) could run
        # (Celery applies it to Redis brokers only; RabbitMQ keeps its prefetch of 1).
        worker_disable_prefetch=not is_amqp(s.broker),
        task_queues=[Queue(name) for name in QueueNames.all()],
        task_default_queue=QueueNames.EXTRACT,
        task_routes=ROUTES,
        # A broker that accepts but never answers must not hang the API: bounded sockets
        # and a bounded publish retry, then the enqueue fails and the job says so.
        broker_transport_options=_transport_options(s),
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0,
                                   "interval_step": 0.5, "interval_max": 1},
        broker_connection_retry_on_startup=True,
        # One scheduler re-sends what the broker lost (rcll.retain.recovery); a sweep that
        # waited longer than its interval is dropped, the next one does the same work.
        beat_schedule={
            "sweep-jobs": _every(SWEEP_TASK, s.job_sweep_interval_s, QueueNames.MAINTENANCE),
            "vector-indexes": _every(VECTOR_INDEX_TASK, s.vector_index_interval_s,
                                     QueueNames.MAINTENANCE),
            "dedup-sweep": _every(DEDUP_SWEEP_TASK, s.dedup_scan_interval_s,
                                  QueueNames.CONSOLIDATE),
            "closet-check": _every(CLOSET_CHECK_TASK, s.closet_check_interval_s,
                                   QueueNames.CONSOLIDATE),
            "hebbian-decay": _every(HEBBIAN_DECAY_TASK, s.hebbian_decay_interval_s,
                                    QueueNames.MAINTENANCE),
            "webhook-dispatch": _every(WEBHOOK_DISPATCH_TASK, s.webhook_dispatch_interval_s,
                                       QueueNames.MAINTENANCE),
            "llm-request-log-purge": _every(LLM_LOG_PURGE_TASK, LLM_LOG_PURGE_INTERVAL_S,
                                            QueueNames.MAINTENANCE)},
        worker_hijack_root_logger=False,
    )
    return app


app = make_celery()
import workers.telemetry  # noqa: E402,F401  (logging, metrics exporter, job context: signals)
