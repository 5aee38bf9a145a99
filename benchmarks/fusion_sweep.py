"""Sweep the dense channel's RRF weight, side by side with each channel alone and plain RRF.

Reads banks that ``rcll eval locomo|longmemeval`` already ingested (the dev stack's
database); computes each question's dense and lexical candidates once with the engine,
fuses them under every setting and prints turn-level recall@10 and nDCG@5:

    python benchmarks/fusion_sweep.py locomo ../shared/data/locomo
    python benchmarks/fusion_sweep.py longmemeval ../shared/data/longmemeval/longmemeval_s_dev60.json.gz
"""

from __future__ import annotations

import argparse

from rcll.bootstrap import bootstrap
from rcll.eval.datasets import lme_unit_ids, load_locomo, load_longmemeval, locomo_unit_ids
from rcll.eval.metrics import mean_scores
from rcll.eval.runner import score_question
from rcll.search.dense import dense_candidates
from rcll.search.fusion import rrf
from rcll.search.lexical import lexical_candidates
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope

WEIGHTS = (1.0, 0.75, 0.5, 0.4, 0.3, 0.2, 0.1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", choices=["locomo", "longmemeval"])
    ap.add_argument("data")
    ap.add_argument("--floor", type=float, default=0.30)
    ap.add_argument("--k", type=int, default=60)
    args = ap.parse_args()
    if args.dataset == "locomo":
        ds, unit_ids = load_locomo(args.data), locomo_unit_ids
    else:
        ds, unit_ids = load_longmemeval(args.data), lme_unit_ids
    svc = bootstrap()
    emb = svc.embedder.get()
    qvecs = emb.embed([q.query for q in ds.questions])
    cache, meta = [], {}
    with svc.pool.connection() as conn:
        for q, vec in zip(ds.questions, qvecs, strict=True):
            rq = RecallQuery(query=q.query)
            dense = dense_candidates(conn, CallerScope(q.bank_id), vec, model=emb.stamp, limit=300,
                                     floor=args.floor)
            lex, _ = lexical_candidates(conn, CallerScope(q.bank_id), rq.query, limit=300, df_cutoff=0.15)
            cache.append((q, dense, lex))
            meta.update((c.unit_id, None) for c in dense + lex)
        rows = conn.execute("SELECT id, metadata FROM memory_units WHERE id = ANY(%s::uuid[])",
                            (list(meta),)).fetchall()
    meta = {str(r["id"]): {"metadata": r["metadata"]} for r in rows}

    def run(label: str, fuse) -> None:
        scored = [score_question(q, [meta[u] for u in fuse(dense, lex)[:50]], unit_ids)
                  for q, dense, lex in cache]
        m = mean_scores([s["turn"] for s in scored if s["turn"]])
        print(f"| {label:<32} | {m['recall@10']:.3f} | {m['ndcg@5']:.3f} | {m['recall@5']:.3f} |")

    print(f"{args.dataset}: {len(cache)} questions, k={args.k}, dense floor {args.floor}")
    print("| setting | turn recall@10 | turn nDCG@5 | turn recall@5 |\n|---|---|---|---|")
    run("lexical only (BM25)", lambda dense, lex: [c.unit_id for c in lex])
    run("dense only", lambda dense, lex: [c.unit_id for c in dense])
    for wd in WEIGHTS:
        run(f"RRF w_dense={wd}", lambda dense, lex, wd=wd: [u for u, _ in rrf(
            {"dense": dense, "lexical": lex}, k=args.k, weights={"dense": wd, "lexical": 1.0})])


if __name__ == "__main__":
    main()
