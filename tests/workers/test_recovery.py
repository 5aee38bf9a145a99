"""Jobs are not stranded: a dead worker's job is re-enqueued; a job that failed to enqueue can
be retried with its idempotency key."""

from datetime import timedelta

from api.app import create_app
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from tests.conftest import db_counts, wait_job
from workers.celery_app import make_celery
from workers.tasks import sweep_jobs


def test_stale_running_job_is_re_enqueued(client, services, worker, settings):
    bank = "stale-bank"
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, [RetainItem(content="Ivy: the VPN certificate "
                                                       "expires in June.", document_id="v")])
        # as if a worker took it and died: running, no progress, no message in the queue
        conn.execute("UPDATE jobs SET state = 'running', stage = 'chunk', "
                     "updated_at = now() - %s WHERE id = %s", (timedelta(hours=1), job["id"]))
    celery = make_celery(settings)
    first = sweep_jobs(services, celery)  # the beat process may have been a moment faster
    assert first in ([str(job["id"])], [])
    assert str(job["id"]) not in sweep_jobs(services, celery)  # claimed once
    op = wait_job(client, bank, str(job["id"]))
    assert op["state"] == "succeeded" and op["counts"]["units_embedded"] == 1
    assert op["resends"] == 0  # reset when a worker took the lease
    assert db_counts(services, bank)["units"] == 1


def test_failed_enqueue_can_be_retried_with_the_same_key(services, worker, app):
    def broken(*_):
        raise ConnectionError("broker down")

    down = create_app(services=services, enqueue=broken).test_client()
    body = {"items": [{"content": "Jo: the release train leaves on Thursdays.",
                       "document_id": "rt"}]}
    r = down.post("/v1/default/banks/enq-retry/memories", json=body,
                  headers={"Idempotency-Key": "retry-1"})
    assert r.status_code == 503 and r.get_json()["error"]["code"] == "queue_unavailable"
    op_id = r.get_json()["error"]["details"]["operation_id"]
    c = app.test_client()
    failed = c.get(f"/v1/default/banks/enq-retry/operations/{op_id}").get_json()
    assert failed["state"] == "failed" and failed["error"].startswith("enqueue failed")
    r = c.post("/v1/default/banks/enq-retry/memories", json=body,
               headers={"Idempotency-Key": "retry-1"})
    assert r.status_code == 200 and r.get_json()["operation_id"] == op_id
    assert wait_job(c, "enq-retry", op_id)["state"] == "succeeded"
