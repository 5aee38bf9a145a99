"""Recall from a streaming replica beside the primary (issue 23 item 5): p50/p95 of the
cold tier, in-process, the same questions alternating between a process reading the
primary and one reading a hot standby of it.

    cd <checkout> && HF_HUB_OFFLINE=1 PYTHONPATH=. .venv/bin/python benchmarks/replica_recall.py \
        [--conversations 3] [--questions 300] [--state-dir .rcll-bench/recall-load] \
        [--pg-port 56401] [--standby-port 56403] [--out benchmarks/results/replica_recall.json]

Starts (or reuses) the stack of ``benchmarks/recall_load.py`` in ``--state-dir`` (its
LoCoMo banks ``load-*`` are ingested when missing), makes a standby of its PostgreSQL with
``pg_basebackup -R`` (:func:`rcll.dev.postgres.start_standby`) on ``--standby-port``, and
builds two in-process services: ``primary`` (no replica) and ``replica``
(``RCLL_REPLICA_DATABASE_URL`` = the standby). Both run with ``RCLL_QUERY_CACHE_SIZE=0`` and
``RCLL_ACTIVATION=off`` (every recall embeds its query and runs the cold tier; nothing is
promoted to tier 1). Each question is asked of both, order alternating; wall ms of
``cascade.recall``. Also reports how many recalls the router served from the replica.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from rcll.bootstrap import bootstrap
    from rcll.client import RCLLClient
    from rcll.config import Settings
    from rcll.dev import postgres, stack
    from rcll.eval.datasets import load_locomo
    from rcll.eval.runner import ingest
    from rcll.search.models import RecallQuery

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--conversations", type=int, default=3)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "recall-load"))
    ap.add_argument("--pg-port", type=int, default=56401)
    ap.add_argument("--redis-port", type=int, default=56402)
    ap.add_argument("--standby-port", type=int, default=56403)
    ap.add_argument("--api-port", type=int, default=56410)
    ap.add_argument("--keep", action="store_true", help="leave the stack and standby running")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    s = Settings(state_dir=Path(args.state_dir), pg_port=args.pg_port,
                 redis_url=f"redis://127.0.0.1:{args.redis_port}/0", api_port=args.api_port,
                 max_items_per_request=1000)
    standby = s.model_copy(update={"state_dir": Path(args.state_dir) / "standby",
                                   "pg_port": args.standby_port})
    ds = load_locomo(Path(args.data), bank_prefix="load-")
    ds.banks = dict(list(ds.banks.items())[:args.conversations])
    questions = [q for q in ds.questions if q.bank_id in ds.banks]
    random.Random(11).shuffle(questions)
    questions = questions[:args.questions]
    svcs = {}
    try:
        stack.up(s, api=True, worker=True, log=lambda *_: None)
        with RCLLClient(s.base_url, timeout=300) as client:
            have = {b.get("bank_id") or b.get("id") for b in
                    client._request("GET", "/v1/default/banks?limit=1000").json()["banks"]}
            if not set(ds.banks) <= have:
                st = ingest(client, ds, progress=False)
                print(f"ingested {st['units']:,} units", flush=True)
        postgres.start_standby(s, standby, log=lambda *_: None)
        base = s.model_copy(update={"query_cache_size": 0, "activation": False})
        svcs["primary"] = bootstrap(base)
        svcs["replica"] = bootstrap(base.model_copy(update={
            "replica_database_url": f"postgresql://rcll@127.0.0.1:{args.standby_port}/rcll"}))
        router = svcs["replica"].replica
        with svcs["primary"].pool.connection() as conn:
            want = conn.execute("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS n"
                                ).fetchone()["n"]
        while (router.replayed() or -1) < want:
            time.sleep(0.1)
        for svc in svcs.values():
            svc.embedder.get()
            for q in questions[:20]:  # warm both pools and caches
                svc.cascade.recall(q.bank_id, RecallQuery(query=q.query, limit=50))
        served0 = dict(router.served)
        lat = {"primary": [], "replica": []}
        for i, q in enumerate(questions):
            order = ["primary", "replica"] if i % 2 else ["replica", "primary"]
            for name in order:
                t = time.perf_counter()
                svcs[name].cascade.recall(q.bank_id, RecallQuery(query=q.query, limit=50))
                lat[name].append((time.perf_counter() - t) * 1000)
        served = {k: router.served[k] - served0[k] for k in served0}
    finally:
        for svc in svcs.values():
            svc.close()
        if not args.keep:
            postgres.stop(standby, log=lambda *_: None)
            stack.down(s, log=lambda *_: None)

    def pct(xs, p):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(p * len(xs)))]

    table = {k: {"p50_ms": pct(v, 0.5), "p95_ms": pct(v, 0.95),
                 "mean_ms": statistics.fmean(v), "n": len(v)} for k, v in lat.items()}
    print(f"{len(questions)} questions over {len(ds.banks)} banks, cold tier, in-process; "
          f"replica router: {served['replica']} served by the standby, "
          f"{served['primary']} by the primary")
    print("| reads from | p50 ms | p95 ms | mean ms |\n|---|---|---|---|")
    for k, m in table.items():
        print(f"| {k} | {m['p50_ms']:.1f} | {m['p95_ms']:.1f} | {m['mean_ms']:.1f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"table": table, "served": served, "args": vars(args),
             "when": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2) + "\n")


if __name__ == "__main__":
    main()
