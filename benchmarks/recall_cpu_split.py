"""Where a recall's CPU goes on the whole machine: the API, PostgreSQL, Redis and the load
generator, per answered recall, under ``N`` concurrent clients (issue 23 item 1: what
``benchmarks/recall_profile.py`` cannot see from inside the API process).

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/recall_cpu_split.py \
        [--clients 1,16] [--duration 20] [--rounds 1] [--compare warm_skip_after=0] \
        [--statements 15] [--out ...json]

Starts ``benchmarks/recall_load.py``'s stack (its state folder and ports; PostgreSQL,
Redis and the API with this checkout's defaults, no worker) and needs its ``load-*`` LoCoMo
banks (run ``recall_load.py`` once first; this script exits saying so). For each client count
it posts LoCoMo questions for ``--duration`` seconds (:func:`recall_load.load`) and reads
the CPU seconds (``/proc/<pid>/stat`` user + system) of every process before and after,
grouped by command line. ``--statements N``: PostgreSQL's own time per statement over the
run, top ``N`` (``pg_stat_statements``, loaded for the run by a restart of the stack's
server and removed again at the end). ``--compare field=value[,field=value]``: each
measurement also runs, in turn, with the API restarted on those settings (``Settings``
fields; the variant ``compare``) beside its defaults (``defaults``): a comparison of
settings on the same code in the same run. The stack is stopped at the end.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import recall_load  # noqa: E402  (its stack's defaults and its load generator)
from ingest_documents import _portable as portable  # noqa: E402

GROUPS = (("postgres", "postgres"), ("redis", "redis-server"), ("api", "gunicorn"),
          ("api", "rcll serve"), ("rabbitmq", "beam.smp"))


def cpu_by_group(own_pid: int) -> collections.Counter:
    """``{group: CPU seconds}`` of every process now: :data:`GROUPS` by command line,
    ``load generator`` for this process, ``other`` for the rest."""
    hz = os.sysconf("SC_CLK_TCK")
    out: collections.Counter = collections.Counter()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        seconds = (int(fields[11]) + int(fields[12])) / hz
        group = "load generator" if int(pid) == own_pid else next(
            (g for g, needle in GROUPS if needle in cmd), "other")
        out[group] += seconds
    return out


def top_statements(url: str, n: int) -> list[dict]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT calls, total_exec_time AS ms, "
            "left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS query "
            "FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT %s", (n,)).fetchall()


def main() -> None:
    import psycopg
    import redis

    from rcll.config import Settings
    from rcll.dev import processes, stack
    from rcll.eval.datasets import load_locomo

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--clients", default="1,16")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--compare", default="",
                    help="field=value[,field=value]: Settings the API is also run with")
    ap.add_argument("--statements", type=int, default=0)
    ap.add_argument("--state-dir", default=str(recall_load.STATE_DIR))
    ap.add_argument("--pg-port", type=int, default=recall_load.PG_PORT)
    ap.add_argument("--redis-port", type=int, default=recall_load.REDIS_PORT)
    ap.add_argument("--api-port", type=int, default=recall_load.API_PORT)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    s = Settings(state_dir=Path(args.state_dir), pg_port=args.pg_port,
                 redis_url=f"redis://127.0.0.1:{args.redis_port}/0", api_port=args.api_port)
    variants = {"defaults": s}
    if args.compare:
        changed = dict(kv.split("=", 1) for kv in args.compare.split(","))
        variants["compare"] = Settings(**{**s.model_dump(exclude_unset=True), **changed})
    ds = load_locomo(Path(args.data), bank_prefix="load-")
    questions = list(ds.questions)
    random.Random(7).shuffle(questions)
    log = lambda *_: None  # noqa: E731
    runs = []
    try:
        stack.up(s, worker=False, mcp=False, log=log)
        recall_load.require_banks(s, set(ds.banks), "recall_cpu_split",
                                  "run benchmarks/recall_load.py --conversations 10 once first")
        if args.statements:
            with psycopg.connect(s.db_url, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
            stack.down(s, log=log)
            stack.up(s, worker=False, mcp=False, log=log)
            with psycopg.connect(s.db_url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        url = f"http://127.0.0.1:{args.api_port}"
        offset = 200
        running = None
        plan = [(r, c, name) for r in range(1, args.rounds + 1)
                for c in [int(x) for x in args.clients.split(",")]
                for name in (list(variants) if r % 2 else list(variants)[::-1])]
        for r, c, name in plan:
            if name != running:  # the API restarted on the variant's settings
                processes.stop(s.run_dir.resolve(), "api")
                stack.up(variants[name], worker=False, mcp=False, log=log)
                recall_load.load(url, questions[:50], 4, 5)  # models loaded, caches warm
                running = name
            redis.Redis.from_url(s.redis_url).flushdb()  # tier 1 starts empty
            if args.statements:
                with psycopg.connect(s.db_url, autocommit=True) as conn:
                    conn.execute("SELECT pg_stat_statements_reset()")
            before = cpu_by_group(os.getpid())
            res = recall_load.load(url, questions[offset:] + questions[:offset], c,
                                   args.duration)
            after = cpu_by_group(os.getpid())
            offset = (offset + 97) % len(questions)
            n = max(res["answered"], 1)
            cpu = {g: after[g] - before.get(g, 0.0) for g in after}
            run = {"round": r, "variant": name, "clients": c, "qps": res["qps"],
                   "p50_ms": res["p50_ms"],
                   "p95_ms": res["p95_ms"], "answered": res["answered"],
                   "cpu_ms_per_recall": {g: round(v / n * 1000, 2)
                                         for g, v in sorted(cpu.items(), key=lambda x: -x[1])
                                         if v > 0.01}}
            print(f"round {r} {name:8s} {c:2d} clients: {res['qps']:.1f} QPS, p50 "
                  f"{res['p50_ms']:.0f} ms, p95 "
                  f"{res['p95_ms']:.0f} ms; CPU ms per recall: "
                  + ", ".join(f"{g} {v:.1f}" for g, v in run["cpu_ms_per_recall"].items())
                  + f" (total {sum(run['cpu_ms_per_recall'].values()):.1f})", flush=True)
            if args.statements:
                run["statements"] = top_statements(s.db_url, args.statements)
                for st in run["statements"]:
                    print(f"    {st['ms'] / n:6.2f} ms/recall {st['calls']:6d} calls  "
                          f"{st['query']}", flush=True)
            runs.append(run)
    finally:
        if args.statements:
            try:
                with psycopg.connect(s.db_url, autocommit=True) as conn:
                    conn.execute("DROP EXTENSION IF EXISTS pg_stat_statements")
                    conn.execute("ALTER SYSTEM RESET shared_preload_libraries")
            except psycopg.Error:
                pass
        stack.down(s, log=log)
    print("\nmedian over rounds: | clients | variant | QPS | p95 ms | CPU ms per recall "
          "(api / postgres / load generator / total) |")
    for c in dict.fromkeys(r["clients"] for r in runs):
        for name in variants:
            rows = [r for r in runs if r["clients"] == c and r["variant"] == name]
            med = lambda k, rows=rows: statistics.median(k(r) for r in rows)  # noqa: E731
            cpu = [med(lambda r, g=g: r["cpu_ms_per_recall"].get(g, 0.0))
                   for g in ("api", "postgres", "load generator")]
            total = med(lambda r: sum(r["cpu_ms_per_recall"].values()))
            print(f"| {c} | {name} | {med(lambda r: r['qps']):.1f} | "
                  f"{med(lambda r: r['p95_ms']):.0f} | "
                  + " / ".join(f"{v:.1f}" for v in cpu) + f" / {total:.1f} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"runs": runs, "args": portable(vars(args)),
                                              "when": time.strftime("%Y-%m-%d %H:%M:%S")},
                                             indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
