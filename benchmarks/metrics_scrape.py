"""Print a /metrics scrape after an ingest and a recall (docs/reference/metrics.md).

Against a running stack (``rcll dev up``, or a deployment): ingests the bundled LongMemEval
sample (175 turns) into a fresh bank through the API, waits for the worker, recalls a few
questions, then scrapes the API's ``/metrics`` and the worker exporter
(``127.0.0.1:$RCLL_METRICS_PORT``) and prints every RCLL family with its non-zero samples
(histogram buckets left out: their ``_count`` and ``_sum`` are printed).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/metrics_scrape.py [--api URL] [--worker URL]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from rcll.client import RCLLClient
from rcll.config import get_settings

SAMPLE = Path(__file__).resolve().parents[1] / "rcll/samples/longmemeval/items.jsonl"
QUESTIONS = ["Which productivity apps did I ask about?",
             "How do Todoist and Trello integrate with Google Calendar?",
             "What did I plan for the week?"]


def nonzero_lines(page: str) -> list[str]:
    """The RCLL samples of a text page with a non-zero value, buckets left out, sorted."""
    out = []
    for fam in text_string_to_metric_families(page):
        if not fam.name.startswith("rcll_"):
            continue
        for s in fam.samples:
            if s.name.endswith(("_bucket", "_created")) or s.value == 0:
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out.append(f"{s.name}{{{labels}}} {s.value:g}")
    return sorted(out)


def zero_families(page: str) -> list[str]:
    """RCLL families on the page whose samples are all zero."""
    return sorted(f.name for f in text_string_to_metric_families(page)
                  if f.name.startswith("rcll_") and f.samples
                  and all(s.value == 0 for s in f.samples if not s.name.endswith("_created")))


def main() -> None:
    s = get_settings()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", default=s.base_url)
    ap.add_argument("--worker", default=f"http://127.0.0.1:{s.metrics_port}")
    ap.add_argument("--bank", default=f"metrics-scrape-{int(time.time())}")
    ap.add_argument("--items", type=int, default=175, help="Sample items to ingest (of 175).")
    ap.add_argument("--jobs", type=int, default=4, help="Retain requests they are split into.")
    a = ap.parse_args()

    client = RCLLClient(a.api, timeout=300, api_key=s.api_key)
    headers = {"Authorization": f"Bearer {s.api_key}"} if s.api_key else {}
    items = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    items = items[: a.items]
    t0 = time.perf_counter()
    size = -(-len(items) // a.jobs)
    ops = [client.retain(a.bank, items[i:i + size])["operation_id"]
           for i in range(0, len(items), size)]
    # while the jobs wait and run: the queue depth and jobs-by-state families sampled live
    page = httpx.get(f"{a.api}/metrics", headers=headers, timeout=10).text
    print(f"# during the ingest ({len(ops)} jobs just submitted): GET {a.api}/metrics")
    for line in nonzero_lines(page):
        if line.startswith(("rcll_queue_depth", "rcll_jobs")):
            print(line)
    final = client.wait(a.bank, ops)
    ingest_s = time.perf_counter() - t0
    for q in QUESTIONS:
        client.recall(a.bank, q, tiers=["cold"])
    units = sum(o["counts"].get("units_created", 0) for o in final)
    print(f"\n# ingest: {len(items)} items in {len(ops)} jobs -> "
          f"{', '.join(sorted(o['status'] for o in final))}; {units} units in {ingest_s:.1f} s; "
          f"then {len(QUESTIONS)} recalls (cold tier)")
    for name, url in (("API", f"{a.api}/metrics"), ("worker", f"{a.worker}/metrics")):
        page = httpx.get(url, headers=headers, timeout=10).text
        print(f"\n# {name}: GET {url}")
        for line in nonzero_lines(page):
            print(line)
        zeros = zero_families(page)
        if zeros:
            print(f"# all zero on this page: {', '.join(zeros)}")


if __name__ == "__main__":
    main()
