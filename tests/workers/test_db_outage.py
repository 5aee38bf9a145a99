"""Issue 5 fault 12 (write path): a short PostgreSQL restart mid-job loses no item — the
stage waits and resumes; it never counts the outage as item failures."""

import time

import pytest

from rcll.dev import postgres
from rcll.retain import stages
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from tests.conftest import db_counts, wait_job
from workers.celery_app import make_celery


@pytest.mark.slow
def test_postgres_restart_mid_job_loses_no_item(client, worker, services, settings):
    bank = "pg-outage"
    n = 400
    items = [RetainItem(content=f"Entry {i}: backup volume v{i} of cluster c{i % 11} was "
                                f"verified by shift {i % 5}.", document_id=f"e{i}")
             for i in range(n)]
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, items)
    job_id = str(job["id"])
    make_celery(settings).send_task(stages.first().task_name, args=[job_id],
                                    queue=stages.first().queue)
    deadline = time.monotonic() + 60
    while db_counts(services, bank)["units"] < 10:
        assert time.monotonic() < deadline, "job did not start"
        time.sleep(0.05)
    postgres.stop(settings, log=lambda *_: None)
    time.sleep(5)
    postgres.start(settings, log=lambda *_: None)
    op = wait_job(client, bank, job_id, timeout_s=240)
    assert op["state"] == "succeeded", op
    assert op["counts"]["items_failed"] == 0 and not op["counts"].get("errors")
    assert op["counts"]["units_created"] == n
    counts = db_counts(services, bank)
    assert (counts["units"], counts["embeddings"], counts["documents"]) == (n, n, n)
