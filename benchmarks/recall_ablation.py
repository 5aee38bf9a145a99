"""Ablation of the recall recipe: each channel, stage and idea on and off, side by side.

Reads banks that ``rcll eval locomo|longmemeval`` already ingested (the dev stack's
database, found through the usual ``RCLL_*`` settings) and runs the engine's ``recall``
in-process — the same code the API runs, without HTTP — for every question under each
variant of the ``full`` recipe, in the same run. Prints turn-level nDCG@5 and recall@10,
session recall_all@5, per-category nDCG@5, and the in-process p50/p95 (ms) of each variant:

    python benchmarks/recall_ablation.py locomo ../shared/data/locomo
    python benchmarks/recall_ablation.py longmemeval \
        ../shared/data/longmemeval/longmemeval_s_dev60.json.gz

``--variants`` picks some (default: all of :func:`variants`); ``--out`` writes the JSON.
Weights are chosen on LoCoMo and confirmed on LongMemEval (never fitted to the latter).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from rcll.bootstrap import bootstrap
from rcll.eval.datasets import load_locomo, load_longmemeval
from rcll.eval.metrics import LOCOMO_KS, aggregate, latency_summary
from rcll.eval.runner import LME_KS, ready_questions, score_question
from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import RECIPES, Recipe, Step


def _without(recipe: Recipe, name: str, *, channels=(), steps=(), params=None,
             weights=None) -> Recipe:
    chans = tuple(c for c in recipe.channels if c not in channels)
    return replace(recipe, name=name, channels=chans,
                   weights={**{c: w for c, w in recipe.weights.items() if c in chans},
                            **(weights or {})},
                   steps=tuple(s for s in recipe.steps if s.name not in steps),
                   params=recipe.params if params is None else params)


def variants() -> dict[str, Recipe]:
    """The recipes compared: ``hybrid``, ``cold``, ``full`` (cold plus the graph channel: the
    default), and ``cold`` or ``full`` with one part removed or changed."""
    cold, full = RECIPES["cold"], RECIPES["full"]
    ctx_off = {**cold.params, "lexical": {**cold.params["lexical"], "context": 0.0}}
    return {
        "hybrid": RECIPES["hybrid"],
        "cold": cold,
        "full": RECIPES["full"],
        "cold - lexical context": _without(cold, "cold - lexical context", params=ctx_off),
        "cold with context everywhere": replace(
            cold, name="cold with context everywhere",
            params={**cold.params, "lexical": {"context": 0.5}}),
        "cold - temporal": _without(cold, "cold - temporal", channels=("temporal",)),
        "cold - dense": _without(cold, "cold - dense", channels=("dense",)),
        "cold with dense 0.2": replace(cold, name="cold with dense 0.2",
                                       weights={**cold.weights, "dense": 0.2}),
        "cold - trust and expand": _without(cold, "cold - trust and expand",
                                            steps=("trust", "expand")),
        "cold - speaker": _without(cold, "cold - speaker", steps=("speaker",)),
        "cold - post": _without(cold, "cold - post",
                                steps=("collapse_duplicates", "worth", "l0")),
        "cold - session step": _without(cold, "cold - session step", steps=("context",)),
        "full - coverage": _without(full, "full - coverage", steps=("coverage",)),
        "full - session step": _without(full, "full - session step", steps=("context",)),
        **{f"full with session step {b}": _with_param(full, f"full with session step {b}",
                                                      "context", session=b)
           for b in (0.1, 0.5)},
        **{f"full with coverage {w}": _with_param(full, f"full with coverage {w}", "coverage",
                                                  weight=w) for w in (0.1, 0.3)},
        "full with session pool 100": _with_param(full, "full with session pool 100",
                                                  "context", pool=100),
        "full with session pool 100 + dense floor 0.3": replace(
            _with_param(full, "full with session pool 100 + dense floor 0.3", "context",
                        pool=100), params={**full.params, "dense": {"floor": 0.3}}),
        "full with dense floor 0.3": replace(
            full, name="full with dense floor 0.3",
            params={**full.params, "dense": {"floor": 0.3}}),
        **{f"full + lexical feedback {m} terms at {w}": replace(
            full, name=f"full + lexical feedback {m} terms at {w}",
            params={**full.params, "lexical": {**full.params["lexical"], "prf_terms": m,
                                               "prf_weight": w}})
           for m, w in ((10, 0.3), (10, 0.6), (20, 0.3))},
        **{f"full + lexical feedback list at {w}": replace(
            full, name=f"full + lexical feedback list at {w}",
            weights={**full.weights, "lexical_feedback": w},
            params={**full.params, "lexical": {**full.params["lexical"], "prf_terms": 10,
                                               "prf_weight": 0.3, "prf_separate": True}})
           for w in (0.3, 0.5, 1.0)},
        **{f"full with session terms {w}": _with_param(full, f"full with session terms {w}",
                                                       "context", terms=w)
           for w in (0.1, 0.2, 0.3)},
        # episode-level channel evidence (rcll.search.context: each episode ranked by the
        # mean of its 3 best scores in the channel, fused as one more RRF list)
        **{f"full + episode {ch} {w}": _with_param(
            full, f"full + episode {ch} {w}", "context",
            episodes={c: w for c in ch.split("+")}, episode_top=3)
           for ch, ws in (("dense", (0.3, 0.5, 1.0)), ("lexical", (0.3, 1.0)),
                          ("dense+lexical", (0.3, 1.0))) for w in ws},
        "full + episode dense 1.0 top 1": _with_param(
            full, "full + episode dense 1.0 top 1", "context", episodes={"dense": 1.0},
            episode_top=1),
        "full + window 0.5": _with_step(full, "full + window 0.5", Step.of("window", boost=0.5),
                                        before="rerank"),
    }


def _with_param(recipe: Recipe, name: str, step: str, **params) -> Recipe:
    """``recipe`` with the parameters of its step named ``step`` updated."""
    return replace(recipe, name=name, steps=tuple(
        Step.of(s.name, **{**s.params, **params}) if s.name == step else s
        for s in recipe.steps))


def _with_step(recipe: Recipe, name: str, step: Step, *, before: str) -> Recipe:
    """``recipe`` with ``step`` inserted before its step named ``before``."""
    steps = list(recipe.steps)
    at = next(i for i, s in enumerate(steps) if s.name == before)
    return replace(recipe, name=name, steps=(*steps[:at], step, *steps[at:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", choices=["locomo", "longmemeval"])
    ap.add_argument("data")
    ap.add_argument("--variants", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--every", type=int, default=1, help="ask every n-th question only")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--out", default=None)
    ap.add_argument("--per-question", default=None,
                    help="write every variant's per-question scores (JSON) to this path")
    ap.add_argument("--ready-banks-only", action="store_true",
                    help="skip questions whose bank still has queued or running retain jobs")
    args = ap.parse_args()
    if args.dataset == "locomo":
        ds, ks = load_locomo(args.data), LOCOMO_KS
    else:
        ds, ks = load_longmemeval(args.data), LME_KS
    all_variants = variants()
    names = args.variants.split(",") if args.variants else list(all_variants)
    unknown = [n for n in names if n not in all_variants]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {list(all_variants)}")
    recipes = {**RECIPES, **all_variants}
    svc = bootstrap()
    ctx = svc.recall_context()
    questions = ds.questions[:: args.every]
    if args.ready_banks_only:
        with svc.pool.connection() as conn:
            questions = ready_questions(conn, questions)
        print(f"{len(questions)} questions of banks whose retain jobs have all ended")
    records: dict[str, list] = {n: [] for n in names}
    lat: dict[str, list] = {n: [] for n in names}
    # warm-up: load the embedder, dateparser, the pool
    recall(ctx, questions[0].bank_id, RecallQuery(query=questions[0].query, recipe="cold"),
           recipes=recipes)
    for i, q in enumerate(questions):
        # every variant asks the same question back to back, the order rotating question by
        # question: the first to ask reads the bank's pages cold and would look slower
        for n in names[i % len(names):] + names[:i % len(names)]:
            req = RecallQuery(query=q.query, limit=args.limit, max_tokens=200_000,
                              query_timestamp=q.query_timestamp)
            req = req.model_copy(update={"recipe": n})
            t = time.perf_counter()
            res = recall(ctx, q.bank_id, req, recipes=recipes)
            lat[n].append((time.perf_counter() - t) * 1000)
            records[n].append(score_question(q, res.results, ds.unit_ids, ks))
        if i % 100 == 0:
            print(f"  {i}/{len(questions)}", flush=True)
    table = {}
    print(f"\n### {args.dataset}: {len(questions)} questions, in-process recall, same run\n")
    print("| variant | turn nDCG@5 | turn R@10 | session R_all@5 | p50 ms | p95 ms | "
          "nDCG@5 by category |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        agg = aggregate(records[n])
        lt = latency_summary(lat[n])
        cats = {c: round(v["turn"].get("ndcg@5", 0.0), 3)
                for c, v in sorted(agg["by_category"].items()) if v.get("turn")}
        table[n] = {"turn": agg["turn"], "session": agg["session"], "by_category": cats,
                    "latency_ms": lt, "recipe": all_variants[n].describe()}
        print(f"| {n} | {agg['turn']['ndcg@5']:.3f} | {agg['turn']['recall@10']:.3f} | "
              f"{agg['session'].get('recall_all@5', 0):.3f} | {lt['p50']:.1f} | "
              f"{lt['p95']:.1f} | {cats} |")
    if args.per_question:
        with open(args.per_question, "w", encoding="utf-8") as fh:
            json.dump(records, fh, default=str)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"dataset": args.dataset, "n_questions": len(questions),
                       "variants": table}, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
