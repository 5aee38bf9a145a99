"""Issue 5 faults 4 and 14: deleting a bank while its job runs stops the job once, and
nothing of the old bank reappears when the same bank id is created again."""

import time

from rcll.retain import stages
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from tests.conftest import db_counts
from workers.celery_app import make_celery


def test_deleted_bank_stops_its_job_once_and_stays_gone(client, worker, services, settings):
    bank = "delete-mid-job"
    items = [RetainItem(content=f"Note {i}: the nightly export of table t{i} moved to host "
                                f"h{i % 9}, owner team {i % 13}.", document_id=f"n{i}")
             for i in range(800)]
    with services.pool.connection() as conn:
        job, _ = submit_retain(conn, bank, items)
    job_id = str(job["id"])
    make_celery(settings).send_task(stages.first().task_name, args=[job_id],
                                    queue=stages.first().queue)
    deadline = time.monotonic() + 60
    while db_counts(services, bank)["units"] < 20:  # the job is mid-way
        assert time.monotonic() < deadline, "job did not start"
        time.sleep(0.05)
    assert client.delete(f"/v1/default/banks/{bank}").status_code == 200
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": "Zoe: the new bank holds only this note.", "document_id": "zoe"}],
        "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded"
    log_file = settings.run_dir.resolve() / "worker.log"
    deadline = time.monotonic() + 30
    while f"retain job {job_id} stopped" not in log_file.read_text(errors="replace") \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # anything the old job would still write lands here
    counts = db_counts(services, bank)
    assert (counts["units"], counts["embeddings"], counts["documents"], counts["jobs"]) == \
        (1, 1, 1, 1)
    log = log_file.read_text(errors="replace")
    assert log.count(f"retain job {job_id} stopped") == 1
    assert log.count(f"retain job {job_id} item") == 0  # no item-after-item failures
    assert "ForeignKeyViolation" not in log
