"""Sweep RRF channel weights and the dense floor on LoCoMo, side by side with each channel alone.

Reads banks that ``rcll eval locomo`` already ingested (the dev stack's database); computes
each question's dense and lexical candidate lists once with the engine, then fuses them
under every setting and prints turn-level recall@10 and nDCG@5.

    python benchmarks/fusion_sweep.py --data ../shared/data/locomo
"""

from __future__ import annotations

import argparse

from rcll.bootstrap import bootstrap
from rcll.eval.datasets import load_locomo, locomo_unit_ids
from rcll.eval.metrics import mean_scores
from rcll.eval.runner import score_question
from rcll.search.dense import dense_candidates
from rcll.search.fusion import rrf
from rcll.search.lexical import lexical_candidates
from rcll.search.models import RecallQuery


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--prefix", default="eval-locomo-")
    args = ap.parse_args()
    svc = bootstrap()
    ds = load_locomo(args.data, bank_prefix=args.prefix)
    emb = svc.embedder.get()
    qvecs = emb.embed([q.query for q in ds.questions])
    cache = []
    with svc.pool.connection() as conn:
        meta = {}
        for q, vec in zip(ds.questions, qvecs):
            rq = RecallQuery(query=q.query)
            dense = dense_candidates(conn, rq, q.bank_id, vec, model=emb.model_name, limit=300,
                                     floor=0.0)
            lex, _ = lexical_candidates(conn, rq, q.bank_id, limit=300, df_cutoff=0.15)
            cache.append((q, dense, lex))
            for c in dense + lex:
                meta.setdefault(c.unit_id, None)
        rows = conn.execute("SELECT id, metadata FROM memory_units WHERE id = ANY(%s::uuid[])",
                            (list(meta),)).fetchall()
        meta = {str(r["id"]): {"metadata": r["metadata"]} for r in rows}

    def run(label, fuse):
        per_q = [score_question(q, [meta[u] for u in fuse(d, l)[:50]], locomo_unit_ids)
                 for q, d, l in cache]
        m = mean_scores([p["turn"] for p in per_q])
        print(f"| {label:<38} | {m['recall@10']:.3f} | {m['ndcg@5']:.3f} | {m['recall@5']:.3f} |")

    print("| setting | turn recall@10 | turn nDCG@5 | turn recall@5 |\n|---|---|---|---|")
    run("lexical only (BM25)", lambda d, l: [c.unit_id for c in l])
    run("dense only, floor 0.30", lambda d, l: [c.unit_id for c in d if c.score >= 0.3])
    for floor in (0.3,):
        for wd in (1.0, 0.5, 0.3, 0.2, 0.1):
            for k in (20, 60, 120):
                def fuse(d, l, floor=floor, wd=wd, k=k):
                    dd = [c for c in d if c.score >= floor]
                    for i, c in enumerate(dd, 1):
                        c.rank = i
                    return [u for u, _ in rrf({"dense": dd, "lexical": l}, k=k,
                                              weights={"dense": wd, "lexical": 1.0})]
                run(f"RRF k={k} w_dense={wd} floor={floor}", fuse)


if __name__ == "__main__":
    main()
