"""What the LLM request log costs the caller, and how fast its writer drains, on its own
PostgreSQL (no Redis or worker needed).

Prints: the time of one ``RequestLog.record`` (the only work on the caller's path), the
writer's throughput (entries per second into ``llm_requests``, batches as they come), and
one LLM call through the scripted stand-in (``rcll-replay``, echo mode) with and without
the log, interleaved, p50 and p95.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/llm_request_log.py [--calls 400]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rcll.config import Settings  # noqa: E402
from rcll.dev import postgres  # noqa: E402
from rcll.store import migrate  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def entry(i: int) -> dict:
    now = datetime.now(UTC)
    return {"bank_id": "bench", "operation": "retain", "scope": "extract",
            "trace_id": f"job-{i // 50}", "document_id": f"doc-{i}", "provider": "rcll-replay",
            "model": "rcll-replay/bench", "status": "success", "outcome": "ok", "attempt": 1,
            "started_at": now, "ended_at": now, "duration_ms": 12, "input_tokens": 900,
            "output_tokens": 120, "cost_usd": 0.0, "error": None}


def run(s: Settings, calls: int) -> None:
    from rcll.bootstrap import Services
    from rcll.llm.client import LLMClient, LLMConfig
    from rcll.llm.prompts import extract_facts
    from rcll.llm.request_log import CallInfo, RequestLog

    svc = Services(s)
    with svc.pool.connection() as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('bench', 'bench') "
                     "ON CONFLICT DO NOTHING")
    log = RequestLog(lambda: svc.pool)
    log.record(entry(0))
    log.flush(10)

    # 1. the caller's cost: one record() (a put on the bounded queue)
    per_record, written, drain = [], 0, 0.0
    for r in range(20):
        batch = [entry(r * 1000 + i) for i in range(1000)]
        t0 = time.perf_counter()
        for e in batch:
            t = time.perf_counter()
            log.record(e)
            per_record.append(time.perf_counter() - t)
        assert log.flush(60)
        drain += time.perf_counter() - t0
        written += len(batch)
    with svc.pool.connection() as conn:
        stored = conn.execute("SELECT count(*) AS n FROM llm_requests").fetchone()["n"]
    print(f"record(): p50 {pct(per_record, 0.5) * 1e6:.1f} us, p99 "
          f"{pct(per_record, 0.99) * 1e6:.1f} us over {len(per_record)} calls")
    print(f"writer: {written} entries in {drain:.2f} s = {written / drain:,.0f} entries/s "
          f"(queued 1,000 at a time, flushed); rows stored {stored}")

    # 2. one LLM call through the stand-in, with and without the log, interleaved
    replay = s.state_dir / "replay.json"
    replay.write_text(json.dumps({"default": "echo", "scripts": []}))
    cfg = LLMConfig.from_settings(s.model_copy(update={
        "llm_provider": "litellm", "llm_model": "rcll-replay/bench", "llm_replay_path": replay}))
    with_log, without = LLMClient(cfg, request_log=log), LLMClient(cfg)
    msgs = extract_facts.build_messages("Ada: the lighthouse lamp was lit at dusk. "
                                        "Bo logged the fog at midnight.")
    info = CallInfo(bank_id="bench", operation="retain", scope="extract", trace_id="bench")
    for client in (with_log, without):  # warm litellm's paths
        client.complete_json(msgs, extract_facts.ExtractionReply, call=info)
    on, off = [], []
    for _ in range(calls):
        for client, out in ((with_log, on), (without, off)):
            t = time.perf_counter()
            client.complete_json(msgs, extract_facts.ExtractionReply, call=info)
            out.append(time.perf_counter() - t)
    log.flush(10)
    print(f"LLM call (stand-in, echo): with the log p50 {statistics.median(on) * 1e3:.3f} ms, "
          f"p95 {pct(on, 0.95) * 1e3:.3f} ms; without p50 {statistics.median(off) * 1e3:.3f} "
          f"ms, p95 {pct(off, 0.95) * 1e3:.3f} ms ({calls} calls each, interleaved)")
    svc.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=400)
    args = ap.parse_args()
    base = ROOT / ".rcll-bench"
    base.mkdir(exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="llmlog-", dir=base))
    os.chmod(state, 0o755)
    port = free_port()
    s = Settings(state_dir=state, pg_port=port,
                 database_url=f"postgresql://rcll@127.0.0.1:{port}/rcll_bench")
    quiet = lambda *_: None  # noqa: E731
    postgres.start(s, log=quiet)
    try:
        postgres.create_database(s, "rcll_bench", drop=True)
        migrate.upgrade(s)
        run(s, args.calls)
    finally:
        postgres.stop(s, log=quiet)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
