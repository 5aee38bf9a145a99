"""A worker killed mid-job and restarted finishes the job without duplicating units."""

import time

import pytest

from rcll.dev import processes, stack
from tests.conftest import db_counts, wait_job


@pytest.mark.slow
def test_killed_worker_does_not_duplicate(client, worker, services, settings):
    bank = "crash-bank"
    items = [{"content": f"Speaker {i % 3}: note number {i} about the migration of table t{i} "
                         f"to the new cluster, with rollback plan {i * 7}.",
              "document_id": f"crash-{i}"} for i in range(50)]
    ops = [client.post(f"/v1/default/banks/{bank}/memories", json={"items": items}).get_json()
           for _ in range(1)]
    # a second batch of different documents keeps the worker busy while we kill it
    more = [{**it, "document_id": it["document_id"] + "-b", "content": it["content"] + " (b)"}
            for it in items]
    ops.append(client.post(f"/v1/default/banks/{bank}/memories", json={"items": more}).get_json())

    run_dir = settings.run_dir.resolve()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the first job is mid-flight
        op = client.get(f"/v1/default/banks/{bank}/operations/{ops[0]['operation_id']}").get_json()
        if op["state"] == "running":
            break
        time.sleep(0.02)
    processes.kill(run_dir, "worker")
    states = [client.get(f"/v1/default/banks/{bank}/operations/{o['operation_id']}")
              .get_json()["state"] for o in ops]
    assert states[0] == "running"  # killed mid-job
    assert states[1] in ("queued", "running")
    # a pool process may hold the second job's lease before it marks the job running, so the
    # lease (not the state) says whether the kill interrupted it
    with services.pool.connection() as conn:
        held = conn.execute("SELECT lease_owner IS NOT NULL AS held FROM jobs WHERE id = %s",
                            (ops[1]["operation_id"],)).fetchone()["held"]

    stack.start_worker(settings, name="worker", log=lambda *_: None)
    finals = [wait_job(client, bank, o["operation_id"], timeout_s=180) for o in ops]
    assert [f["state"] for f in finals] == ["succeeded", "succeeded"]
    # counts add up over attempts: a redelivered job's earlier units are not "skipped"
    assert [f["counts"]["units_created"] for f in finals] == [50, 50]
    assert [f["counts"]["units_skipped"] for f in finals] == [0, 0]
    counts = db_counts(services, bank)
    assert counts["units"] == 100
    assert counts["embeddings"] == 100
    assert counts["documents"] == 100
    with services.pool.connection() as conn:
        dupes = conn.execute(
            """SELECT count(*) AS n FROM (SELECT document_id, chunk_hash FROM memory_units
               WHERE bank_id = %s GROUP BY 1, 2 HAVING count(*) > 1) d""", (bank,)).fetchone()["n"]
    assert dupes == 0
    # the killed job really ran twice: its first run died holding the lease, another finished
    assert finals[0]["lease_expiries"] == 1 and finals[0]["attempts"] >= 2
    # one pool process per core: the second job was killed too when it already held a lease
    assert finals[1]["lease_expiries"] == (1 if held else 0)
