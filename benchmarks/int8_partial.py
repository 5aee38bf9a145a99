"""The embedder's int8 in part: dynamic int8 on some of the transformer's MatMul nodes only,
beside fp32 and int8 on all of them, on the same passages in one run — texts per CPU-second
and the cosine of each variant's vectors to fp32's.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/int8_partial.py \
        [--texts 1024] [--batch 32] [--rounds 3] [--out benchmarks/results/int8_partial.json]

The question it answers: is there a precision between fp32 and int8 that is fast enough to
double ingest (issue 23 asks for 2x units/s) while its vectors stay close enough to fp32's
to keep recall quality (int8 on every MatMul is 2.3-2.9x fp32 and loses 0.0077 nDCG@5 on
LongMemEval dev, beyond the 0.005 bound; ``benchmarks/results/onnx_quality_*``). The choice
is made on the cosine to fp32, which uses no judged question.

Variants (``onnxruntime.quantization.quantize_dynamic``, int8 weights per output channel,
the exclusions by node name of the exported graph, :func:`rcll.models.onnx_runtime.ensure_export`):

- ``fp32``: the export (``RCLL_EMBED_PRECISION=fp32``, the default);
- ``int8``: every MatMul (``RCLL_EMBED_PRECISION=int8``);
- ``attention``: the attention block's projections only (query, key, value, output);
- ``ffn``: the feed-forward block's two MatMuls only;
- ``no-ffn-out``: every MatMul but the feed-forward output (its input, after GELU, has the
  widest range of activations).

The two attention products (Q·Kᵀ and the weights times V) have no constant input and are
never quantised by ``quantize_dynamic`` in any variant.

Passages: the first ``--texts`` LoCoMo turns, batches of ``--batch`` in input order, padded
to each batch's longest (:func:`rcll.models.onnx_runtime.padded`); one session per variant
with one intra-op thread; ``--rounds`` timed passes, the variants interleaved; the figure is
the median pass in texts per CPU-second (``time.process_time``), and its ratio to fp32.
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

MODEL = "all-MiniLM-L6-v2"


def excluded(names: list[str], variant: str) -> list[str] | None:
    """The MatMul node names ``variant`` leaves in fp32 (``None``: the fp32 file itself)."""
    attention = [n for n in names if "/attention/" in n]
    ffn = [n for n in names if "/intermediate/" in n or
           ("/output/dense/" in n and "/attention/" not in n)]
    return {"fp32": None, "int8": [],
            "attention": [n for n in names if n not in attention],
            "ffn": [n for n in names if n not in ffn],
            "no-ffn-out": [n for n in ffn if "/intermediate/" not in n]}[variant]


def main() -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from benchmarks.onnx_embedder import passages
    from rcll.models.embedder import resolve_model_path
    from rcll.models.onnx_runtime import ensure_export, load_tokenizer, mean_pool_normalise, padded, session

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--texts", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="fp32,int8,attention,ffn,no-ffn-out")
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "onnx_embedder"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    fp32 = ensure_export(MODEL, Path(args.state_dir), "fp32")
    # the MatMuls with a weight: the attention products (Q·Kᵀ, weights·V) have none
    names = [n.name for n in onnx.load(str(fp32)).graph.node if n.op_type == "MatMul"
             and not n.name.endswith(("/self/MatMul", "/self/MatMul_1"))]
    files = {}
    for v in args.variants.split(","):
        skip = excluded(names, v)
        if skip is None:
            files[v] = fp32
            continue
        dest = fp32.parent / f"model.partial-{v}.onnx"
        if not dest.exists():
            quantize_dynamic(str(fp32), str(dest), weight_type=QuantType.QInt8,
                             per_channel=True, op_types_to_quantize=["MatMul"],
                             nodes_to_exclude=skip)
        files[v] = dest
    texts = passages(Path(args.data), args.texts)
    tok, pad_id = load_tokenizer(Path(resolve_model_path(MODEL)), 256, pad=False)
    encodings = tok.encode_batch(texts)
    batches = [padded(encodings[i:i + args.batch], pad_id)
               for i in range(0, len(encodings), args.batch)]
    sessions = {v: session(f, 1) for v, f in files.items()}
    vectors = {v: np.concatenate([mean_pool_normalise(s.run(None, b)[0], b["attention_mask"])
                                  for b in batches]) for v, s in sessions.items()}
    cpu: dict[str, list[float]] = {v: [] for v in sessions}
    for r in range(args.rounds):
        for v in (list(sessions) if r % 2 == 0 else list(sessions)[::-1]):
            c0 = time.process_time()
            for b in batches:
                sessions[v].run(None, b)
            cpu[v].append(time.process_time() - c0)
    ref = vectors.get("fp32")
    base = len(texts) / statistics.median(cpu["fp32"]) if "fp32" in cpu else None
    print(f"{len(texts)} LoCoMo turns, batch {args.batch}, 1 thread, {args.rounds} rounds, "
          f"{len(names)} MatMul nodes with weights, load {os.getloadavg()[0]:.1f}")
    rows = {}
    for v in sessions:
        rate = len(texts) / statistics.median(cpu[v])
        cos = (vectors[v] * ref).sum(axis=1) if ref is not None else np.ones(1)
        rows[v] = {"texts_per_cpu_s": round(rate, 1),
                   "ratio_to_fp32": round(rate / base, 2) if base else None,
                   "cosine_min": round(float(cos.min()), 4),
                   "cosine_p1": round(float(np.percentile(cos, 1)), 4),
                   "cosine_mean": round(float(cos.mean()), 4),
                   "int8_matmuls": len(names) - len(excluded(names, v) or names)
                   if v != "fp32" else 0}
        print(f"  {v:11s} {rate:7.1f} texts/CPU-s"
              + (f", x{rate / base:.2f} fp32" if base else "")
              + f"; cosine to fp32 min {cos.min():.4f}, 1st percentile "
                f"{np.percentile(cos, 1):.4f}, mean {cos.mean():.4f}; "
                f"{rows[v]['int8_matmuls']} MatMul nodes int8")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"variants": rows, "texts": len(texts), "batch": args.batch, "rounds": args.rounds,
             "load_avg": os.getloadavg()[0], "when": time.strftime("%Y-%m-%d %H:%M:%S")},
            indent=2) + "\n")


if __name__ == "__main__":
    main()
