"""Write-path embed batches: texts per CPU second for padded-token budgets per forward pass,
the current default beside the others, in one run.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embed_batches.py \
        [--runtimes onnx,torch] [--budgets 16x4096,16x2048,16x1024,16x512,16x256] \
        [--rounds 2] [--out benchmarks/results/embed_batches.json]

Texts, each embedded in calls of the size the pipeline makes (one job's units):

- ``cisi``: CISI documents as the service embeds them (``title``, blank line, ``title``,
  blank line, abstract: :func:`rcll.models.embedder.embed_input` with the title as chunk
  context), calls of 84 texts (one 64 KiB ``rcll ingest`` job);
- ``locomo``: LoCoMo turns (``../shared/data/locomo/locomo10_memories.jsonl``), calls of 200
  texts (one ``rcll eval`` retain).

A budget ``BxT`` is ``RCLL_EMBED_BATCH_SIZE=B`` texts and ``RCLL_EMBED_BATCH_TOKENS=T``
padded tokens (texts x the longest one's tokens) per pass
(:func:`rcll.models.batching.token_batches`). One process, one intra-op thread (a worker
pool process's setting). Each budget runs once per round, in an order that rotates per
round, after one warm call; the figure is texts over the process's CPU seconds (so other
load on the machine does not count), median over rounds. Prints per corpus and runtime:
budget, texts/CPU s, padded tokens over real tokens, passes, and the ratio to the first
budget listed (the baseline, the old default 16x4096).

``--two-cores`` (onnx): one call's passes on two cores, the way a worker's embedder uses a
core another pool process left idle (:mod:`rcll.models.cores`), in one run on the CISI texts
at the default budget: one pass at a time on one thread (the baseline), one pass at a time
on a session of two intra-op threads (how borrowed cores ran before decision 0025), and two
passes at once on the one-thread session (how they run now); wall seconds and speed-up.
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
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest_documents import cisi_items  # noqa: E402

from rcll.config import Settings  # noqa: E402
from rcll.models.batching import token_batches  # noqa: E402
from rcll.models.embedder import embed_input  # noqa: E402


def corpora(data: Path, limit: int) -> dict[str, tuple[list[str], int]]:
    """``{name: (texts, call size)}`` (see the module docstring)."""
    docs = []
    for it in cisi_items(data / "cisi" / "CISI.ALL")[:limit]:
        title = it["content"].split("\n\n", 1)[0]
        docs.append(embed_input(it["content"], title))
    with (data / "locomo" / "locomo10_memories.jsonl").open() as fh:
        turns = [json.loads(line)["text"] for line in fh][:limit * 5]
    return {"cisi": (docs, 84), "locomo": (turns, 200)}


def make(runtime: str, s: Settings):
    if runtime == "onnx":
        from rcll.models.onnx_runtime import OnnxEmbedder

        return OnnxEmbedder(s.embedder_model, s.state_dir, "fp32", 1, 16, 4096)
    import torch

    torch.set_num_threads(1)
    from rcll.models.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(s.embedder_model, 16, 4096)


def run(emb, texts: list[str], call: int, size: int, tokens: int) -> dict:
    emb.batch_size, emb.batch_tokens = size, tokens
    lengths = emb.token_lengths(texts)
    padded = passes = 0
    for i in range(0, len(texts), call):
        part = lengths[i:i + call]
        for b in token_batches(part, tokens, size):
            padded += len(b) * max(part[j] for j in b)
            passes += 1
    c0 = time.process_time()
    for i in range(0, len(texts), call):
        emb.embed(texts[i:i + call])
    cpu = time.process_time() - c0
    return {"texts_per_cpu_s": len(texts) / cpu, "padded_over_real": padded / sum(lengths),
            "passes": passes}


def two_cores(s: Settings, texts: list[str], rounds: int) -> dict:
    """Wall seconds of the three ways to run one call's passes (module docstring)."""
    from concurrent.futures import ThreadPoolExecutor

    from rcll.models.onnx_runtime import OnnxEmbedder, padded, session

    emb = OnnxEmbedder(s.embedder_model, s.state_dir, "fp32", 1, s.embed_batch_size,
                       s.embed_batch_tokens)
    two = session(emb.path, 2)
    enc = emb._tok.encode_batch(texts)
    feeds = [{k: v for k, v in padded([enc[i] for i in idx], emb._pad_id).items()
              if k in emb._inputs}
             for idx in token_batches([len(e.ids) for e in enc], s.embed_batch_tokens,
                                      s.embed_batch_size)]

    def passes(sess, part) -> None:
        for feed in part:
            sess.run(None, feed)

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    passes(emb._session, feeds[:4])
    passes(two, feeds[:4])
    out: dict[str, list[float]] = {"one_thread": [], "one_pass_two_threads": [],
                                   "two_passes_at_once": []}
    with ThreadPoolExecutor(2) as pool:
        for _ in range(rounds):
            out["one_thread"].append(timed(lambda: passes(emb._session, feeds)))
            out["one_pass_two_threads"].append(timed(lambda: passes(two, feeds)))
            out["two_passes_at_once"].append(timed(lambda: list(pool.map(
                lambda part: passes(emb._session, part), (feeds[0::2], feeds[1::2])))))
    return {k: statistics.median(v) for k, v in out.items()} | {"passes": len(feeds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--runtimes", default="onnx,torch")
    ap.add_argument("--budgets", default="16x4096,16x2048,16x1024,16x512,16x256,64x512")
    ap.add_argument("--limit", type=int, default=336, help="CISI documents (turns: 5x)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--two-cores", action="store_true", help="only the two-core comparison")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    s = Settings()
    budgets = [tuple(int(x) for x in b.split("x")) for b in args.budgets.split(",")]
    texts = corpora(Path(args.data), args.limit)
    if args.two_cores:
        got = two_cores(s, texts["cisi"][0], args.rounds)
        base = got["one_thread"]
        print(f"one call of {len(texts['cisi'][0])} CISI texts, {got['passes']} passes at "
              f"{s.embed_batch_size}x{s.embed_batch_tokens}, onnx fp32, median of "
              f"{args.rounds} rounds:", flush=True)
        for k in ("one_thread", "one_pass_two_threads", "two_passes_at_once"):
            print(f"  {k:22} {got[k]:6.2f} s  x{base / got[k]:.2f}", flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(got, indent=1))
        return
    print(f"embed batches: one process, one thread; default now "
          f"{s.embed_batch_size}x{s.embed_batch_tokens}; {args.rounds} rounds", flush=True)
    out = []
    for runtime in args.runtimes.split(","):
        emb = make(runtime, s)
        for name, (corpus, call) in texts.items():
            emb.embed(corpus[:32])
            runs: dict[tuple, list[dict]] = {b: [] for b in budgets}
            for r in range(args.rounds):
                for b in budgets[r % len(budgets):] + budgets[:r % len(budgets)]:
                    runs[b].append(run(emb, corpus, call, *b))
            base = statistics.median(x["texts_per_cpu_s"] for x in runs[budgets[0]])
            for b in budgets:
                rate = statistics.median(x["texts_per_cpu_s"] for x in runs[b])
                row = {"runtime": runtime, "corpus": name, "texts": len(corpus), "call": call,
                       "batch_size": b[0], "batch_tokens": b[1], "texts_per_cpu_s": rate,
                       "padded_over_real": runs[b][0]["padded_over_real"],
                       "passes": runs[b][0]["passes"], "ratio_to_first": rate / base,
                       "rounds": [x["texts_per_cpu_s"] for x in runs[b]]}
                out.append(row)
                print(f"  {runtime:5} {name:6} {b[0]:>3}x{b[1]:<5} {rate:7.1f} texts/CPU s  "
                      f"padded/real {row['padded_over_real']:.3f}  passes {row['passes']:>4}  "
                      f"x{row['ratio_to_first']:.2f}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
