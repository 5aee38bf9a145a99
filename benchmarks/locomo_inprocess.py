"""LoCoMo in-process, on a scratch database of its own: ingest every conversation through the
retain service (``async_=False``, the worker's stages) and ask every question with no recipe
named — the recipe a chat bank gets from the per-bank rule (rcll.search.documents) — scoring
turn nDCG@5 / recall@10 as ``rcll eval locomo`` does (limit 50, max_tokens 200,000).

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/locomo_inprocess.py \
        [--data ../shared/data/locomo] [--reuse]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cisi import services  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.eval.metrics import LOCOMO_KS, aggregate  # noqa: E402
from rcll.eval.runner import score_question  # noqa: E402
from rcll.retain.models import RetainItem  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402
from rcll.search.recall import recall  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "locomo"))
    ap.add_argument("--port", type=int, default=55473)
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    ds = load_locomo(args.data)
    svc = services(Path(args.state_dir), args.port, args.reuse, name="locomo_bench")
    if not args.reuse:
        retain = svc.retain_service(lambda *_: None)
        for bank, items in ds.banks.items():
            for a in range(0, len(items), 100):
                job, _ = retain.retain(bank, [RetainItem(**i) for i in items[a:a + 100]],
                                       async_=False)
                assert job["state"] == "succeeded", job
            print(f"  ingested {bank}", file=sys.stderr, flush=True)
        with svc.pool.connection() as conn:
            conn.execute("ANALYZE")
    ctx = svc.recall_context()
    records, recipes = [], Counter()
    for i, q in enumerate(ds.questions):
        res = recall(ctx, q.bank_id, RecallQuery(query=q.query, limit=50, max_tokens=200_000,
                                                 query_timestamp=q.query_timestamp))
        recipes[res.recipe] += 1
        records.append(score_question(q, res.results, ds.unit_ids, LOCOMO_KS))
        if i % 200 == 0:
            print(f"  {i}/{len(ds.questions)}", file=sys.stderr, flush=True)
    agg = aggregate(records)
    out = {"questions": len(records), "recipes": dict(recipes), "turn": agg["turn"],
           "session": agg["session"]}
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    svc.close()


if __name__ == "__main__":
    main()
