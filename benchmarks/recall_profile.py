"""Where a cold recall's time goes, at 1 and N concurrent clients in one process
(issue 23 item 1): per request the wall time, the thread's CPU time, the recall's own
stage timings (``trace``), the SQL round trips and the wall time spent in them, and the
rest (Flask, auth, JSON serialisation); beside it a GIL probe.

    cd <checkout> && HF_HUB_OFFLINE=1 PYTHONPATH=. .venv/bin/python benchmarks/recall_profile.py \
        [--clients 1,16] [--duration 20] [--state-dir .rcll-bench/recall-load] \
        [--pg-port 54381] [--redis-port 6421] [--start] [--switch-ms 5] [--out ...json]

Runs against the stack that holds ``benchmarks/recall_load.py``'s ``load-*`` LoCoMo banks
(its state folder and, by default, its ports; ``recall_load.py`` ingests them once and stops
its stack at exit). ``--start`` brings that stack's PostgreSQL and Redis up when they are not
running and stops them at exit; without it, or without the banks, it exits saying what to
run. In-process:
the Flask app (``api.app.create_app``) with the checkout's defaults, ``RCLL_QUERY_CACHE_SIZE=0``
and ``RCLL_ACTIVATION=off`` (every request embeds and runs the cold tier), ``N`` threads
posting LoCoMo questions through the app's test client (WSGI in-process: no sockets, no
gunicorn) for ``--duration`` seconds.

Columns: ``wall`` (request), ``cpu`` (``time.thread_time`` of the request's thread: Python,
the torch forward pass, JSON), ``sql`` (wall inside psycopg calls: network, PostgreSQL,
and re-taking the GIL after each), ``round_trips`` (statements + BEGIN/COMMIT/SAVEPOINT,
counted at psycopg's Python layer), the recall's stages (``embed_query``, ``tier_warm``,
``tier_cold`` and the cold pipeline's phases) and ``outside`` = wall − the cascade's
``total`` (routing, auth, validation, serialisation). The GIL probe: a thread sleeping
1 ms in a loop; its oversleep is what any thread coming back from an I/O wait (each SQL
round trip) waits to run again.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_local = threading.local()


def _instrument() -> None:
    """Count round trips and their wall time per thread at psycopg's Python layer."""
    import psycopg
    from psycopg.connection import BaseConnection

    def note(a) -> None:
        _local.rt = getattr(_local, "rt", 0) + 1
        log = getattr(_local, "statements", None)
        if log is not None:
            stmt = a[1] if len(a) > 1 else ""
            stmt = stmt.decode() if isinstance(stmt, bytes) else str(stmt)
            log.append([" ".join(stmt.split())[:110], None])

    def wrap(fn, gen=False):
        if gen:
            def inner(*a, **kw):
                note(a)
                return fn(*a, **kw)
            return inner

        def timed(*a, **kw):
            note(a)
            log = getattr(_local, "statements", None)
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                dt = time.perf_counter() - t
                _local.sql = getattr(_local, "sql", 0.0) + dt
                if log:
                    log[-1][1] = dt * 1000
        return timed

    psycopg.Cursor.execute = wrap(psycopg.Cursor.execute)
    BaseConnection._exec_command = wrap(BaseConnection._exec_command, gen=True)
    # BEGIN / COMMIT / SAVEPOINT run through Transaction.__enter__/__exit__: time them
    from psycopg import transaction as tx

    for name in ("__enter__", "__exit__"):
        orig = getattr(tx.Transaction, name)

        def timed(*a, _orig=orig, **kw):
            t = time.perf_counter()
            try:
                return _orig(*a, **kw)
            finally:
                _local.sql = getattr(_local, "sql", 0.0) + time.perf_counter() - t
        setattr(tx.Transaction, name, timed)


