"""Cost of following tunnels in recall (issue 9 item 4), beside the same recall without it,
in one run.

    cd <checkout> && HF_HUB_OFFLINE=1 /path/to/venv/python benchmarks/tunnels_follow.py

Starts its own PostgreSQL (``--state-dir``, ``--port``) and loads LoCoMo conv-41 (one unit
per turn, real all-MiniLM-L6-v2 vectors, cached in the state dir) three times: bank
``plain`` (no tunnels), bank ``tunnelled`` (every unit tunnelled to its twin in bank
``other`` — the worst case: every top result has a tunnel) and ``other``. Then each of the
conversation's first 40 questions runs through :meth:`rcll.cascade.cascade.Cascade.recall`
(cold tier, query vectors precomputed, a member principal reading both banks, purpose
``assist``) in three variants in a row, ``--rounds`` rounds:

- ``off``: ``plain``, ``follow_tunnels: false``;
- ``on, no tunnels``: ``plain``, following (the cost every recall pays);
- ``on, tunnels``: ``tunnelled``, following (3 per result over the top 10, re-cut).

Prints recall p50 / p95 (ms) per variant at limit 10 and 50, the ``tunnels`` step's p50 and
the tunnelled units kept per answer.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"  # beside the checkout
sys.path.insert(0, str(ROOT))

from benchmarks.link_stage import MODEL, _Emb, _Handle, load_bank, query_vectors  # noqa: E402
from benchmarks.post_steps import CONV, conv_vectors  # noqa: E402
from rcll.access.principal import Grant, Principal  # noqa: E402
from rcll.cascade.cascade import Cascade  # noqa: E402
from rcll.db import make_pool  # noqa: E402
from rcll.dev import postgres  # noqa: E402
from rcll.dev.scratch import scratch_database  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.models.tokenizer import TokenCounter  # noqa: E402
from rcll.search import recall as recall_mod  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402

VARIANTS = {"off": ("plain", False), "on, no tunnels": ("plain", True),
            "on, tunnels": ("tunnelled", True)}
PURPOSES = ("assist", "operate", "audit", "personal")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "tunnels"))
    ap.add_argument("--port", type=int, default=55447)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tunnels_follow.json"))
    ap.add_argument("--stop", action="store_true", help="Stop the scratch PostgreSQL after.")
    args = ap.parse_args()
    state = Path(args.state_dir)
    s = scratch_database(state, args.port, "tunnels_bench")

    ds = load_locomo(args.data)
    texts = [it["content"] for it in ds.banks[CONV]]
    vecs = conv_vectors(state, texts)
    pool = make_pool(s.db_url, max_size=4, name="bench")
    pool.open(wait=True)
    with pool.connection() as conn:
        for bank in ("plain", "tunnelled", "other"):
            load_bank(conn, bank, texts, vecs)
        n = conn.execute(
            """INSERT INTO tunnels (source_unit_id, target_unit_id, source_bank_id,
                                    target_bank_id, relationship)
               SELECT a.id, b.id, 'tunnelled', 'other', 'twin'
               FROM memory_units a JOIN memory_units b
                 ON b.bank_id = 'other' AND b.text = a.text
               WHERE a.bank_id = 'tunnelled'""").rowcount
        conn.execute("ANALYZE")
    queries = [q.query for q in ds.questions if q.bank_id == CONV][:40]
    qemb = query_vectors(state, queries)
    rctx = recall_mod.RecallContext(pool=pool, embedder=_Handle(_Emb(qemb)),
                                    tokens=TokenCounter(MODEL))
    cascade = Cascade(rctx, hot=None, after=None, warm=None)
    member = Principal(member_id="m1", grants={
        b: Grant(b, "read", PURPOSES) for b in ("plain", "tunnelled", "other")})

    def run(name: str, q: str, limit: int):
        bank, follow = VARIANTS[name]
        query = RecallQuery(query=q, limit=limit, tiers=["cold"], trace=True, purpose="assist",
                            follow_tunnels=follow)
        t = time.perf_counter()
        res = cascade.recall(bank, query, principal=member)
        return (time.perf_counter() - t) * 1000, res

    for q in queries[:3]:
        for name in VARIANTS:
            run(name, q, 10)  # warm
    out: dict = {"units_per_bank": len(texts), "tunnels": n, "queries": len(queries),
                 "rounds": args.rounds}
    for limit in (10, 50):
        total = {k: [] for k in VARIANTS}
        step = {k: [] for k in VARIANTS}
        kept = {k: [] for k in VARIANTS}
        for _ in range(args.rounds):
            for q in queries:
                for name in VARIANTS:  # one query through each variant in a row
                    ms, res = run(name, q, limit)
                    total[name].append(ms)
                    step[name].append((res.timings_ms or {}).get("tunnels", 0.0))
                    kept[name].append(res.counts.get("tunnels_followed", 0))
        base = statistics.median(total["off"])
        out[f"limit_{limit}"] = {
            name: {"p50_ms": round(statistics.median(v), 2),
                   "p95_ms": round(float(np.percentile(v, 95)), 2),
                   "p50_vs_off": round(statistics.median(v) / base, 3),
                   "tunnels_step_p50_ms": round(statistics.median(step[name]), 2),
                   "tunnelled_units_per_answer": round(statistics.mean(kept[name]), 2)}
            for name, v in total.items()}
    text = json.dumps(out, indent=2)
    print(text)
    Path(args.out).write_text(text + "\n")
    pool.close()
    if args.stop:
        postgres.stop(s, log=lambda *_: None)


if __name__ == "__main__":
    main()
