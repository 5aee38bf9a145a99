"""LoCoMo in chunk mode: entities per conversation, the top entities of one, and what the
entities stage costs the ingest, all in one run.

Starts its own PostgreSQL (the embedded wheel, a temporary folder, a free port) unless
``--database-url`` names one, ingests LoCoMo turns (one bank per conversation, items shaped
as ``rcll eval locomo`` sends them, jobs of ``--batch`` items) through the real pipeline
in-process (:func:`rcll.retain.stages.run_sync`: chunk → extract (no-op in chunk mode) →
entities → embed → link), timing each stage, then prints:

- ingest units/s without the entities stage (chunk + embed, today's pipeline) and with it,
  and the entities stage alone, from the same run;
- entities per conversation (live entities, mentions, entity and temporal links);
- the top-10 entities of ``--show`` with mention counts (both speakers must be among them).

    PYTHONPATH=. python benchmarks/entities_locomo.py ../shared/data/locomo --turns 2000
    PYTHONPATH=. python benchmarks/entities_locomo.py ../shared/data/locomo   # all 5,882 turns

(``PYTHONPATH=.``: a script run by path imports the installed ``rcll``, not this checkout.)
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rcll.config import Settings
from rcll.eval.datasets import load_locomo
from rcll.retain import stages
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain

PREFIX = "bench-ent-"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _own_database() -> tuple[Settings, callable]:
    from rcll.dev import postgres
    from rcll.store import migrate

    state = Path(tempfile.mkdtemp(prefix="rcll-bench-ent-"))
    state.chmod(0o755)
    port = _free_port()
    s = Settings(state_dir=state, pg_port=port,
                 database_url=f"postgresql://rcll@127.0.0.1:{port}/rcll_bench")
    postgres.start(s, log=lambda *_: None)
    postgres.create_database(s, "rcll_bench", drop=True)
    migrate.upgrade(s)

    def cleanup() -> None:
        postgres.stop(s, log=lambda *_: None)
        shutil.rmtree(state, ignore_errors=True)

    return s, cleanup


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", help="folder with locomo10_memories.jsonl")
    ap.add_argument("--turns", type=int, default=0, help="first N turns only (0: all)")
    ap.add_argument("--batch", type=int, default=50, help="items per retain job")
    ap.add_argument("--show", default="conv-26", help="conversation whose top entities to print")
    ap.add_argument("--skip-embed", action="store_true",
                    help="replace the embed stage by a no-op (entity stats fast; the units/s "
                         "lines then leave out embedding)")
    ap.add_argument("--database-url", default=None, help="use this database (migrated) instead")
    args = ap.parse_args()

    from rcll.bootstrap import bootstrap

    cleanup = None
    if args.database_url:
        settings = Settings(database_url=args.database_url)
    else:
        settings, cleanup = _own_database()
    svc = bootstrap(settings)
    try:
        _run(svc, args)
    finally:
        svc.close()
        if cleanup:
            cleanup()


def _run(svc, args) -> None:
    ds = load_locomo(args.data, bank_prefix=PREFIX)
    budget = args.turns or ds.n_items
    jobs_items: list[tuple[str, list[dict]]] = []
    for bank, items in ds.banks.items():
        items = items[:budget]
        budget -= len(items)
        jobs_items += [(bank, items[i:i + args.batch]) for i in range(0, len(items), args.batch)]
        if budget <= 0:
            break
    ctx = svc.retain_context()
    ctx.embedder.get()  # load once, outside the timings
    with svc.pool.connection() as conn:
        conn.execute("DELETE FROM memory_banks WHERE id LIKE %s", (PREFIX + "%",))
    spent: dict[str, float] = defaultdict(float)
    timed = tuple(stages.Stage(st.name, st.queue, _timer(st, spent))
                  for st in stages.STAGES if not (args.skip_embed and st.name == "embed"))
    original, stages.STAGES = stages.STAGES, timed
    try:
        for bank, items in jobs_items:
            with svc.pool.connection() as conn:
                job, _ = submit_retain(conn, bank, [RetainItem(**it) for it in items])
            stages.run_sync(ctx, str(job["id"]))
    finally:
        stages.STAGES = original
    with svc.pool.connection() as conn:
        units = conn.execute("SELECT count(*) AS n FROM memory_units WHERE bank_id LIKE %s",
                             (PREFIX + "%",)).fetchone()["n"]
        states = conn.execute("SELECT state, count(*) AS n FROM jobs WHERE bank_id LIKE %s "
                              "GROUP BY 1", (PREFIX + "%",)).fetchall()
    base = spent["chunk"] + spent.get("embed", 0.0)
    total = sum(spent.values())
    ended = ", ".join(f"{r['state']} {r['n']}" for r in states)
    print(f"LoCoMo chunk mode: {units} units in {len(jobs_items)} jobs of {args.batch} ({ended})")
    print("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in spent.items()))
    print(f"ingest without the entities stage (chunk + embed): {units / base:.1f} units/s")
    print(f"ingest with it (all stages):                       {units / total:.1f} units/s "
          f"(entities stage = {100 * spent['entities'] / base:.1f}% of the chunk+embed time)")
    print(f"entities stage alone: {units / spent['entities']:.0f} units/s")
    _stats(svc, args.show)


def _timer(stage: stages.Stage, spent: dict[str, float]):
    def run(ctx, job_id):
        t = time.perf_counter()
        try:
            return stage.run(ctx, job_id)
        finally:
            spent[stage.name] += time.perf_counter() - t
    return run


def _stats(svc, show: str) -> None:
    with svc.pool.connection() as conn:
        rows = conn.execute(
            """SELECT b.id,
                      (SELECT count(*) FROM memory_units u WHERE u.bank_id = b.id) AS units,
                      (SELECT count(*) FROM entities e WHERE e.bank_id = b.id
                         AND e.merged_into_id IS NULL) AS entities,
                      (SELECT count(*) FROM unit_entities m WHERE m.bank_id = b.id) AS mentions,
                      (SELECT count(*) FROM entity_merge_proposals p WHERE p.bank_id = b.id) AS proposals,
                      (SELECT count(*) FROM memory_links l WHERE l.bank_id = b.id
                         AND l.type = 'entity') AS entity_links,
                      (SELECT count(*) FROM memory_links l WHERE l.bank_id = b.id
                         AND l.type = 'temporal') AS temporal_links
               FROM memory_banks b WHERE b.id LIKE %s ORDER BY b.id""", (PREFIX + "%",)).fetchall()
        print("\n| conversation | units | entities | mentions | proposals | entity links | temporal links |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['id'][len(PREFIX):]} | {r['units']} | {r['entities']} | {r['mentions']} | "
                  f"{r['proposals']} | {r['entity_links']} | {r['temporal_links']} |")
        top = conn.execute(
            """SELECT e.name, e.entity_type, count(*) AS n FROM entities e
               JOIN unit_entities m ON m.entity_id = e.id WHERE e.bank_id = %s
               GROUP BY e.id, e.name, e.entity_type ORDER BY n DESC, e.name LIMIT 10""",
            (PREFIX + show,)).fetchall()
    if top:
        print(f"\ntop entities of {show}: " + ", ".join(
            f"{t['name']} ({t['entity_type']}) {t['n']}" for t in top))


if __name__ == "__main__":
    main()
