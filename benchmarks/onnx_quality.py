"""Retrieval quality with one embedder configuration, in-process, on a scratch database of its
own: LoCoMo or LongMemEval_S dev ingested through the retain service (``async_=False``: the
worker's stages, the embed stage on the configured runtime) and every question asked with no
recipe named, scored as ``rcll eval`` scores them (limit 50, max_tokens 200,000, the cold
pipeline; LongMemEval at each question's date). Used by docs/decisions/0022-onnx-embedder.md
to put torch, onnx fp32 and onnx int8 side by side (one run per configuration, each with
its own ``--state-dir`` and ``--port``).

    cd <checkout> && HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True \\
        .venv/bin/python benchmarks/onnx_quality.py --dataset locomo \\
        --runtime onnx --precision int8 --out benchmarks/results/onnx_quality_locomo_int8.json

``--questions N``: LongMemEval's first N questions only (each is a bank of its own, so the
ingest shrinks with them), after skipping ``--offset`` of them; 0 = all. Several runs over
disjoint ranges are merged by ``--merge a.json,b.json`` (means weighted by scored questions).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", choices=("locomo", "longmemeval"), required=True)
    ap.add_argument("--data", default=None)
    ap.add_argument("--runtime", choices=("torch", "onnx"), default="torch")
    ap.add_argument("--precision", choices=("fp32", "int8"), default="fp32")
    ap.add_argument("--questions", type=int, default=0)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--merge", default=None, help="comma-separated result files to merge")
    ap.add_argument("--state-dir", default=None)
    ap.add_argument("--port", type=int, default=55481)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.merge:
        merged = merge([json.loads(Path(f).read_text()) for f in args.merge.split(",")])
        print(json.dumps(merged, indent=1))
        if args.out:
            Path(args.out).write_text(json.dumps(merged, indent=1) + "\n")
        return
    # Settings read the environment: the scratch database's settings get this configuration
    os.environ["RCLL_EMBED_RUNTIME"] = args.runtime
    os.environ["RCLL_EMBED_PRECISION"] = args.precision

    from benchmarks.cisi import services
    from rcll.eval.datasets import load_locomo, load_longmemeval
    from rcll.eval.metrics import ALL_METRICS, BASE_METRICS, LOCOMO_KS, LONGMEMEVAL_KS, aggregate
    from rcll.eval.runner import score_question
    from rcll.retain.models import RetainItem
    from rcll.search.models import RecallQuery
    from rcll.search.recall import recall

    data = ROOT.parent / "shared" / "data"
    if args.dataset == "locomo":
        ds = load_locomo(args.data or data / "locomo")
        ks, metrics = LOCOMO_KS, BASE_METRICS
    else:
        ds = load_longmemeval(args.data or data / "longmemeval" / "longmemeval_s_dev60.json.gz")
        ks, metrics = LONGMEMEVAL_KS, ALL_METRICS
    questions = ds.questions[args.offset:]
    questions = questions[:args.questions] if args.questions > 0 else questions
    banks = {q.bank_id for q in questions}
    tag = f"{args.dataset}_{args.runtime}_{args.precision}" + (f"_{args.offset}" if args.offset
                                                               else "")
    state = Path(args.state_dir or ROOT / ".rcll-bench" / f"onnx_quality_{tag}")
    svc = services(state, args.port, False, name=f"q_{tag}")
    emb = svc.embedder.get()
    assert emb is not None, svc.embedder.error
    print(f"{tag}: embedder {emb.stamp} on {getattr(emb, 'runtime', '?')}", file=sys.stderr)
    retain = svc.retain_service(lambda *_: None)
    units, t0 = 0, time.perf_counter()
    for bank, items in ds.banks.items():
        if bank not in banks:
            continue
        for a in range(0, len(items), 100):
            job, _ = retain.retain(bank, [RetainItem(**i) for i in items[a:a + 100]],
                                   async_=False)
            assert job["state"] == "succeeded", job
        units += len(items)
        print(f"  ingested {bank} ({units} items, {time.perf_counter() - t0:.0f} s)",
              file=sys.stderr, flush=True)
    ingest_s = time.perf_counter() - t0
    with svc.pool.connection() as conn:
        conn.execute("ANALYZE")
    ctx = svc.recall_context()
    records, recipes = [], Counter()
    for i, q in enumerate(questions):
        res = recall(ctx, q.bank_id, RecallQuery(query=q.query, limit=50, max_tokens=200_000,
                                                 query_timestamp=q.query_timestamp))
        recipes[res.recipe] += 1
        records.append(score_question(q, res.results, ds.unit_ids, ks, metrics))
        if i % 200 == 0:
            print(f"  {i}/{len(questions)}", file=sys.stderr, flush=True)
    agg = aggregate(records)
    out = {"dataset": args.dataset, "runtime": args.runtime, "precision": args.precision,
           "stamp": emb.stamp, "questions": len(records), "offset": args.offset,
           "of_questions": len(ds.questions),
           "items": units, "ingest_s": round(ingest_s, 1), "recipes": dict(recipes),
           "n_scored": agg["n_scored"], "turn": agg["turn"], "session": agg["session"]}
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    svc.close()


def merge(parts: list[dict]) -> dict:
    """One result from runs over disjoint question ranges of one configuration: turn and
    session means weighted by each run's scored questions at that level (``n_scored``: a
    level's mean is over the questions that have gold there)."""
    n = sum(p["questions"] for p in parts)
    out = {k: parts[0][k] for k in ("dataset", "runtime", "precision", "stamp", "of_questions")}
    out.update(questions=n, items=sum(p["items"] for p in parts),
               ingest_s=round(sum(p["ingest_s"] for p in parts), 1),
               ranges=[[p.get("offset", 0), p.get("offset", 0) + p["questions"]] for p in parts])
    out["n_scored"] = {}
    for level in ("turn", "session"):
        w = [p.get("n_scored", {}).get(level, p["questions"]) for p in parts]
        out["n_scored"][level] = sum(w)
        out[level] = {k: sum(p[level][k] * x for p, x in zip(parts, w, strict=True)) / sum(w)
                      for k in parts[0][level]}
    return out


if __name__ == "__main__":
    main()
