"""The embedder on torch, onnxruntime fp32 and onnxruntime int8, on the same passages in one
run: raw throughput (texts/s) and the cosine of each ONNX vector to torch's.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/onnx_embedder.py \
        [--texts 1024] [--batch 32] [--threads 1] [--rounds 3] \
        [--out benchmarks/results/onnx_embedder.json]

Passages: the first ``--texts`` LoCoMo turns (``../shared/data/locomo``; one unit per turn,
as the service embeds them), cut into batches of ``--batch`` in input order (no token
batching: every runtime pads the same batches). Each runtime loads once (the ONNX export is
made, or reused, under ``--state-dir`` before timing), embeds one warm-up batch, then
``--rounds`` timed passes over all passages, the runtimes interleaved in each round; the
figure is the median pass, in wall-clock texts/s and in texts per CPU-second of the process
(``time.process_time``: every thread of the process; on a machine shared with other work the
wall clock measures the neighbours as much as the model, the CPU time does not).
``--threads``: torch intra-op threads and onnxruntime intra-op
threads alike (the service's RCLL_TORCH_THREADS / RCLL_ONNX_THREADS default is 1).
Prints one line per runtime: median texts/s, its range, the ratio to torch, and the min and
mean cosine to torch's vectors over every passage.

``--queries N`` (default 400; 0 = skip): one-text calls, as a recall embeds its query —
the first N LoCoMo questions split over 1, 2 and 4 threads calling ``embed([q])`` at once
(torch's embedder runs one pass at a time per process; onnxruntime's ``run`` releases the
GIL and takes no lock): queries/s wall-clock and per CPU-second.

``--pairs N`` (default 256; 0 = skip): the cross-encoder too — the bundled weights as a
cross-encoder (its head untrained: timing only, as benchmarks/rerank_latency.py), scoring
one LoCoMo question against the first N passages in batches of ``--pair-batch`` (16, the
service's RCLL_RERANK_BATCH_SIZE) on torch, onnx fp32 and onnx int8: pairs/s, and the
largest score difference to torch (the ONNX export carries its own draw of the untrained
head, so fp32 differences here measure nothing; tests/models/test_onnx_runtime.py checks
fp32 scores on a saved head).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def passages(data: Path, n: int) -> list[str]:
    from rcll.eval.datasets import load_locomo

    ds = load_locomo(data)
    return [it["content"] for items in ds.banks.values() for it in items][:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--texts", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--pairs", type=int, default=256)
    ap.add_argument("--pair-batch", type=int, default=16)
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "onnx_embedder"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from rcll.models import threads
    from rcll.models.embedder import SentenceTransformerEmbedder
    from rcll.models.onnx_runtime import OnnxEmbedder

    threads.configure(args.threads)
    texts = passages(Path(args.data), args.texts)
    tokens = None
    models = {"torch": SentenceTransformerEmbedder("all-MiniLM-L6-v2", args.batch)}
    for p in ("fp32", "int8"):
        t0 = time.perf_counter()
        models[f"onnx-{p}"] = OnnxEmbedder("all-MiniLM-L6-v2", Path(args.state_dir), p,
                                           threads=args.threads, batch_size=args.batch)
        print(f"onnx {p}: ready in {time.perf_counter() - t0:.1f} s "
              f"({models[f'onnx-{p}'].path.name})", file=sys.stderr)
    tokens = models["onnx-fp32"].token_lengths(texts)
    for m in models.values():
        m.embed(texts[:args.batch])
    times: dict[str, list[float]] = {k: [] for k in models}
    cpu: dict[str, list[float]] = {k: [] for k in models}
    vectors: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        for name in order:
            c0, t0 = time.process_time(), time.perf_counter()
            vectors[name] = models[name].embed(texts)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    ref = vectors["torch"]
    rows = {}
    base = len(texts) / statistics.median(times["torch"])
    cpu_base = len(texts) / statistics.median(cpu["torch"])
    print(f"{len(texts)} LoCoMo turns (tokens mean {np.mean(tokens):.1f}, max {max(tokens)}), "
          f"batch {args.batch}, {args.threads} thread(s), {args.rounds} rounds, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    for name, ts in times.items():
        rates = [len(texts) / t for t in ts]
        cos = (vectors[name] * ref).sum(axis=1)
        rate = len(texts) / statistics.median(ts)
        crate = len(texts) / statistics.median(cpu[name])
        rows[name] = {"texts_per_s": round(rate, 1), "min": round(min(rates), 1),
                      "max": round(max(rates), 1), "ratio_to_torch": round(rate / base, 2),
                      "texts_per_cpu_s": round(crate, 1),
                      "cpu_ratio_to_torch": round(crate / cpu_base, 2),
                      "cosine_min": round(float(cos.min()), 4),
                      "cosine_mean": round(float(cos.mean()), 4),
                      "stamp": models[name].stamp}
        print(f"  {name:9s} {rate:7.1f} texts/s (range {min(rates):.1f}-{max(rates):.1f}), "
              f"x{rate / base:.2f} torch; {crate:7.1f} texts/CPU-s, x{crate / cpu_base:.2f} "
              f"torch; cosine to torch min {cos.min():.4f} "
              f"mean {cos.mean():.4f}; stamp {models[name].stamp}")
    single = queries(args, models) if args.queries > 0 else {}
    pairs = rerank(args, texts) if args.pairs > 0 else {}
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"runtimes": rows, "queries": single, "cross_encoder": pairs, "pairs": args.pairs,
             "texts": len(texts), "batch": args.batch, "threads": args.threads,
             "rounds": args.rounds, "tokens_mean": float(np.mean(tokens)),
             "load_avg": os.getloadavg()[0], "cores": os.cpu_count(),
             "when": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2) + "\n")


def queries(args, models: dict) -> dict:
    """Queries/s of one-text calls from 1, 2 and 4 threads at once, per runtime."""
    import threading

    from rcll.eval.datasets import load_locomo

    qs = [q.query for q in load_locomo(Path(args.data)).questions[:args.queries]]
    out: dict[str, dict] = {}
    print(f"one-query calls: {len(qs)} LoCoMo questions, {args.threads} intra-op thread(s)")
    for name, m in models.items():
        out[name] = {}
        for n in (1, 2, 4):
            def work(chunk, m=m):
                for q in chunk:
                    m.embed([q])

            ts = [threading.Thread(target=work, args=(qs[i::n],)) for i in range(n)]
            c0, t0 = time.process_time(), time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            out[name][str(n)] = {"queries_per_s": round(len(qs) / wall, 1),
                                 "queries_per_cpu_s": round(len(qs) / cpu, 1)}
            print(f"  {name:9s} {n} thread(s): {len(qs) / wall:7.1f} queries/s, "
                  f"{len(qs) / cpu:7.1f} per CPU-s")
    return out


def rerank(args, texts: list[str]) -> dict:
    """pairs/s of the cross-encoder on each runtime (see the module docstring)."""
    from rcll.models.onnx_runtime import OnnxCrossEncoder
    from rcll.models.reranker import CrossEncoderReranker

    query = "What did Caroline research after the support group meeting?"
    docs = texts[:args.pairs]
    models = {"torch": CrossEncoderReranker("all-MiniLM-L6-v2")}
    for p in ("fp32", "int8"):
        models[f"onnx-{p}"] = OnnxCrossEncoder("all-MiniLM-L6-v2", Path(args.state_dir), p,
                                               threads=args.threads)
    for m in models.values():
        m.score(query, docs[:args.pair_batch], args.pair_batch)
    times: dict[str, list[float]] = {k: [] for k in models}
    cpu: dict[str, list[float]] = {k: [] for k in models}
    for r in range(args.rounds):
        for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
            c0, t0 = time.process_time(), time.perf_counter()
            models[name].score(query, docs, args.pair_batch)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    base = len(docs) / statistics.median(times["torch"])
    cpu_base = len(docs) / statistics.median(cpu["torch"])
    rows = {}
    print(f"cross-encoder (untrained head: timing only): {len(docs)} pairs, batch "
          f"{args.pair_batch}, {args.threads} thread(s)")
    for name, ts in times.items():
        rate = len(docs) / statistics.median(ts)
        crate = len(docs) / statistics.median(cpu[name])
        rows[name] = {"pairs_per_s": round(rate, 1), "ratio_to_torch": round(rate / base, 2),
                      "pairs_per_cpu_s": round(crate, 1),
                      "cpu_ratio_to_torch": round(crate / cpu_base, 2)}
        print(f"  {name:9s} {rate:7.1f} pairs/s, x{rate / base:.2f} torch; {crate:7.1f} "
              f"pairs/CPU-s, x{crate / cpu_base:.2f} torch")
    return rows


if __name__ == "__main__":
    main()
