"""Stable queue names; the running worker consumes every queue; migrations have one head."""

from rcll.store.migrate import heads
from workers.celery_app import make_celery
from workers.queues import ROUTES, QueueNames


def test_every_route_targets_a_declared_queue(settings):
    app = make_celery(settings)
    declared = {q.name for q in app.conf.task_queues}
    assert declared == set(QueueNames.all()) == {"extract", "embed", "consolidate", "maintenance"}
    assert {r["queue"] for r in ROUTES.values()} <= declared


def test_running_worker_consumes_all_queues(settings, worker):
    app = make_celery(settings)
    replies = app.control.inspect(timeout=5).active_queues()
    assert replies, "no worker answered"
    consumed = {q["name"] for queues in replies.values() for q in queues}
    assert consumed == set(QueueNames.all())


def test_migrations_have_a_single_head():
    assert len(heads()) == 1
