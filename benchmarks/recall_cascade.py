"""The recall cascade under a repeated-query workload, beside cold-only, in one run.

An agent fleet re-asks: each request picks a bank uniformly, then one of that bank's
questions with Zipf-like probability P(r) ∝ 1 / r^s over a seeded shuffle of its questions
(LongMemEval has one question per bank: there the draw is Zipf over all questions). Every
drawn request is asked twice back to back, in alternating order — once through the cascade
(tiers hot → warm → cold) and once cold-only (``tiers: ["cold"]``) — with ``trace``; both
go through the engine's :class:`rcll.cascade.cascade.Cascade`, the code the API runs, and the
timings are the engine's own (the ``timings_ms`` a server returns with ``trace``). After
each request the after-response queue is drained (activation, cues, promotion), as a
deployment's background thread keeps up between requests; that time is not in any latency.

Prints, per hot-tier threshold: the share of requests each tier answered, p50/p95 of each
tier's own phase (``tier_hot``, ``tier_warm``, ``tier_cold``) and of the whole recall
(``total``) for the cascade and for cold-only, and turn nDCG@5 / recall@10 of both over the
measured requests (those after the warm-up, the same for both):

    python benchmarks/recall_cascade.py locomo ../shared/data/locomo
    python benchmarks/recall_cascade.py longmemeval \
        ../shared/data/longmemeval/longmemeval_s_dev60.json.gz --requests 600 --warmup 150

Reads banks ``rcll eval`` ingested (the dev stack's database through the usual ``RCLL_*``
settings); tier 1 lives in the Redis database ``--redis-url`` (default db 9), flushed at the
start of every threshold so each one starts from the same empty hot tier.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter, defaultdict

import numpy as np
import redis

from rcll.bootstrap import bootstrap
from rcll.cascade.cascade import CascadeSettings
from rcll.cascade.wiring import build_cascade
from rcll.eval.datasets import load_locomo, load_longmemeval
from rcll.eval.metrics import LOCOMO_KS, aggregate
from rcll.eval.runner import LME_KS, score_question
from rcll.search.models import RecallQuery


def zipf_draws(questions, n: int, s: float, seed: int, per_bank: bool) -> list:
    """``n`` questions drawn as described in the module docstring."""
    rng = random.Random(seed)
    groups: dict[str, list] = defaultdict(list)
    for q in questions:
        groups[q.bank_id if per_bank else "all"].append(q)
    banks = sorted(groups)
    weights = {}
    for b in banks:
        rng.shuffle(groups[b])
        weights[b] = [1.0 / (r ** s) for r in range(1, len(groups[b]) + 1)]
    return [rng.choices(groups[b], weights=weights[b])[0]
            for b in (rng.choice(banks) for _ in range(n))]


def pct(values, p) -> float | None:
    return round(float(np.percentile(values, p)), 2) if values else None


def run(svc, draws, warmup: int, thr: float, args, ks) -> dict:
    redis.Redis.from_url(args.redis_url).flushdb()
    cascade = build_cascade(svc, CascadeSettings(
        hot_threshold=thr, warm_threshold=args.warm_threshold,
        promote_top=args.promote_top), redis_url=args.redis_url)
    answered: Counter = Counter()
    phase: dict[str, list] = defaultdict(list)
    total = {"cascade": [], "cold": []}
    records = {"cascade": [], "cold": []}
    for i, q in enumerate(draws):
        base = dict(query=q.query, limit=args.limit, max_tokens=200_000,
                    query_timestamp=q.query_timestamp, trace=True)
        order = ("cascade", "cold") if i % 2 == 0 else ("cold", "cascade")
        for arm in order:
            req = RecallQuery(**base, **({"tiers": ["cold"]} if arm == "cold" else {}))
            res = cascade.recall(q.bank_id, req)
            if cascade.after is not None:
                cascade.after.flush(timeout_s=30)
            if i < warmup:
                continue
            t = res.timings_ms or {}
            total[arm].append(t.get("total", 0.0))
            records[arm].append(score_question(q, res.results, args.unit_ids, ks))
            if arm == "cascade":
                tier = res.tiers[-1] if res.tiers else "none"
                answered[tier] += 1
                for name in ("hot", "warm", "cold"):
                    if f"tier_{name}" in t:
                        label = "cold pipeline" if name == "cold" else f"{name} lookup"
                        phase[label].append(t[f"tier_{name}"])
                    if f"tier_{name}_verify" in t:
                        phase[f"{name} verify"].append(t[f"tier_{name}_verify"])
                if tier in ("hot", "warm"):
                    phase[f"{tier} answer (lookup + verify)"].append(
                        t[f"tier_{tier}"] + t.get(f"tier_{tier}_verify", 0.0))
                phase[f"total, answered by {tier}"].append(t.get("total", 0.0))
        if i % 200 == 0:
            print(f"  threshold {thr}: {i}/{len(draws)}", flush=True)
    n = sum(answered.values())
    quality = {arm: aggregate(records[arm])["turn"] for arm in records}
    return {
        "threshold": thr,
        "answered_share": {k: round(v / n, 3) for k, v in sorted(answered.items())},
        "phase_ms": {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)}
                     for k, v in sorted(phase.items())},
        "total_ms": {arm: {"p50": pct(v, 50), "p95": pct(v, 95)} for arm, v in total.items()},
        "p50_ratio": round(pct(total["cascade"], 50) / pct(total["cold"], 50), 3),
        "ndcg@5": {arm: round(quality[arm]["ndcg@5"], 4) for arm in quality},
        "recall@10": {arm: round(quality[arm]["recall@10"], 4) for arm in quality},
        "query_cache": {"hits": svc.query_cache.hits, "misses": svc.query_cache.misses},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", choices=["locomo", "longmemeval"])
    ap.add_argument("data")
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent s")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--thresholds", default="0.9", help="hot-tier thresholds, comma-separated")
    ap.add_argument("--warm-threshold", type=float, default=CascadeSettings.warm_threshold)
    ap.add_argument("--promote-top", type=int, default=CascadeSettings.promote_top)
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.dataset == "locomo":
        ds, ks = load_locomo(args.data), LOCOMO_KS
    else:
        ds, ks = load_longmemeval(args.data), LME_KS
    args.unit_ids = ds.unit_ids
    draws = zipf_draws([q for q in ds.questions if q.gold_turns], args.requests, args.zipf,
                       args.seed, per_bank=args.dataset == "locomo")
    distinct = len({q.qid for q in draws[args.warmup:]})
    print(f"{args.dataset}: {len(draws)} requests ({args.warmup} warm-up), "
          f"{distinct} distinct questions measured, Zipf s={args.zipf}, seed {args.seed}")
    svc = bootstrap()
    out = {"dataset": args.dataset, "requests": args.requests, "warmup": args.warmup,
           "zipf": args.zipf, "seed": args.seed, "warm_threshold": args.warm_threshold,
           "promote_top": args.promote_top, "runs": []}
    for thr in [float(t) for t in args.thresholds.split(",")]:
        t0 = time.perf_counter()
        r = run(svc, draws, args.warmup, thr, args, ks)
        r["seconds"] = round(time.perf_counter() - t0, 1)
        out["runs"].append(r)
        print(json.dumps(r, indent=1))
    print("\n| hot threshold | answered by hot / warm / cold | hot answer p50/p95 ms | warm lookup p50/p95 ms"
          " | cascade p50/p95 ms | cold-only p50/p95 ms | p50 ratio | nDCG@5 cascade / cold |")
    print("|---|---|---|---|---|---|---|---|")
    for r in out["runs"]:
        a, ph, tt = r["answered_share"], r["phase_ms"], r["total_ms"]
        hot, warm = ph.get("hot answer (lookup + verify)", {}), ph.get("warm lookup", {})
        print(f"| {r['threshold']} | {a.get('hot', 0):.2f} / {a.get('warm', 0):.2f} / "
              f"{a.get('cold', 0):.2f} | {hot.get('p50')}/{hot.get('p95')} | "
              f"{warm.get('p50')}/{warm.get('p95')} | {tt['cascade']['p50']}/"
              f"{tt['cascade']['p95']} | {tt['cold']['p50']}/{tt['cold']['p95']} | "
              f"{r['p50_ratio']} | {r['ndcg@5']['cascade']:.3f} / {r['ndcg@5']['cold']:.3f} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
