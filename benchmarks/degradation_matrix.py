"""The degradation matrix of recall (spec §1.4, issue 8): each part taken down for real,
what recall answered and in which mode. Prints a markdown table.

Runs on its own scratch PostgreSQL (``--state-dir``, ``--pg-port``) and its own Redis server
(a free port, started and stopped here), through the Flask app in-process with a real
embedder; a bank of 8 notes retained synchronously. Rows:

- all parts up, a question asked twice (the second is answered by tier 1);
- Redis stopped (the server process is killed), then started again;
- the embedder off (``RCLL_EMBEDDER_ENABLED=false``);
- pgvector unusable: recall connects as a role that may not read ``memory_embeddings``
  (the dense channel, the warm tier and the duplicate check fail in SQL);
- the cross-encoder missing (``RCLL_RERANKER_MODEL`` names a path that does not exist);
- Redis and the embedder both down;
- PostgreSQL stopped (not optional: a fast 503 ``database_unavailable``).

    python benchmarks/degradation_matrix.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import psycopg
import redis

from api.app import create_app
from rcll.bootstrap import bootstrap
from rcll.dev import postgres
from rcll.dev import redis as dev_redis
from rcll.dev.scratch import scratch_database

NOTES = [
    "Ana: the payroll export runs every Friday at 18:00 from the finance server.",
    "Ben: payroll exports are encrypted with the finance team's public key.",
    "Cy: the payroll export failed last Friday because the disk was full.",
    "Dee: lunch on Friday is at the Thai place near the station.",
    "Eve: the finance server is backed up nightly to the Frankfurt bucket.",
    "Fay: the marketing offsite is planned for the second week of June.",
    "Gus: disk alerts for the finance server go to the #ops-finance channel.",
    "Hal: the payroll export was moved to a bigger disk on Monday.",
]
QUERY = "why did the payroll export fail on Friday?"
BANK = "degradation"
NO_VECTOR_ROLE = "rcll_no_vectors"


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(settings, label: str, rows: list, times: int = 1, cold_start: bool = False,
        **overrides) -> dict:
    """Ask QUERY ``times`` with ``overrides`` applied to the settings; append the answer's
    row. ``cold_start``: empty tier 1 first, so the row shows what tiers 2–3 do."""
    if cold_start:
        redis.Redis.from_url(settings.redis_url).flushdb()
    svc = bootstrap(settings.model_copy(update=overrides))
    client = create_app(services=svc, enqueue=lambda *_: None).test_client()
    try:
        for _ in range(times):
            r = client.post(f"/v1/default/banks/{BANK}/memories/recall",
                            json={"query": QUERY, "trace": True})
            body = r.get_json()
            if svc.__dict__.get("after_recall") is not None:
                svc.after_recall.flush(10)
        if r.status_code != 200:
            err = body.get("error", body)
            rows.append((label, r.status_code, "—", "—", "—", "—", 0,
                         f"{err.get('code')}: {err.get('message')}"))
        else:
            rows.append((label, 200, ", ".join(body["tiers"]) or "—", body["mode"],
                         ", ".join(body["channels"]) or "—", body["reranked"],
                         len(body["results"]), "; ".join(body["degraded"]) or "—"))
        return body
    finally:
        svc.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state-dir", default=".rcll-bench/degradation")
    ap.add_argument("--pg-port", type=int, default=55471)
    args = ap.parse_args()
    s = scratch_database(Path(args.state_dir).resolve(), args.pg_port, "rcll_degradation")
    s = s.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0",
                             "db_pool_timeout_s": 2})
    dev_redis.ensure(s, log=lambda *_: None)
    with psycopg.connect(s.db_url, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {NO_VECTOR_ROLE}")
        conn.execute(f"CREATE ROLE {NO_VECTOR_ROLE} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {NO_VECTOR_ROLE}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {NO_VECTOR_ROLE}")
        conn.execute(f"REVOKE SELECT ON memory_embeddings FROM {NO_VECTOR_ROLE}")
    svc = bootstrap(s)
    c = create_app(services=svc, enqueue=lambda *_: None).test_client()
    items = [{"content": t, "document_id": f"n{i}"} for i, t in enumerate(NOTES)]
    r = c.post(f"/v1/default/banks/{BANK}/memories", json={"items": items, "async": False})
    assert r.status_code == 200, r.get_json()
    svc.close()

    rows: list = []
    ask(s, "nothing (first ask)", rows)
    ask(s, "nothing (the same question again)", rows)
    dev_redis.stop(s)
    ask(s, "Redis (server stopped)", rows)
    dev_redis.ensure(s, log=lambda *_: None)
    ask(s, "nothing (Redis started again)", rows)
    ask(s, "embedder", rows, embedder_enabled=False)
    no_vec = s.db_url.replace("postgresql://rcll@", f"postgresql://{NO_VECTOR_ROLE}@")
    ask(s, "pgvector (embeddings unreadable)", rows, cold_start=True,
        readonly_database_url=no_vec)
    ask(s, "cross-encoder (model path missing)", rows, cold_start=True,
        reranker_model="/nonexistent/reranker")
    dev_redis.stop(s)
    ask(s, "Redis and embedder", rows, embedder_enabled=False)
    dev_redis.ensure(s, log=lambda *_: None)
    postgres.stop(s, log=lambda *_: None)
    t = time.perf_counter()
    ask(s, "PostgreSQL (server stopped)", rows)
    pg_ms = (time.perf_counter() - t) * 1000
    dev_redis.stop(s)

    print(f"\nquery: {QUERY!r}; bank of {len(NOTES)} notes\n")
    print("| part down | HTTP | tiers (answering last) | mode | channels | reranked | results |"
          " degraded |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    print(f"\nPostgreSQL down answered in {pg_ms:.0f} ms (including app start).")


if __name__ == "__main__":
    main()
