"""Recall under concurrency: QPS, p50 and p95 at 1, 4 and 16 clients, API process models
side by side in the same run, during an ingest.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/recall_load.py \
        --data ../shared/data/locomo [--conversations 3] [--clients 1,4,16] [--duration 20] \
        [--rounds 2] [--variants before,after] [--out benchmarks/results/recall_load.json]

Starts its own stack (PostgreSQL, Redis, one Celery worker with this checkout's defaults;
state in ``--state-dir``), ingests the first ``--conversations`` LoCoMo conversations (a
bank each; kept between runs, ``--fresh`` re-ingests), then starts one API per variant on
its own port, all running at once:

- ``before``: the branch point's code (``git archive`` of ``--base``) with this
  checkout's process defaults (as ``after``), so the two differ in code only;
- ``filed``: the ``--base`` code with the process settings ``rcll serve`` then used (1
  worker x 4 threads, torch's default threads, no micro-batching): with ``--base`` the
  commit main was at when an issue was filed, that issue's "today";
- ``after``: this checkout with its defaults (``RCLL_API_WORKERS`` x ``RCLL_API_THREADS``,
  ``RCLL_TORCH_THREADS``);
- ``wWxTtK`` (e.g. ``w2x4t1``): this checkout, W gunicorn workers x T threads, torch K
  threads (0 = default); suffix ``b`` (``w2x4t1b``) turns on query micro-batching
  (``RCLL_QUERY_BATCH_WAIT_MS=2``), ``bM`` with M ms (``w2x8t1b5``); suffix ``gN``
  (``w2x16t1bg4``) sets ``RCLL_RECALL_MAX_IN_FLIGHT=N`` (backpressure), ``g0`` none; a
  variant without ``g`` runs with the checkout's default.

``today`` is the checkout's code with the settings main shipped when issue 23 was filed (1
worker x 4 threads, the embedder on torch with 1 thread, no micro-batching, no
backpressure), ``after`` the checkout's defaults.

Every API runs with ``RCLL_QUERY_CACHE_SIZE=0`` (each request embeds its query, as a
fleet asking new questions does) and the deployment's default recipe. While measuring, a
background thread keeps re-ingesting one conversation into a scratch bank through the API
(``--no-ingest`` turns it off), so the worker competes for the cores as in the issue.

For each client count, for each variant in turn (order alternating), ``N`` client threads
post LoCoMo questions of the ingested banks back to back for ``--duration`` seconds;
QPS = answered / seconds, p50/p95 of wall ms per request. Errors are counted and printed.
Each variant's tier 1 is a Redis database of its own, emptied before each measurement, so
no variant answers from promotions and cues another variant's questions left; within one
measurement a question asked again (the list wraps past ``len(questions)`` answers) may be
answered by tier 1, as a re-asked question is in service.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ingest_documents import _portable as portable  # noqa: E402
from benchmarks.ingest_throughput import base_tree, variant_env  # noqa: E402

# the stack recall_load starts (recall_cpu_split starts the same one)
STATE_DIR = ROOT / ".rcll-bench" / "recall-load"
PG_PORT, REDIS_PORT, API_PORT = 54381, 6421, 8831


def require_banks(s, banks: set[str], script: str, start: str) -> None:
    """Exit with what to run when ``s``'s PostgreSQL is down or lacks the ``load-*`` banks
    ``banks`` (``start``: the command that makes them) — for the scripts that measure against
    this stack without ingesting."""
    import psycopg

    try:
        with psycopg.connect(s.db_url, connect_timeout=3) as conn:
            have = {r[0] for r in conn.execute("SELECT id FROM memory_banks WHERE id = ANY(%s)",
                                               (sorted(banks),))}
    except psycopg.OperationalError as e:
        raise SystemExit(f"{script}: no PostgreSQL at {s.db_url} ({e.__class__.__name__}); "
                         + start) from None
    if have != banks:
        raise SystemExit(f"{script}: the stack lacks banks {sorted(banks - have)}; " + start)


def parse_variant(name: str, tree: Path, defaults) -> dict:
    """``{"name", "tree", "workers", "threads", "torch", "batch"}`` for a variant name."""
    if name == "before":
        return {**parse_variant("after", tree, defaults), "name": name, "tree": tree}
    if name == "filed":
        return {"name": name, "tree": tree, "workers": 1, "threads": 4, "torch": 0,
                "batch": 0, "gate": None}
    if name == "today":
        return {"name": name, "tree": ROOT, "workers": 1, "threads": 4, "torch": 1,
                "batch": 0, "gate": 0, "runtime": "torch"}
    if name == "after":
        return {"name": name, "tree": ROOT, "workers": defaults.api_workers,
                "threads": defaults.api_threads, "torch": defaults.torch_threads,
                "batch": defaults.query_batch_wait_ms, "gate": None}
    m = re.fullmatch(r"w(\d+)x(\d+)t(\d+)(?:b(\d*))?(?:g(\d+))?", name)
    if not m:
        raise SystemExit(f"unknown variant {name!r}: before, filed, today, after or "
                         "wWxTtK[b[M]][gN]")
    batch = 0 if m[4] is None else (int(m[4]) if m[4] else 2)
    return {"name": name, "tree": ROOT, "workers": int(m[1]), "threads": int(m[2]),
            "torch": int(m[3]), "batch": batch,
            "gate": int(m[5]) if m[5] is not None else None}


def hot_db(s, index: int) -> str:
    """The Redis URL of variant ``index``'s tier 1 (1-based): database ``index`` of the
    stack's Redis, so one variant's promotions and cues never answer another's questions."""
    base = s.redis_url.rsplit("/", 1)[0]
    return f"{base}/{index}"


