"""Latency of the cross-encoder rerank on this machine: N candidates × batch size.

Times :class:`rcll.models.reranker.CrossEncoderReranker.score` — what the rerank step runs
per recall — on LoCoMo turns ("Speaker: text", read from ../shared/data/locomo relative to
the checkout) against LoCoMo questions: for each round, each question is scored against N
turns of its own conversation, for every N and batch size in turn (interleaved, so a load
change on the shared machine hits every setting alike). Beside it, in the same run, the
no-rerank baseline: the recall's only model call without a reranker, the query embedding
(the rerank step adds its time on top of the recall; without a reranker it adds nothing).

The model defaults to a cross-encoder on the bundled all-MiniLM-L6-v2 weights — the real
architecture and cost of ms-marco-MiniLM-L-6-v2, an untrained head (timing only:
RCLL_RERANKER_ALLOW_UNTRAINED is forced here). Prints p50/p95 ms and the pick: the largest N
whose best p50 stays within --budget-ms, with the batch size that is fastest there.

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/rerank_latency.py [--rounds 12]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "locomo"
NS = (10, 20, 30, 50, 100, 200, 300)
BATCHES = (8, 16, 32, 64)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]


def load(n_max: int, rounds: int, seed: int = 7) -> list[tuple[str, list[str]]]:
    """``rounds`` (question, n_max turns of the question's conversation) pairs."""
    turns: dict[str, list[str]] = {}
    with open(DATA / "locomo10_memories.jsonl") as f:
        for line in f:
            m = json.loads(line)
            turns.setdefault(m["sample_id"], []).append(f"{m['speaker']}: {m['text']}")
    with open(DATA / "locomo10_queries.jsonl") as f:
        qs = [json.loads(line) for line in f]
    rnd = random.Random(seed)
    picked = rnd.sample(qs, rounds)
    return [(q["question"], rnd.sample(turns[q["sample_id"]], n_max)) for q in picked]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--rounds-large", type=int, default=2,
                    help="questions N >= 100 is timed on (the first ones; each costs seconds)")
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (0: torch's default, one per core); on a "
                         "shared, loaded machine 1 thread was 4x faster than 2")
    ap.add_argument("--budget-ms", type=float, default=120.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "rerank_latency.txt"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from rcll.models.embedder import EmbedderHandle
    from rcll.models.reranker import RerankerHandle

    if args.threads:
        torch.set_num_threads(args.threads)
    ns = [int(x) for x in args.ns.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    handle = RerankerHandle(args.model, allow_untrained=True)
    rr = handle.get()
    if rr is None:
        sys.exit(f"reranker unusable: {handle.status()}")
    emb = EmbedderHandle("all-MiniLM-L6-v2").get()
    sets = load(max(ns), args.rounds)
    for q, texts in sets[:2]:  # warm-up
        rr.score(q, texts[:64], 32)
        emb.embed([q])

    times: dict[tuple[int, int], list[float]] = {(n, b): [] for n in ns for b in batches}
    base: list[float] = []
    t_all = time.perf_counter()
    for i, (q, texts) in enumerate(sets):
        t = time.perf_counter()
        emb.embed([q])
        base.append((time.perf_counter() - t) * 1000)
        for n in ns:
            if n >= 100 and i >= args.rounds_large:
                continue
            for b in batches:
                t = time.perf_counter()
                rr.score(q, texts[:n], b)
                times[(n, b)].append((time.perf_counter() - t) * 1000)
    wall = time.perf_counter() - t_all

    mean_chars = statistics.mean(len(t) for _, ts in sets for t in ts)
    lines = [
        f"rerank latency: {handle.status()['model']} cross-encoder (untrained head, timing "
        f"only), CPU, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end",
        f"{args.rounds} LoCoMo questions x N turns of their conversation (mean {mean_chars:.0f} "
        f"chars per turn), settings interleaved per question (N >= 100 on the first "
        f"{min(args.rounds, args.rounds_large)} only); {wall:.0f} s in all",
        "",
        f"baseline, no rerank: the recall adds 0 ms; its query embedding (one forward pass) "
        f"p50 {pct(base, 50):.1f} / p95 {pct(base, 95):.1f} ms",
        "",
        "rerank p50 / p95 ms (the rerank step's model call: tokenise + forward + activation)",
        "|    N | " + " | ".join(f"batch {b:>3}    " for b in batches) + " | best p50 | per pair |",
        "|------|" + "|".join("---------------" for _ in batches) + "|----------|----------|",
    ]
    best: dict[int, tuple[float, int]] = {}
    for n in ns:
        cells = []
        for b in batches:
            xs = times[(n, b)]
            cells.append(f"{pct(xs, 50):6.1f} / {pct(xs, 95):6.1f}")
        p50, b = min((pct(times[(n, b)], 50), b) for b in batches)
        best[n] = (p50, b)
        lines.append(f"| {n:>4} | " + " | ".join(cells) + f" | {p50:6.1f} @{b:<2}| {p50 / n:6.2f}   |")
    fits = [n for n in ns if best[n][0] <= args.budget_ms]
    if fits:
        n = max(fits)
        lines += ["", f"pick (largest N with best p50 <= {args.budget_ms:.0f} ms): N = {n}, "
                      f"batch = {best[n][1]} (p50 {best[n][0]:.1f} ms, p95 "
                      f"{pct(times[(n, best[n][1])], 95):.1f} ms)"]
    else:
        lines += ["", f"no N fits {args.budget_ms:.0f} ms"]
    text = "\n".join(lines)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
