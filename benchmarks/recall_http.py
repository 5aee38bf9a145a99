"""Recall latency through HTTP, recipes side by side in the same run.

Asks every n-th LoCoMo question of banks ``rcll eval locomo`` already ingested, once per
recipe, the recipes in alternating order question by question (so load drift on a shared
machine hits them alike), and prints p50/p95/mean wall ms per recipe and the ratio of each
p50 to the first recipe's. It asks the cold tier only (``--tiers cold``, the default), so
every answer runs its recipe's pipeline:

    python benchmarks/recall_http.py ../shared/data/locomo --recipes hybrid,full
    python benchmarks/recall_http.py ../shared/data/locomo --recipes full \
        --url http://127.0.0.1:8766     # e.g. a second API started with the reranker on

``--url`` may be given several times as ``name=url`` to compare servers (e.g. one with
``RCLL_RERANKER_MODEL`` set) instead of recipes.
"""

from __future__ import annotations

import argparse
import json
import time

import httpx

from rcll.eval.datasets import load_locomo
from rcll.eval.metrics import latency_summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--recipes", default="hybrid,full")
    ap.add_argument("--url", action="append", default=None,
                    help="server base URL, or name=url (repeatable); default the dev API")
    ap.add_argument("--tiers", default="cold",
                    help="cascade tiers to ask (default cold: the recipe's pipeline, never an "
                         "answer tier 1 kept from an earlier run; 'all' = the server's plan)")
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    ds = load_locomo(args.data)
    urls = {}
    for u in args.url or ["http://127.0.0.1:8765"]:
        name, _, url = u.partition("=") if "=" in u else ("", "", u)
        urls[name or url] = url
    combos = [(r, n, url) for n, url in urls.items() for r in args.recipes.split(",")]
    lat: dict[str, list[float]] = {f"{r}@{n}": [] for r, n, _ in combos}
    reranked: dict[str, int] = dict.fromkeys(lat, 0)
    questions = ds.questions[:: args.every]
    with httpx.Client(timeout=60) as http:
        for i, q in enumerate(questions):
            order = combos if i % 2 == 0 else combos[::-1]
            for r, n, url in order:
                t = time.perf_counter()
                body = {"query": q.query, "recipe": r, "limit": args.limit,
                        "max_tokens": 200_000}
                if args.tiers != "all":
                    body["tiers"] = args.tiers.split(",")
                resp = http.post(f"{url}/v1/default/banks/{q.bank_id}/memories/recall",
                                 json=body)
                ms = (time.perf_counter() - t) * 1000
                resp.raise_for_status()
                lat[f"{r}@{n}"].append(ms)
                reranked[f"{r}@{n}"] += bool(resp.json().get("reranked"))
    first = None
    out = {}
    print(f"{len(questions)} questions, HTTP wall ms, same run, alternating order")
    print("| recipe@server | p50 | p95 | mean | p50 / first | reranked answers |")
    print("|---|---|---|---|---|---|")
    for key, values in lat.items():
        s = latency_summary(values)
        first = first or s["p50"]
        out[key] = {**s, "reranked": reranked[key], "n": len(values)}
        print(f"| {key} | {s['p50']:.1f} | {s['p95']:.1f} | {s['mean']:.1f} | "
              f"{s['p50'] / first:.2f} | {reranked[key]}/{len(values)} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