def gil_probe(stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        time.sleep(0.001)
        out.append((time.perf_counter() - t) * 1000 - 1.0)


def run(app, questions, clients: int, duration_s: float) -> dict:
    rows: list[dict] = []
    lock = threading.Lock()
    pool = itertools.cycle(questions)
    stop_at = time.perf_counter() + duration_s

    def client() -> None:
        http = app.test_client()
        while time.perf_counter() < stop_at:
            with lock:
                q = next(pool)
            _local.rt, _local.sql = 0, 0.0
            c0, t0 = time.thread_time(), time.perf_counter()
            r = http.post(f"/v1/default/banks/{q.bank_id}/memories/recall",
                          json={"query": q.query, "limit": 50, "trace": True})
            wall = (time.perf_counter() - t0) * 1000
            cpu = (time.thread_time() - c0) * 1000
            body = r.get_json()
            if r.status_code != 200:
                continue
            tm = body.get("timings_ms") or {}
            row = {"wall": wall, "cpu": cpu, "sql": _local.sql * 1000,
                   "round_trips": _local.rt, "outside": wall - tm.get("total", wall)}
            row.update({k: v for k, v in tm.items() if isinstance(v, (int, float))})
            with lock:
                rows.append(row)

    stop = threading.Event()
    probe: list[float] = []
    pt = threading.Thread(target=gil_probe, args=(stop, probe), daemon=True)
    pt.start()
    t0, c0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    seconds, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    stop.set()
    pt.join()
    keys = sorted({k for r in rows for k in r})
    med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in keys}
    mean = {k: statistics.fmean(r.get(k, 0.0) for r in rows) for k in keys}
    probe.sort()
    return {"clients": clients, "answered": len(rows), "qps": len(rows) / seconds,
            "process_cpu_ms_per_recall": cpu_s * 1000 / max(1, len(rows)),
            "median": med, "mean": mean,
            "gil_probe_ms": {"p50": probe[len(probe) // 2] if probe else None,
                             "p95": probe[int(len(probe) * 0.95)] if probe else None}}


def main() -> None:
    from benchmarks.recall_load import PG_PORT, REDIS_PORT
    from rcll.config import Settings
    from rcll.eval.datasets import load_locomo

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--conversations", type=int, default=3)
    ap.add_argument("--clients", default="1,16")
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "recall-load"))
    ap.add_argument("--pg-port", type=int, default=PG_PORT)
    ap.add_argument("--redis-port", type=int, default=REDIS_PORT)
    ap.add_argument("--start", action="store_true",
                    help="start the stack's PostgreSQL and Redis (no worker, no API) when "
                         "they are not running, and stop them at exit")
    ap.add_argument("--switch-ms", type=float, default=None,
                    help="sys.setswitchinterval in ms (default: Python's 5)")
    ap.add_argument("--activation", action="store_true",
                    help="keep the cascade's activation on (promotion into tier 1, ACT-R "
                         "activation, Hebbian co-recall), as a served API runs by default")
    ap.add_argument("--statements", action="store_true",
                    help="print the SQL statements (first 110 characters) of one recall "
                         "after the warm-up, with each one's wall ms")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.switch_ms is not None:
        sys.setswitchinterval(args.switch_ms / 1000)
    _instrument()
    s = Settings(state_dir=Path(args.state_dir), pg_port=args.pg_port,
                 redis_url=f"redis://127.0.0.1:{args.redis_port}/0", query_cache_size=0,
                 activation=args.activation, auth=False)
    ds = load_locomo(Path(args.data), bank_prefix="load-")
    ds.banks = dict(list(ds.banks.items())[:args.conversations])
    questions = [q for q in ds.questions if q.bank_id in ds.banks]
    random.Random(7).shuffle(questions)
    from benchmarks.recall_load import require_banks
    from rcll.dev import stack

    started = args.start and not _listening(args.pg_port)
    if started:
        stack.up(s, api=False, worker=False, mcp=False, log=lambda *_: None)
    try:
        require_banks(s, set(ds.banks), "recall_profile",
                      "make them once with `benchmarks/recall_load.py --conversations "
                      f"{args.conversations} --clients 1 --duration 1 --rounds 1 --variants after`"
                      ", then run this with --start (or with --pg-port/--redis-port of a "
                      "running stack that holds them)")
        profile(args, s, questions)
    finally:
        if started:
            stack.down(s, log=lambda *_: None)


def _listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def profile(args, s, questions: list) -> None:
    """The measurements of :func:`main` against the running stack of ``s``."""
    from api.app import create_app
    from rcll.bootstrap import bootstrap

    svc = bootstrap(s)
    svc.embedder.get()
    app = create_app(services=svc)
    run(app, questions[:30], 2, 5)  # warm up
    if args.statements:
        _local.statements = []
        q = questions[-1]  # not asked in the warm-up: the cold path
        app.test_client().post(f"/v1/default/banks/{q.bank_id}/memories/recall",
                               json={"query": q.query, "limit": 50})
        print(f"one recall, {len(_local.statements)} round trips:")
        for i, (stmt, ms) in enumerate(_local.statements, 1):
            print(f"  {i:2d} {'' if ms is None else f'{ms:5.1f} ms'} {stmt}")
        _local.statements = None
    out = []
    for c in [int(x) for x in args.clients.split(",")]:
        res = run(app, questions, c, args.duration)
        out.append(res)
        m = res["median"]
        print(f"{c:2d} clients: {res['qps']:.1f} QPS, process CPU "
              f"{res['process_cpu_ms_per_recall']:.1f} ms/recall, GIL probe p50/p95 "
              f"{res['gil_probe_ms']['p50']:.2f}/{res['gil_probe_ms']['p95']:.2f} ms", flush=True)
        print("   median ms: " + ", ".join(f"{k} {m[k]:.1f}" for k in sorted(m)), flush=True)
    svc.close()
    if args.out:
        Path(args.out).write_text(json.dumps({"runs": out, "args": vars(args),
                                              "when": time.strftime("%Y-%m-%d %H:%M:%S")},
                                             indent=2) + "\n")


if __name__ == "__main__":
    main()
