"""Fault 11: PostgreSQL's job table is the source of truth. Whatever the broker lost is re-sent
by the recovery sweep (a Celery beat task on ``maintenance``): queued jobs after a short grace,
a finished stage whose successor was never sent, and running jobs whose heartbeat stopped.
A re-sent job that is healthy elsewhere is not run twice."""

import time
from datetime import timedelta

from rcll.dev import processes, stack
from rcll.dev import redis as dev_redis
from rcll.retain import lease, stages
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from rcll.store import jobs
from tests.conftest import db_counts, wait_job
from workers.celery_app import make_celery
from workers.tasks import sweep_jobs


def _job(client, bank, op_id):
    return client.get(f"/v1/default/banks/{bank}/operations/{op_id}").get_json()


def test_redis_restart_does_not_strand_queued_jobs(client, services, settings, worker):
    bank = "redis-restart"
    run_dir = settings.run_dir.resolve()
    processes.stop(run_dir, "beat")
    processes.stop(run_dir, "worker")  # nobody consumes: the jobs stay in Redis only
    try:
        ops = []
        for i in range(6):
            r = client.post(f"/v1/default/banks/{bank}/memories",
                            json={"items": [{"content": f"Kai: server {i} moves to rack {i + 3}.",
                                             "document_id": f"rr-{i}"}]},
                            headers={"Idempotency-Key": f"rr-{i}"})
            assert r.status_code == 200
            ops.append(r.get_json()["operation_id"])
        assert {_job(client, bank, o)["state"] for o in ops} == {"queued"}
        dev_redis.stop(settings)  # no persistence: every queued message is gone
        assert dev_redis.ensure(settings, log=lambda *_: None)
        # re-posting a key returns the stranded job; the sweep is what re-sends it
        r = client.post(f"/v1/default/banks/{bank}/memories",
                        json={"items": [{"content": "Kai: server 0 moves to rack 3.",
                                         "document_id": "rr-0"}]},
                        headers={"Idempotency-Key": "rr-0"})
        assert r.get_json()["operation_id"] == ops[0]
    finally:
        stack.start_worker(settings, name="worker", log=lambda *_: None)
        stack.start_beat(settings, log=lambda *_: None)
    t = time.monotonic()
    finals = [wait_job(client, bank, o, timeout_s=60) for o in ops]
    assert [f["state"] for f in finals] == ["succeeded"] * 6, finals
    print(f"\nall {len(ops)} stranded jobs succeeded {time.monotonic() - t:.1f}s after "
          "the worker and beat were up")
    assert time.monotonic() - t < 60
    assert db_counts(services, bank)["units"] == 6
    assert db_counts(services, bank)["embeddings"] == 6


def test_stage_finished_during_outage_gets_next_resent_promptly(client, services, settings,
                                                                    worker):
    bank = "outage-embed"
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Rae: the DNS TTL is 300 s.",
                                                       document_id="dns")])
    job_id = str(job["id"])
    # the chunk stage ran, then the broker was down when the next stage was to be sent
    ctx, first = services.retain_context(), stages.first()
    counts = first.run(ctx, job_id)
    assert counts is not None
    nxt = stages.advance(ctx, job_id, first, counts)
    with services.pool.connection() as conn:
        conn.execute("UPDATE jobs SET updated_at = now() - interval '3 seconds' WHERE id = %s",
                     (job_id,))
        assert jobs.get(conn, job_id)["stage"] == nxt.name
        # the next stage this job runs (chunk mode skips extract: no LLM step to run)
        assert [s.name for s in stages.STAGES].index(nxt.name) > 0
    resent = sweep_jobs(services, make_celery(settings))
    # a beat sweep may have re-sent it a moment earlier; either way it is not left waiting
    t = time.monotonic()
    op = wait_job(client, bank, job_id, timeout_s=30)
    assert op["state"] == "succeeded" and op["counts"]["units_embedded"] == 1
    assert job_id in resent or time.monotonic() - t < 10


def test_resent_job_held_elsewhere_is_not_run_twice(client, services, settings, worker):
    bank = "held-job"
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Oz: the lease test note.",
                                                       document_id="lease")])
    job_id = str(job["id"])
    first = stages.first()
    # another worker holds the extract stage and heartbeats: its job is not stale
    with lease.hold(services.pool, job_id, first.name, first=True, lease_s=settings.job_stale_after_s,
                    beat_s=0.3) as held:
        assert held
        with services.pool.connection() as conn:
            before = conn.execute("SELECT updated_at FROM jobs WHERE id = %s", (job_id,)).fetchone()
        make_celery(settings).send_task(first.task_name, args=[job_id], queue=first.queue)
        time.sleep(3)
        assert job_id not in sweep_jobs(services, make_celery(settings))
        with services.pool.connection() as conn:
            row = conn.execute("SELECT attempts, state, updated_at FROM jobs WHERE id = %s",
                               (job_id,)).fetchone()
        assert row["attempts"] == 0 and row["state"] == "queued"  # the duplicate did not run
        assert row["updated_at"] > before["updated_at"]  # heartbeat
        with services.pool.connection() as conn:
            assert not jobs.acquire_lease(conn, job_id, "someone-else", first.name, True, 30)
    # released: the next sweep re-sends it and it runs once
    op = wait_job(client, bank, job_id, timeout_s=30)
    assert op["state"] == "succeeded" and op["attempts"] == 1


def test_dead_workers_job_is_resent_after_its_lease_expires(client, services, settings, worker):
    bank = "lease-expired"
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Uma: the lease expired.",
                                                       document_id="gone")])
        job_id = str(job["id"])
        assert jobs.acquire_lease(conn, job_id, "dead-worker", "chunk", True, 30)
        conn.execute("UPDATE jobs SET state = 'running', stage = 'chunk', "
                     "lease_until = now() - interval '1 second', "
                     "updated_at = now() - %s WHERE id = %s", (timedelta(seconds=40), job_id))
    op = wait_job(client, bank, job_id, timeout_s=30)
    assert op["state"] == "succeeded"


def test_beat_process_schedules_the_sweep_on_maintenance(settings, worker):
    entry = make_celery(settings).conf.beat_schedule["sweep-jobs"]
    assert entry["task"] == "maintenance.sweep_jobs"
    assert entry["options"]["queue"] == "maintenance"
    log_path = settings.run_dir.resolve() / "beat.log"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if "Sending due task sweep-jobs (maintenance.sweep_jobs)" in log_path.read_text():
            break
        time.sleep(0.5)
    else:
        raise AssertionError("beat did not send the sweep")
    worker_log = (settings.run_dir.resolve() / "worker.log").read_text()
    assert "maintenance.sweep_jobs" in worker_log  # and a worker ran it


def test_job_that_keeps_killing_its_worker_ends_failed(client, services, settings, worker):
    bank = "poison-job"
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Pia: a poison job.")])
        job_id = str(job["id"])
        # its worker died holding the lease as often as allowed but once
        conn.execute("UPDATE jobs SET state = 'running', stage = 'chunk', lease_owner = 'x', "
                     "lease_until = now() - interval '1 second', lease_expiries = %s, "
                     "updated_at = now() - interval '1 hour' WHERE id = %s",
                     (settings.job_max_lease_expiries - 1, job_id))
    op = wait_job(client, bank, job_id, timeout_s=30)
    assert op["state"] == "failed" and "stopped" in op["error"]
    assert op["attempts"] == 0  # not re-sent again
