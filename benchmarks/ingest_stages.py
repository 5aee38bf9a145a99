"""Chunk-mode ingest throughput: today's stages beside the pipeline without the new ones.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ingest_stages.py \
        --data ../shared/data/locomo [--rounds 2] [--out benchmarks/results/ingest_stages.json]

Starts its own stack (PostgreSQL on ``--pg-port``, Redis, the API and one Celery worker;
state in ``--state-dir``, default ``.rcll-bench/ingest``) and ingests all of LoCoMo through
HTTP (``rcll.eval.runner.ingest``: async retains of 200 turns, polled to the end), once per
variant per round, into fresh banks:

- ``baseline``: the worker runs with ``RCLL_RETAIN_SKIP_STAGES=extract,entities,link``
  (chunk → embed: the pipeline before issue #6);
- ``full``: every stage (chunk → extract (a no-op in chunk mode) → entities → embed → link).

Rounds alternate the order (baseline first in odd rounds, full first in even ones) so a
machine that warms up or slows down does not favour one. Prints units/s per run, the
median per variant and the ratio full/baseline (the issue asks for ≥ 0.85).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rcll.client import RCLLClient  # noqa: E402
from rcll.config import Settings  # noqa: E402
from rcll.dev import processes, stack  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.eval.runner import ingest  # noqa: E402

VARIANTS = {"baseline": "extract,entities,link", "full": ""}


def _settings(args) -> Settings:
    return Settings(state_dir=Path(args.state_dir), pg_port=args.pg_port,
                    redis_url=f"redis://127.0.0.1:{args.redis_port}/0", api_port=args.api_port,
                    max_items_per_request=1000)


def _run_variant(s: Settings, name: str, round_no: int, data: Path, conversations: int) -> dict:
    env = stack.child_env(s)
    env["RCLL_RETAIN_SKIP_STAGES"] = VARIANTS[name]
    processes.stop(s.run_dir.resolve(), "worker")
    stack.start_worker(s, env, log=lambda *_: None)
    ds = load_locomo(data, bank_prefix=f"bench-{name}-{round_no}-")
    if conversations:
        ds.banks = dict(list(ds.banks.items())[:conversations])
    with RCLLClient(s.base_url, timeout=120) as client:
        for bank in ds.banks:
            client.delete_bank(bank)
        stats = ingest(client, ds, progress=False)
        counts = _db_counts(s, f"bench-{name}-{round_no}-")
    print(f"  round {round_no} {name:8s}: {stats['units']:,} units in {stats['seconds']:.1f} s "
          f"= {stats['units_per_s']:.1f} units/s   entities {counts['entities']:,}, "
          f"mentions {counts['mentions']:,}, links {counts['links']:,}", flush=True)
    return {"variant": name, "round": round_no, **stats, **counts}


def _db_counts(s: Settings, prefix: str) -> dict:
    import psycopg

    with psycopg.connect(s.db_url) as conn:
        def one(sql: str) -> int:
            return conn.execute(sql, (prefix + "%",)).fetchone()[0]

        return {"entities": one("SELECT count(*) FROM entities WHERE bank_id LIKE %s"),
                "mentions": one("SELECT count(*) FROM unit_entities WHERE bank_id LIKE %s"),
                "links": one("SELECT count(*) FROM memory_links WHERE bank_id LIKE %s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=0,
                    help="only the first N conversations (0 = all ten)")
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "ingest"))
    ap.add_argument("--pg-port", type=int, default=54341)
    ap.add_argument("--redis-port", type=int, default=6391)
    ap.add_argument("--api-port", type=int, default=8791)
    ap.add_argument("--out", default=None, help="write the runs and the summary as JSON")
    args = ap.parse_args()
    s = _settings(args)
    s.run_dir.mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    try:
        stack.up(s, worker=False, log=lambda *_: None)
        print(f"LoCoMo chunk-mode ingest, {args.rounds} round(s), stack on {s.base_url}")
        for r in range(1, args.rounds + 1):
            order = ["baseline", "full"] if r % 2 else ["full", "baseline"]
            for name in order:
                runs.append(_run_variant(s, name, r, Path(args.data), args.conversations))
    finally:
        stack.down(s, log=lambda *_: None)
    med = {v: statistics.median(x["units_per_s"] for x in runs if x["variant"] == v)
           for v in VARIANTS}
    ratio = med["full"] / med["baseline"]
    print(f"median units/s: baseline {med['baseline']:.1f}, full {med['full']:.1f}; "
          f"full/baseline = {ratio:.3f} (aim >= 0.85)")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"runs": runs, "median_units_per_s": med, "ratio": ratio,
             "when": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2) + "\n")


if __name__ == "__main__":
    main()
