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


def test_a_new_jobs_first_step_waits_behind_started_jobs_on_redis(settings):
    """The API's enqueue sends a new job's first step at NEW_JOB_PRIORITY: on the Redis broker
    it lands in that priority's list, which a worker pops only when the plain lists (the next
    stages of started jobs, sent at priority 0) of every queue it consumes are empty."""
    import redis

    from api.app import celery_enqueuer
    from workers.queues import NEW_JOB_PRIORITY

    base = settings.redis_url.rsplit("/", 1)[0]
    idle = settings.model_copy(update={"broker_url": f"{base}/13"})  # no worker consumes it
    r = redis.Redis.from_url(idle.broker)
    r.flushdb()
    try:
        celery_enqueuer(idle)("retain.chunk", "job-new")
        app = make_celery(idle)
        app.send_task("retain.embed", args=["job-started"], queue="embed")  # a worker's send
        sep = "\x06\x16"
        assert r.llen(f"extract{sep}{NEW_JOB_PRIORITY}") == 1 and r.llen("extract") == 0
        assert r.llen("embed") == 1
        # a worker consuming both queues pops in this key order (kombu's BRPOP)
        channel = app.connection_for_read().default_channel
        keys = [channel._q_for_pri(q, p) for p in channel.priority_steps
                for q in ("extract", "embed")]
        assert keys.index("embed") < keys.index(f"extract{sep}{NEW_JOB_PRIORITY}")
    finally:
        r.flushdb()
