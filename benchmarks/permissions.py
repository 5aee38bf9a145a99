"""Recall latency with permissions on vs off, in one run (issue 9: the filter must cost < 10 %).

LoCoMo (``../shared/data/locomo``) is ingested in chunk mode into a scratch database (its
own embedded PostgreSQL, ``--state-dir``/``--port``) through the real retain service and
stages (chunk, entities, embed, link), each turn's units given an audience and purposes by
its index ``i``:

====  ==========================  =====================================
i % 4 audience                    purposes
====  ==========================  =====================================
0     bank                        assist, operate
1     m1 (the measured member)    assist
2     bank                        audit
3     m2 (another member)         assist, personal
====  ==========================  =====================================

Each question is then recalled twice back to back through the engine's cascade with
``tiers: ["cold"]`` (the full pipeline, default recipe), in alternating order:

- **on**: principal ``m1`` (read on the bank, every purpose), purpose ``assist`` — it sees
  rows 0 and 1 (half the bank); every candidate query carries the audience and purpose
  filter;
- **off**: the unrestricted principal (auth off), no purpose: every unit.

Prints p50/p95 of the engine's own ``timings_ms.total`` for both and the ratio on/off of
the p50s; writes ``benchmarks/results/permissions.json``. ``--conversations`` limits the
ingest to the first N conversations (and their questions); ``--questions`` caps the
questions measured.

    python benchmarks/permissions.py [--conversations 10] [--questions 0]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from rcll.access.principal import Grant, Principal  # noqa: E402
from rcll.bootstrap import bootstrap  # noqa: E402
from rcll.cascade.cascade import Cascade  # noqa: E402
from rcll.dev import postgres  # noqa: E402
from rcll.dev.scratch import scratch_database  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.retain.models import RetainItem  # noqa: E402
from rcll.retain.service import RetainLimits, RetainService  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402

PURPOSES = ("assist", "operate", "audit", "personal")
SPLIT = [("bank", ["assist", "operate"]), ("m1", ["assist"]), ("bank", ["audit"]),
         ("m2", ["assist", "personal"])]


def pct(values, p) -> float:
    return round(float(np.percentile(values, p)), 2)


def ingest(svc, banks: dict[str, list[dict]]) -> dict:
    rctx = replace(svc.retain_context(), hot=None)  # no Redis here
    retain = RetainService(svc.pool, lambda: rctx, lambda *_: None,
                           RetainLimits(sync_max_items=100), purposes=PURPOSES)
    with svc.pool.connection() as conn:
        conn.execute("INSERT INTO members (id, name) VALUES ('m1', 'M1'), ('m2', 'M2') "
                     "ON CONFLICT DO NOTHING")
    t = time.perf_counter()
    n = 0
    for bank, items in banks.items():
        for start in range(0, len(items), 100):
            batch = []
            for i, it in enumerate(items[start:start + 100], start):
                aud, purposes = SPLIT[i % 4]
                batch.append(RetainItem(**it, audience=aud, purposes=purposes))
            job, _ = retain.retain(bank, batch, async_=False, principal=None)
            assert job["state"] in ("succeeded", "partial"), job
            n += len(batch)
    with svc.pool.connection() as conn:
        conn.execute("ANALYZE")
    return {"items": n, "seconds": round(time.perf_counter() - t, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "permissions"))
    ap.add_argument("--port", type=int, default=55471)
    ap.add_argument("--conversations", type=int, default=10)
    ap.add_argument("--questions", type=int, default=0, help="0: every question")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "permissions.json"))
    args = ap.parse_args()

    s = scratch_database(args.state_dir, args.port, "perms_bench")
    s = s.model_copy(update={"llm_provider": "none", "reranker_model": None})
    svc = bootstrap(s)
    try:
        ds = load_locomo(args.data)
        banks = dict(list(sorted(ds.banks.items()))[: args.conversations])
        questions = [q for q in ds.questions if q.bank_id in banks]
        if args.questions:
            questions = questions[: args.questions]
        ing = ingest(svc, banks)
        print(f"ingested {ing['items']} turns of {len(banks)} conversations in "
              f"{ing['seconds']} s")
        ctx = svc.recall_context()
        cascade = Cascade(ctx, None, None)
        member = Principal("m1", {b: Grant(b, "read", PURPOSES) for b in banks})
        arms = {"on": (member, "assist"), "off": (None, None)}
        for q in questions[:5]:  # warm the caches and the planner
            for who, purpose in arms.values():
                cascade.recall(q.bank_id, RecallQuery(query=q.query, purpose=purpose,
                                                      tiers=["cold"]), who)
        times: dict[str, list[float]] = {"on": [], "off": []}
        returned: dict[str, list[int]] = {"on": [], "off": []}
        for r in range(args.rounds):
            for i, q in enumerate(questions):
                order = ("on", "off") if (i + r) % 2 == 0 else ("off", "on")
                for arm in order:
                    who, purpose = arms[arm]
                    req = RecallQuery(query=q.query, purpose=purpose, tiers=["cold"],
                                      trace=True, query_timestamp=q.query_timestamp)
                    res = cascade.recall(q.bank_id, req, who)
                    times[arm].append(res.timings_ms["total"])
                    returned[arm].append(len(res.results))
        with svc.pool.connection() as conn:
            units = conn.execute("SELECT count(*) AS n, count(*) FILTER (WHERE (audience = "
                                 "'bank' OR audience = 'm1') AND 'assist' = ANY(purposes)) AS "
                                 "visible FROM memory_units").fetchone()
        out = {
            "dataset": "locomo", "conversations": len(banks), "questions": len(questions),
            "rounds": args.rounds, "units": units["n"], "units_visible_on": units["visible"],
            "ingest": ing, "tier": "cold", "recipe": ctx.default_recipe,
            "on": {"p50_ms": pct(times["on"], 50), "p95_ms": pct(times["on"], 95),
                   "mean_results": round(float(np.mean(returned["on"])), 2)},
            "off": {"p50_ms": pct(times["off"], 50), "p95_ms": pct(times["off"], 95),
                    "mean_results": round(float(np.mean(returned["off"])), 2)},
        }
        out["ratio_p50"] = round(out["on"]["p50_ms"] / out["off"]["p50_ms"], 3)
        out["ratio_p95"] = round(out["on"]["p95_ms"] / out["off"]["p95_ms"], 3)
        print(json.dumps(out, indent=2))
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    finally:
        svc.close()
        postgres.stop(s, log=lambda *_: None)


if __name__ == "__main__":
    main()
