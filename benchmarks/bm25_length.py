"""BM25 document length: distinct lexemes (before migration 0015) vs tokens, side by side.

Reads banks that ``rcll eval locomo|longmemeval`` already ingested (the database of the
usual ``RCLL_*`` settings; a read-only role is enough) and runs the engine's ``recall``
in-process for every question under each recipe twice — once with BM25's document length
``dl`` (and so avgdl) = the unit's number of distinct lexemes, ``length(tsv)``, once with its
token count, Σ over lexemes of their positions — both computed inline from the stored
``tsv``, so the comparison needs no migration and runs on a database of either schema. Each
question is asked under every variant back to back. Prints turn nDCG@5 / recall@10,
session recall_all@5, p50/p95 (ms, in-process) and the banks' mean length under each notion:

    RCLL_DATABASE_URL=postgresql://rcll_reader@127.0.0.1:54329/rcll \\
        python benchmarks/bm25_length.py locomo ../shared/data/locomo
    RCLL_DATABASE_URL=... python benchmarks/bm25_length.py longmemeval \\
        ../shared/data/longmemeval/longmemeval_s_dev60.json.gz --ready-banks-only

Each recipe runs without the speaker step (:mod:`rcll.search.speaker`; ``cold - speaker``
when the recipe has one); ``--speaker-boosts 0.1,0.25`` adds, per recipe, that base with the
step first at each boost, with token lengths (``cold (speaker 0.25)`` is today's ``cold``);
``--lengths tokens`` leaves the distinct-lexeme variants out. Choose on LoCoMo, confirm on
LongMemEval (never fitted to the latter).
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
from rcll.search import lexical
from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import RECIPES, Step

# BM25's document length as SQL over the unit alias {u}.
LENGTHS = {
    "lexemes": "length({u}.tsv)",
    "tokens": "(SELECT coalesce(sum(coalesce(array_length(p.positions, 1), 1)), 0) "
              "FROM unnest({u}.tsv) AS p)",
}


def mean_lengths(pool, banks: list[str]) -> dict[str, float]:
    """Mean unit length of the live units of ``banks`` under each notion of :data:`LENGTHS`."""
    cols = ", ".join(f"avg({expr.format(u='u')}) AS {name}" for name, expr in LENGTHS.items())
    with pool.connection() as conn:
        row = conn.execute(
            f"""SELECT {cols} FROM memory_units u WHERE u.bank_id = ANY(%s)
                AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL""",
            (banks,)).fetchone()
    return {k: round(float(v or 0), 1) for k, v in row.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", choices=["locomo", "longmemeval"])
    ap.add_argument("data")
    ap.add_argument("--recipes", default="cold,hybrid", help="comma-separated recipe names")
    ap.add_argument("--lengths", default="lexemes,tokens", help="comma-separated, of LENGTHS")
    ap.add_argument("--speaker-boosts", default="", help="comma-separated boosts of the "
                    "speaker step (added first to each recipe, with token lengths)")
    ap.add_argument("--every", type=int, default=1, help="ask every n-th question only")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--out", default=None)
    ap.add_argument("--ready-banks-only", action="store_true",
                    help="skip questions whose bank still has queued or running retain jobs "
                         "or no units yet")
    args = ap.parse_args()
    if args.dataset == "locomo":
        ds, ks = load_locomo(args.data), LOCOMO_KS
    else:
        ds, ks = load_longmemeval(args.data), LME_KS
    recipes = args.recipes.split(",")
    boosts = [float(b) for b in args.speaker_boosts.split(",") if b]
    svc = bootstrap()
    ctx = svc.recall_context()
    questions = ds.questions[:: args.every]
    if args.ready_banks_only:
        with svc.pool.connection() as conn:
            questions = ready_questions(conn, questions)
        print(f"{len(questions)} questions of banks whose retain jobs have all ended")
    if not questions:
        raise SystemExit("no questions to ask")
    # each recipe without its speaker step (named "<recipe> - speaker" if it had one); with
    # --speaker-boosts, that base plus the step first at each boost
    all_recipes, bases = dict(RECIPES), {}
    for r in recipes:
        steps = tuple(s for s in RECIPES[r].steps if s.name != "speaker")
        name = r if steps == RECIPES[r].steps else f"{r} - speaker"
        all_recipes[name] = bases[r] = replace(RECIPES[r], name=name, steps=steps)
    variants = [(bases[r].name, n) for r in recipes for n in args.lengths.split(",")]
    for r in recipes:
        for b in boosts:
            name = f"{r} + speaker {b:g}" if bases[r].name == r else f"{r} (speaker {b:g})"
            all_recipes[name] = replace(bases[r], name=name,
                                        steps=(Step.of("speaker", boost=b), *bases[r].steps))
            variants.append((name, "tokens"))
    records: dict = {v: [] for v in variants}
    lat: dict = {v: [] for v in variants}
    recall(ctx, questions[0].bank_id, RecallQuery(query=questions[0].query, recipe="cold"))
    try:
        for i, q in enumerate(questions):
            for rname, lname in variants:  # every variant asks the same question back to back
                lexical.DOC_LEN = LENGTHS[lname]
                req = RecallQuery(query=q.query, limit=args.limit, max_tokens=200_000,
                                  query_timestamp=q.query_timestamp)
                req = req.model_copy(update={"recipe": rname})
                t = time.perf_counter()
                res = recall(ctx, q.bank_id, req, recipes=all_recipes)
                lat[(rname, lname)].append((time.perf_counter() - t) * 1000)
                records[(rname, lname)].append(score_question(q, res.results, ds.unit_ids, ks))
            if i % 100 == 0:
                print(f"  {i}/{len(questions)}", flush=True)
    finally:
        lexical.DOC_LEN = "{u}.tsv_len"
    means = mean_lengths(svc.pool, sorted({q.bank_id for q in questions}))
    print(f"\n### {args.dataset}: {len(questions)} questions, {len({q.bank_id for q in questions})}"
          f" banks, mean unit length {means}; in-process recall, same run\n")
    print("| recipe | BM25 length | turn nDCG@5 | turn R@10 | session R_all@5 | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|")
    table = {}
    for v in variants:
        agg, lt = aggregate(records[v]), latency_summary(lat[v])
        cats = {c: round(x["turn"].get("ndcg@5", 0.0), 3)
                for c, x in sorted(agg["by_category"].items()) if x.get("turn")}
        table[" / ".join(v)] = {"turn": agg["turn"], "session": agg["session"],
                                "by_category": cats, "latency_ms": lt}
        print(f"| {v[0]} | {v[1]} | {agg['turn']['ndcg@5']:.3f} | {agg['turn']['recall@10']:.3f}"
              f" | {agg['session'].get('recall_all@5', 0):.3f} | {lt['p50']:.1f} | "
              f"{lt['p95']:.1f} |")
    print("\nturn nDCG@5 by category:")
    for k, row in table.items():
        print(f"  {k}: {row['by_category']}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"dataset": args.dataset, "n_questions": len(questions),
                       "mean_length": means, "variants": table}, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