def start_api(s, v: dict, port: int, index: int = 0) -> None:
    """Start the variant's gunicorn on ``port`` and wait for /healthz; with ``index`` > 0
    its tier 1 is Redis database ``index`` (:func:`hot_db`; the broker stays the stack's)."""
    from rcll.dev import processes, stack

    run_dir = s.run_dir.resolve()
    name = f"api-{v['name']}"
    processes.stop(run_dir, name)
    env = variant_env(s, v["tree"])
    env.update({"RCLL_AUTH": "off", "RCLL_API_PORT": str(port),
                "RCLL_QUERY_CACHE_SIZE": "0", "RCLL_TORCH_THREADS": str(v["torch"]),
                "RCLL_QUERY_BATCH_WAIT_MS": str(v["batch"])})
    if v.get("gate") is not None:
        env["RCLL_RECALL_MAX_IN_FLIGHT"] = str(v["gate"])
    if v.get("runtime"):
        env["RCLL_EMBED_RUNTIME"] = v["runtime"]
    if index > 0:
        env["RCLL_REDIS_URL"], env["RCLL_BROKER_URL"] = hot_db(s, index), s.broker
    cmd = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
           "--workers", str(v["workers"]), "--threads", str(v["threads"]),
           "--timeout", "300", "api.app:create_app()"]
    processes.start(run_dir, name, cmd, env=env, cwd=v["tree"])
    stack.wait_http(f"http://127.0.0.1:{port}/healthz", 180,
                    lambda: processes.running_pid(run_dir, name) is not None)


