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


def test_vector_index_task_gives_a_big_bank_its_own_hnsw_index(client, services, settings, worker):
    """Beat schedules the per-bank index maintenance on `maintenance`; run by the real worker,
    it indexes a bank past `vector_index_min_units` (40 in tests) and leaves small ones exact."""
    import time

    from rcll.store.vector_index import bank_index_names, index_name
    from workers.queues import VECTOR_INDEX_TASK

    app = make_celery(settings)
    assert {e["task"] for e in app.conf.beat_schedule.values()} >= {VECTOR_INDEX_TASK}
    items = [{"content": f"Zed: ticket {i} closed after the {i}th rollback drill.",
              "document_id": f"z{i}"} for i in range(45)]
    assert client.post("/v1/default/banks/vi-big/memories",
                       json={"items": items, "async": False}).status_code == 200
    client.post("/v1/default/banks/vi-small/memories",
                json={"items": items[:5], "async": False})
    app.send_task(VECTOR_INDEX_TASK, queue=ROUTES[VECTOR_INDEX_TASK]["queue"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with services.pool.connection() as conn:
            names = bank_index_names(conn)
        if index_name("vi-big") in names:
            break
        time.sleep(0.3)
    assert index_name("vi-big") in names
    assert index_name("vi-small") not in names



def test_a_redis_worker_takes_a_task_only_when_a_process_is_free(settings):
    """On Redis, prefetch is off: a waiting task stays in its queue's list (where KEDA counts
    it and another replica can take it) until a pool process of this worker is free."""
    assert make_celery(settings).conf.worker_disable_prefetch is True
    amqp = settings.model_copy(update={"broker_url": "amqp://guest:guest@127.0.0.1:5672//"})
    assert make_celery(amqp).conf.worker_disable_prefetch is False
