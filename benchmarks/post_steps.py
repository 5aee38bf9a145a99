"""Cost of recall's post-processing and trust steps (issue 7 items 5-6), beside a same-run
baseline without them.

    cd <checkout> && HF_HUB_OFFLINE=1 /path/to/venv/python benchmarks/post_steps.py

Starts its own PostgreSQL (``--state-dir``, ``--port``), loads one LoCoMo conversation
(conv-41, one unit per turn, real all-MiniLM-L6-v2 vectors, cached in the state dir) with
its semantic links (the ``link`` stage as the worker runs it), then runs the conversation's
first 40 questions through :func:`rcll.search.recall.recall` (query vectors precomputed) with
three recipes over the same channels (dense 0.3 + lexical 1.0), each query once per recipe
in a row, five rounds:

- ``baseline``: fusion only, no step;
- ``post``: the post-processing every recipe ends with (collapse_duplicates, worth, l0);
- ``post+trust+expand``: trust and expansion first, as the ``full`` recipe.

Prints recall p50 / p95 (ms) per recipe, each step's p50 from ``trace``, and what the steps
did (units collapsed per answer, expansions) at limit 50 and limit 10.
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
from rcll.db import make_pool  # noqa: E402
from rcll.dev import postgres  # noqa: E402
from rcll.dev.scratch import scratch_database  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.models.tokenizer import TokenCounter  # noqa: E402
from rcll.retain import link_stage  # noqa: E402
from rcll.retain.pipeline import RetainContext  # noqa: E402
from rcll.search import recall as recall_mod  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402
from rcll.search.recipes import POST, RECIPES, Recipe, Step  # noqa: E402

CONV = "eval-locomo-conv-41"
WEIGHTS = {"dense": 0.3, "lexical": 1.0}
# the three recipes run under the name "hybrid" (RecallQuery only accepts known names)
VARIANTS = {
    "baseline": Recipe("hybrid", ("dense", "lexical"), WEIGHTS),
    "post": Recipe("hybrid", ("dense", "lexical"), WEIGHTS, steps=POST),
    "post+trust+expand": Recipe("hybrid", ("dense", "lexical"), WEIGHTS,
                                steps=(Step.of("trust"), Step.of("expand"), *POST)),
}
STEP_NAMES = ("trust", "expand", "collapse_duplicates", "worth", "l0")


def conv_vectors(state: Path, texts: list[str]) -> np.ndarray:
    cache = state / "conv41_minilm.npy"
    if cache.exists():
        v = np.load(cache)
        if len(v) == len(texts):
            return v
    from rcll.models.embedder import SentenceTransformerEmbedder
    v = SentenceTransformerEmbedder(MODEL, batch_size=64).embed(texts).astype(np.float32)
    np.save(cache, v)
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "post"))
    ap.add_argument("--port", type=int, default=55443)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stop", action="store_true")
    args = ap.parse_args()
    state = Path(args.state_dir)
    s = scratch_database(state, args.port, "post_bench")

    ds = load_locomo(args.data)
    texts = [it["content"] for it in ds.banks[CONV]]
    vecs = conv_vectors(state, texts)
    pool = make_pool(s.db_url, max_size=4, name="bench")
    pool.open(wait=True)
    with pool.connection() as conn:
        job = load_bank(conn, "conv", texts, vecs)
        conn.execute("ANALYZE")
    link_stage.run_link(RetainContext(pool=pool, classifier=None, tokens=None,
                                      embedder=_Handle(_Emb()), semantic_link_top_k=5,
                                      semantic_link_min_cosine=0.60), job)
    with pool.connection() as conn:
        strong = conn.execute("SELECT count(*) AS n FROM memory_links WHERE bank_id = 'conv' "
                              "AND weight >= 0.8").fetchone()["n"]
    queries = [q.query for q in ds.questions if q.bank_id == CONV][:40]
    qemb = query_vectors(state, queries)
    rctx = recall_mod.RecallContext(pool=pool, embedder=_Handle(_Emb(qemb)),
                                    tokens=TokenCounter(MODEL))

    def run(name: str, q: str, limit: int):
        recipes = {**RECIPES, "hybrid": VARIANTS[name]}
        t = time.perf_counter()
        res = recall_mod.recall(rctx, "conv", RecallQuery(query=q, limit=limit, trace=True),
                                recipes=recipes)
        return (time.perf_counter() - t) * 1000, res

    for q in queries[:3]:
        for name in VARIANTS:
            run(name, q, 50)  # warm
    out: dict = {"units": len(texts), "links_weight_ge_0_8": strong, "queries": len(queries),
                 "rounds": args.rounds}
    for limit in (50, 10):
        total = {n: [] for n in VARIANTS}
        steps = {n: {k: [] for k in STEP_NAMES} for n in VARIANTS}
        did = {n: {"collapsed": [], "expanded": []} for n in VARIANTS}
        for _ in range(args.rounds):
            for q in queries:
                for name in VARIANTS:  # one query through each recipe in a row: pairs share load
                    ms, res = run(name, q, limit)
                    total[name].append(ms)
                    for k in STEP_NAMES:
                        if k in res.timings_ms:
                            steps[name][k].append(res.timings_ms[k])
                    for k in did[name]:
                        did[name][k].append(res.counts.get(k, 0))
        out[f"limit_{limit}"] = {
            name: {"p50_ms": round(statistics.median(v), 2),
                   "p95_ms": round(float(np.percentile(v, 95)), 2),
                   "step_p50_ms": {k: round(statistics.median(x), 2)
                                   for k, x in steps[name].items() if x},
                   "collapsed_per_answer": round(statistics.mean(did[name]["collapsed"]), 2),
                   "expanded_per_answer": round(statistics.mean(did[name]["expanded"]), 2)}
            for name, v in total.items()}
        base = out[f"limit_{limit}"]["baseline"]["p50_ms"]
        for name in VARIANTS:
            out[f"limit_{limit}"][name]["p50_vs_baseline"] = round(
                out[f"limit_{limit}"][name]["p50_ms"] / base, 3)
    print(json.dumps(out, indent=2))
    (ROOT / "benchmarks" / "results" / "post_steps.json").write_text(json.dumps(out, indent=2) + "\n")
    pool.close()
    if args.stop:
        postgres.stop(s, log=lambda *_: None)


if __name__ == "__main__":
    main()