def load(url: str, questions: list, clients: int, duration_s: float) -> dict:
    """``clients`` threads posting questions back to back for ``duration_s``; the figures."""
    lat: list[float] = []
    busy: list[float] = []  # ms of each 503 (overloaded or database_unavailable)
    errors = [0]
    lock = threading.Lock()
    pool = itertools.cycle(questions)
    stop_at = time.perf_counter() + duration_s

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            while time.perf_counter() < stop_at:
                with lock:
                    q = next(pool)
                t = time.perf_counter()
                try:
                    r = http.post(f"{url}/v1/default/banks/{q.bank_id}/memories/recall",
                                  json={"query": q.query, "limit": 50})
                    status = r.status_code
                except httpx.HTTPError:
                    status = None
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    if status == 200:
                        lat.append(ms)
                    elif status == 503:
                        busy.append(ms)
                    else:
                        errors[0] += 1
                if status == 503:  # honour Retry-After as a fleet's client would
                    time.sleep(float(r.headers.get("Retry-After", "1")))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    seconds = time.perf_counter() - t0
    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")

    busy.sort()
    return {"answered": len(lat), "errors": errors[0], "seconds": seconds,
            "refused_503": len(busy),
            "refused_p50_ms": busy[len(busy) // 2] if busy else None,
            "refused_max_ms": busy[-1] if busy else None,
            "qps": len(lat) / seconds, "p50_ms": pct(0.50), "p95_ms": pct(0.95),
            "mean_ms": statistics.fmean(lat) if lat else float("nan")}


def background_ingest(s, items: list[dict], stop: threading.Event, done: list) -> None:
    """Re-ingest ``items`` into a scratch bank, again and again, until ``stop``."""
    from rcll.client import RCLLClient

    with RCLLClient(s.base_url, timeout=300) as client:
        n = 0
        while not stop.is_set():
            bank = f"load-ingest-{n % 2}"
            client.delete_bank(bank)
            ops = [(bank, str(client.retain(bank, items[i:i + 200], async_=True)
                              ["operation_id"])) for i in range(0, len(items), 200)]
            while not stop.is_set():
                states = [client.operation(b, o)["status"] for b, o in ops]
                if all(st in ("succeeded", "partial", "failed") for st in states):
                    done.append(len(items))
                    break
                time.sleep(0.5)
            n += 1


def main() -> None:
    from rcll.client import RCLLClient
    from rcll.config import Settings
    from rcll.dev import processes, stack
    from rcll.eval.datasets import load_locomo
    from rcll.eval.runner import ingest

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--conversations", type=int, default=3)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per measurement")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="before,after")
    ap.add_argument("--base", default=None,
                    help="the commit 'before' runs (default: git merge-base HEAD main)")
    ap.add_argument("--no-ingest", action="store_true", help="no ingest while measuring")
    ap.add_argument("--fresh", action="store_true", help="re-ingest the recall banks")
    ap.add_argument("--state-dir", default=str(STATE_DIR))
    ap.add_argument("--pg-port", type=int, default=PG_PORT)
    ap.add_argument("--redis-port", type=int, default=REDIS_PORT)
    ap.add_argument("--api-port", type=int, default=API_PORT, help="the ingest API; variants +1..")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    defaults = Settings()
    s = Settings(state_dir=Path(args.state_dir), pg_port=args.pg_port,
                 redis_url=f"redis://127.0.0.1:{args.redis_port}/0", api_port=args.api_port,
                 max_items_per_request=1000)
    s.run_dir.mkdir(parents=True, exist_ok=True)
    base = args.base or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT,
                                       check=True, text=True, capture_output=True).stdout.strip()
    tree = base_tree(Path(args.state_dir), base)
    variants = [parse_variant(v.strip(), tree, defaults) for v in args.variants.split(",")]
    levels = [int(c) for c in args.clients.split(",")]
    ds = load_locomo(Path(args.data), bank_prefix="load-")
    ds.banks = dict(list(ds.banks.items())[:args.conversations])
    questions = [q for q in ds.questions if q.bank_id in ds.banks]
    random.Random(7).shuffle(questions)
    scratch = list(load_locomo(Path(args.data)).banks.values())[-1]
    results: list[dict] = []
    stop = threading.Event()
    ingested: list[int] = []
    try:
        stack.up(s, worker=True, log=lambda *_: None)
        with RCLLClient(s.base_url, timeout=300) as client:
            have = {b["bank_id"] if "bank_id" in b else b.get("id")
                    for b in client._request("GET", "/v1/default/banks?limit=1000")
                    .json()["banks"]}
            if args.fresh or not set(ds.banks) <= have:
                for b in ds.banks:
                    client.delete_bank(b)
                st = ingest(client, ds, progress=False)
                print(f"ingested {st['units']:,} units ({st['units_per_s']:.1f}/s)", flush=True)
        ports = {}
        for i, v in enumerate(variants, 1):
            ports[v["name"]] = args.api_port + i
            start_api(s, v, ports[v["name"]], i)
        for v in variants:  # every worker process loads its models before timing
            load(f"http://127.0.0.1:{ports[v['name']]}", questions[:50], 4 * v["workers"], 8)
        print(f"{len(questions)} questions over {len(ds.banks)} banks; variants "
              + ", ".join(f"{v['name']} = {v['workers']} workers x {v['threads']} threads, "
                          f"torch {v['torch'] or 'default'}"
                          f"{', query batching ' + str(v['batch']) + ' ms' if v['batch'] else ''}"
                          f"{', max in flight ' + str(v['gate']) if v.get('gate') else ''}"
                          for v in variants)
              + f"; {'with' if not args.no_ingest else 'without'} ingest", flush=True)
        if not args.no_ingest:
            threading.Thread(target=background_ingest, args=(s, scratch, stop, ingested),
                             daemon=True).start()
            time.sleep(5)
        offset = 0
        for r in range(1, args.rounds + 1):
            for c in levels:
                order = variants if (r + levels.index(c)) % 2 else variants[::-1]
                for v in order:
                    qs = questions[offset:] + questions[:offset]
                    offset = (offset + 97) % len(questions)
                    # tier 1 starts empty: a question is a re-ask only within this run
                    redis.Redis.from_url(hot_db(s, variants.index(v) + 1)).flushdb()
                    res = load(f"http://127.0.0.1:{ports[v['name']]}", qs, c, args.duration)
                    res.update({"variant": v["name"], "round": r, "clients": c,
                                "load_avg": os.getloadavg()[0]})
                    results.append(res)
                    print(f"  round {r} {c:2d} clients {v['name']:9s}: {res['qps']:6.2f} QPS, "
                          f"p50 {res['p50_ms']:7.1f} ms, p95 {res['p95_ms']:7.1f} ms, "
                          f"{res['answered']} answered, {res['refused_503']} 503s"
                          + (f" (p50 {res['refused_p50_ms']:.0f} ms, max "
                             f"{res['refused_max_ms']:.0f} ms)" if res['refused_503'] else "")
                          + f", {res['errors']} errors "
                          f"(load {res['load_avg']:.1f})", flush=True)
    finally:
        stop.set()
        run_dir = s.run_dir.resolve()
        for v in variants:
            processes.stop(run_dir, f"api-{v['name']}")
        stack.down(s, log=lambda *_: None)
    print(f"\nmedian over rounds (ingest ran {'no' if args.no_ingest else len(ingested)} "
          "full passes meanwhile):")
    print("| clients | " + " | ".join(f"{v['name']} QPS | p50 ms | p95 ms | 503s"
                                     for v in variants) + " |")
    print("|---|" + "---|---|---|---|" * len(variants))
    table = {}
    for c in levels:
        row = []
        for v in variants:
            mine = [x for x in results if x["variant"] == v["name"] and x["clients"] == c]
            m = {k: statistics.median(x[k] for x in mine)
                 for k in ("qps", "p50_ms", "p95_ms", "refused_503")}
            m["qps_range"] = [min(x["qps"] for x in mine), max(x["qps"] for x in mine)]
            table.setdefault(str(c), {})[v["name"]] = m
            row.append(f"{m['qps']:.2f} | {m['p50_ms']:.0f} | {m['p95_ms']:.0f} | "
                       f"{m['refused_503']:.0f}")
        print(f"| {c} | " + " | ".join(row) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"runs": results, "table": table,
             "variants": [portable(v) for v in variants], "args": portable(vars(args)),
             "when": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
