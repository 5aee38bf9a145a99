"""What bank aliases and webhooks cost on the paths every request and every job take.

- ``resolve``: :meth:`rcll.banks.aliases.BankAliasService.resolve` of a bank id, cached (the
  steady state within ``RCLL_BANK_ALIAS_CACHE_S``) and uncached (cache time 0: one READ
  ONLY round trip on a pooled connection), for an id that is no alias and one that is;
- ``profile``: ``GET /v1/default/banks/{id}/profile`` through the Flask test client (auth
  off), by the bank's id and by an alias, the cache warm: what an alias adds to a request;
- ``finish``: :func:`rcll.store.jobs.finish` of a retain job in its own transaction, for a
  bank with no webhook and one with 3 subscribed webhooks (the outbox rows it writes);
- ``deliver``: one attempt (:func:`rcll.webhooks.delivery.deliver`: take the claim, sign,
  POST to an HTTP receiver thread on 127.0.0.1 answering 200, record) — serial, in process.

A PostgreSQL of its own (the embedded server, a fresh folder under ``.rcll-bench/``, a
free port); times are wall clock per call after a warm-up. Run::

    PYTHONPATH=. python benchmarks/webhooks_aliases.py [--n 500]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rcll.access.principal import Principal
from rcll.bootstrap import bootstrap
from rcll.config import Settings
from rcll.dev import postgres
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from rcll.store import jobs, migrate
from rcll.store import webhooks as store
from rcll.webhooks import delivery

ROOT = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed(fn, n: int) -> tuple[float, float]:
    """(median, p95) milliseconds of ``n`` calls of ``fn`` after ``n // 10`` untimed."""
    for _ in range(max(1, n // 10)):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    out.sort()
    return statistics.median(out), out[int(0.95 * (len(out) - 1))]


class _Ok(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    n = ap.parse_args().n
    base = ROOT / ".rcll-bench"
    base.mkdir(exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="hooks-", dir=base))
    state.chmod(0o755)
    port = _port()
    s = Settings(state_dir=state, pg_port=port, auth=False, bank_alias_cache_s=60,
                 database_url=f"postgresql://rcll@127.0.0.1:{port}/rcll_bench",
                 webhook_allow_private_networks=True)
    postgres.start(s, log=lambda *_: None)
    try:
        postgres.create_database(s, "rcll_bench", drop=True)
        migrate.upgrade(s)
        run(s, n)
    finally:
        postgres.stop(s, log=lambda *_: None)
        shutil.rmtree(state, ignore_errors=True)


def run(s: Settings, n: int) -> None:
    from api.app import create_app

    svc = bootstrap(s)
    admin = Principal.unrestricted()
    svc.banks.put(admin, "bench-bank", None, {})
    svc.bank_aliases.create(admin, "bench-bank", "bench-alias")
    rows = []
    cold = bootstrap(s.model_copy(update={"bank_alias_cache_s": 0}))
    cold.__dict__["pool"], cold.__dict__["read_pool"] = svc.pool, svc.read_pool
    for label, service in (("cached", svc.bank_aliases), ("uncached", cold.bank_aliases)):
        for what, bid in (("a bank id", "bench-bank"), ("an alias", "bench-alias")):
            rows.append((f"resolve {what}, {label}",
                         *_timed(lambda s=service, b=bid: s.resolve(b), n)))
    svc.embedder.get(), svc.reranker.load()  # the app warms them up: not during the timing
    client = create_app(services=svc, enqueue=lambda *_: None).test_client()
    for what, bid in (("by the bank id", "bench-bank"), ("by an alias", "bench-alias")):
        rows.append((f"GET …/profile {what}",
                     *_timed(lambda b=bid: client.get(f"/v1/default/banks/{b}/profile"), n)))

    server = ThreadingHTTPServer(("127.0.0.1", _port()), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/hook"
    svc.banks.put(admin, "bench-hooked", None, {})
    for _ in range(3):
        svc.webhooks.create(admin, "bench-hooked", url)

    def finisher(bank: str):
        def go():
            with svc.pool.connection() as conn:
                job, _ = submit_retain(conn, bank, [RetainItem(content="x")])
            t = time.perf_counter()
            with svc.pool.connection() as conn:
                jobs.finish(conn, str(job["id"]), "succeeded", {})
            return (time.perf_counter() - t) * 1000
        return go

    for what, bank in (("no webhook", "bench-bank"), ("3 webhooks", "bench-hooked")):
        go = finisher(bank)
        times = sorted(go() for _ in range(n))
        rows.append((f"jobs.finish, {what}", statistics.median(times),
                     times[int(0.95 * (len(times) - 1))]))
    policy = delivery.DeliveryPolicy(retry_delays_s=(), timeout_s=5, allow_private=True)
    with svc.pool.connection() as conn, conn.transaction():
        claims = store.claim_due(conn, policy.lease_s, limit=100_000)
    times = []
    started = time.perf_counter()
    for c in claims:
        t = time.perf_counter()
        out = delivery.deliver(svc.pool, policy, c["id"], c["claim"])
        times.append((time.perf_counter() - t) * 1000)
        assert out["status"] == "completed", out
    took = time.perf_counter() - started
    times.sort()
    rows.append((f"deliver (1 attempt, 200), {len(claims)} serial", statistics.median(times),
                 times[int(0.95 * (len(times) - 1))]))
    server.shutdown()
    print(f"n = {n} per row; milliseconds")
    print(f"{'call':<46} {'median':>8} {'p95':>8}")
    for label, med, p95 in rows:
        print(f"{label:<46} {med:8.3f} {p95:8.3f}")
    print(f"deliveries per second, one process serial: {len(claims) / took:.0f}")
    svc.close()


if __name__ == "__main__":
    main()
