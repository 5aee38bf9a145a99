"""8 concurrent retains of 200 items into one bank sharing 20 entity names, two worker processes
with ``--concurrency 4``: every unit once, every entity once, no deadlock."""

import time

import pytest

from rcll.dev import processes, stack
from tests.conftest import db_counts, wait_job

SPEAKERS = ["Dana Lee", "Lee Park", "Caroline", "Melanie", "Tigran"]
OTHERS = ["Room 101", "Room 102", "INC-4471", "vol-7", "@oncall", "#launch", "billing_service",
          "Acme Corp", "New York", "Iran", "Project Falcon", "Bank of America", "KafkaConsumer",
          "ops@example.com", "Building 7"]
RETAINS, ITEMS_PER_RETAIN, PER_REQUEST = 8, 200, 50


def _items(r: int) -> list[dict]:
    out = []
    for i in range(ITEMS_PER_RETAIN):
        a = OTHERS[(r * 7 + i) % 15]
        b = OTHERS[(r * 3 + i * 4 + 1) % 15]
        if b == a:
            b = OTHERS[(OTHERS.index(a) + 1) % 15]
        out.append({"content": f"{SPEAKERS[(r + i) % 5]}: note on {a} and {b} for case {r}x{i}.",
                    "document_id": f"r{r}-i{i}", "timestamp": f"2024-05-{r + 1:02d}T10:{i % 60:02d}:00"})
    return out


@pytest.mark.slow
def test_concurrent_retains_share_entities_without_duplicates(client, services, settings):
    run_dir = settings.run_dir.resolve()
    had_worker = processes.running_pid(run_dir, "worker") is not None
    processes.stop(run_dir, "worker")  # exactly the two workers below consume the queues
    four = settings.model_copy(update={"worker_concurrency": 4})
    try:
        for name in ("conc-a", "conc-b"):
            stack.start_worker(four, name=name, log=lambda *_: None)
        bank = "entities-concurrent"
        started = time.monotonic()
        ops = []
        for chunk in range(ITEMS_PER_RETAIN // PER_REQUEST):  # interleave the 8 retains
            for r in range(RETAINS):
                items = _items(r)[chunk * PER_REQUEST:(chunk + 1) * PER_REQUEST]
                resp = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items})
                assert resp.status_code == 200, resp.get_json()
                ops.append(resp.get_json()["operation_id"])
        finals = [wait_job(client, bank, op, timeout_s=600) for op in ops]
        elapsed = time.monotonic() - started
    finally:
        for name in ("conc-a", "conc-b"):
            processes.stop(run_dir, name)
        if had_worker:
            stack.start_worker(settings, name="worker", log=lambda *_: None)

    states = [f["state"] for f in finals]
    counts = db_counts(services, bank)
    with services.pool.connection() as conn:
        ent = conn.execute(
            """SELECT count(*) AS entities, count(DISTINCT normalized) AS names,
                      (SELECT count(*) FROM unit_entities WHERE bank_id = %(b)s) AS mentions,
                      (SELECT count(*) FROM entity_merge_proposals WHERE bank_id = %(b)s) AS proposals,
                      (SELECT count(*) FROM memory_links WHERE bank_id = %(b)s AND type = 'entity')
                          AS entity_links,
                      (SELECT count(*) FROM memory_links WHERE bank_id = %(b)s AND type = 'temporal')
                          AS temporal_links,
                      (SELECT count(*) FROM (SELECT document_id, chunk_hash FROM memory_units
                         WHERE bank_id = %(b)s GROUP BY 1, 2 HAVING count(*) > 1) d) AS dup_units
               FROM entities WHERE bank_id = %(b)s""", {"b": bank}).fetchone()
    print(f"\nconcurrency: {len(ops)} jobs ({RETAINS} retains x {ITEMS_PER_RETAIN} items, "
          f"2 workers x concurrency 4) in {elapsed:.1f} s; states {sorted(set(states))}; "
          f"units {counts['units']}, documents {counts['documents']}, dup units {ent['dup_units']}; "
          f"entities {ent['entities']} ({ent['names']} names), mentions {ent['mentions']}, "
          f"proposals {ent['proposals']}, entity links {ent['entity_links']}, "
          f"temporal links {ent['temporal_links']}")
    assert states == ["succeeded"] * len(ops)  # no deadlock, nothing failed
    n_units = RETAINS * ITEMS_PER_RETAIN
    assert counts["units"] == counts["documents"] == n_units and ent["dup_units"] == 0
    assert ent["entities"] == ent["names"] == len(SPEAKERS) + len(OTHERS)
    assert ent["mentions"] == 3 * n_units  # speaker + two names, each once
    assert ent["proposals"] == 0  # Room 101/102, Dana Lee/Lee Park, Iran/Tigran stay apart
    assert sum(f["counts"]["entity_mentions"] for f in finals) == 3 * n_units
