"""Cost of issue 7's query preparation, graph and temporal channels, beside hybrid recall.

    cd <checkout> && HF_HUB_OFFLINE=1 /path/to/venv/python benchmarks/recall_channels.py

Starts its own PostgreSQL (``--state-dir``, ``--port``), loads one LoCoMo conversation
(conv-41, 663 turns; ``mentioned_at`` = the session time, real all-MiniLM-L6-v2 vectors) and
runs the real entities stage on it (:func:`rcll.retain.entity_stage.write_batch`: the
deterministic extractor, resolution, mentions, entity and temporal links), then adds
``--extra-entities`` (3,000) entities that no query names, so entity matching searches a
bank of a few thousand entities. Query vectors are precomputed (the embedder is not timed).

Prints, over the conversation's questions (five rounds, each question through every
variant in a row so they share the load):

- recall p50/p95 (ms) with recipe ``hybrid`` (the baseline: dense + lexical) and ``full``
  (dense, lexical, graph, temporal; its post-fusion steps are no-ops or stubs here);
- ``full`` on the same questions with " last month" appended and the reference time one day
  after the conversation's last session (so the temporal channel has a window);
- per-phase p50 from ``trace`` (``prepare``, ``graph``, ``temporal``) and the p50 of
  :func:`rcll.search.query_prep.match_entities` alone, with the entity count of the bank;
- mean graph seeds / candidates and temporal in-window units.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
sys.path.insert(0, str(ROOT))

from benchmarks.link_stage import _Emb, _Handle  # noqa: E402  (embedder stand-ins)
from rcll.db import make_pool  # noqa: E402
from rcll.dev import postgres  # noqa: E402
from rcll.dev.scratch import scratch_database  # noqa: E402
from rcll.entities.extractor import extract  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.models.embedder import input_stamp  # noqa: E402
from rcll.models.tokenizer import TokenCounter  # noqa: E402
from rcll.retain.entity_stage import write_batch  # noqa: E402
from rcll.search import recall as recall_mod  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402
from rcll.search.query_prep import match_entities  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
CONV = "eval-locomo-conv-41"




def embed(texts: list[str]) -> np.ndarray:
    from rcll.models.embedder import SentenceTransformerEmbedder
    return SentenceTransformerEmbedder(MODEL, batch_size=64).embed(texts).astype(np.float32)


def load(conn, items: list[dict], vecs: np.ndarray, extra: int) -> dict:
    conn.execute("INSERT INTO memory_banks (id, name) VALUES ('conv', 'conv')")
    job = conn.execute("""INSERT INTO jobs (bank_id, kind, state, stage) VALUES
                          ('conv', 'retain', 'running', 'entities') RETURNING id""").fetchone()["id"]
    ids = [r["id"] for r in conn.execute(
        """INSERT INTO memory_units (bank_id, job_id, text, mentioned_at, metadata, created_at)
           SELECT 'conv', %s, t, m, md, now() + make_interval(secs => o)
           FROM unnest(%s::text[], %s::timestamptz[], %s::jsonb[]) WITH ORDINALITY AS x(t, m, md, o)
           RETURNING id""",
        (job, [i["content"] for i in items],
         [datetime.fromisoformat(i["timestamp"]).replace(tzinfo=UTC) for i in items],
         [json.dumps(i["metadata"]) for i in items])).fetchall()]
    stamp = input_stamp(MODEL)
    with conn.cursor() as cur:
        cur.executemany("""INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp,
                           embedding) VALUES (%s, 'conv', %s, %s, %s)""",
                        [(i, MODEL, stamp, v) for i, v in zip(ids, vecs, strict=True)])
    batch = [(str(uid), [(m, "deterministic") for m in extract(it["content"], it["metadata"])])
             for uid, it in zip(ids, items, strict=True)]
    counts = write_batch(conn, "conv", batch)
    conn.execute("""INSERT INTO entities (bank_id, name, normalized)
                    SELECT 'conv', 'Filler Entity ' || g, 'filler entity ' || g
                    FROM generate_series(1, %s) g""", (extra,))
    conn.execute("ANALYZE")
    return counts


def pct(v: list[float], p: float) -> float:
    return round(float(np.percentile(v, p)), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "channels"))
    ap.add_argument("--port", type=int, default=55447)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--extra-entities", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stop", action="store_true")
    args = ap.parse_args()
    state = Path(args.state_dir)
    s = scratch_database(state, args.port, "channels_bench")

    ds = load_locomo(args.data)
    items = ds.banks[CONV]
    questions = [q.query for q in ds.questions if q.bank_id == CONV][:40]
    timed = [q + " last month" for q in questions]
    t = time.perf_counter()
    vecs = embed([i["content"] for i in items] + questions + timed)
    print(f"embedded {len(vecs)} texts in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    unit_vecs = vecs[:len(items)]
    qtable = dict(zip(questions + timed, vecs[len(items):], strict=True))
    pool = make_pool(s.db_url, max_size=4, name="bench")
    pool.open(wait=True)
    with pool.connection() as conn:
        written = load(conn, items, unit_vecs, args.extra_entities)
        n_ent = conn.execute("SELECT count(*) AS n FROM entities").fetchone()["n"]
    ref = datetime.fromisoformat(items[-1]["timestamp"]).replace(tzinfo=UTC) + timedelta(days=1)
    ctx = recall_mod.RecallContext(pool=pool, embedder=_Handle(_Emb(qtable)),
                                   tokens=TokenCounter(MODEL))
    variants = {
        "hybrid": lambda q, tq: RecallQuery(query=q, recipe="hybrid", trace=True),
        "full": lambda q, tq: RecallQuery(query=q, recipe="full", trace=True),
        "full_last_month": lambda q, tq: RecallQuery(query=tq, recipe="full", trace=True,
                                                     query_timestamp=ref),
    }
    for q, tq in list(zip(questions, timed, strict=True))[:3]:  # warm (dateparser loads on first use)
        for make in variants.values():
            recall_mod.recall(ctx, "conv", make(q, tq))
    total: dict[str, list[float]] = {k: [] for k in variants}
    phase: dict[str, list[float]] = {}
    info: dict[str, list[float]] = {}
    match_ms: list[float] = []
    for _ in range(args.rounds):
        for q, tq in zip(questions, timed, strict=True):
            for name, make in variants.items():
                t = time.perf_counter()
                res = recall_mod.recall(ctx, "conv", make(q, tq))
                total[name].append((time.perf_counter() - t) * 1000)
                if name != "hybrid":
                    for k in ("prepare", "graph", "temporal"):
                        phase.setdefault(f"{name}.{k}", []).append(res.timings_ms.get(k, 0.0))
                    for k in ("graph_seeds", "graph", "temporal", "temporal_in_window"):
                        info.setdefault(f"{name}.{k}", []).append(res.counts.get(k) or 0)
            with pool.connection() as conn:
                t = time.perf_counter()
                match_entities(conn, "conv", q)
                match_ms.append((time.perf_counter() - t) * 1000)
    out = {
        "bank": {"units": len(items), "entities": n_ent, "entity_stage": written,
                 "questions": len(questions), "rounds": args.rounds},
        "recall_ms": {k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in total.items()},
        "full_over_hybrid_p50": round(statistics.median(total["full"])
                                      / statistics.median(total["hybrid"]), 3),
        "phase_p50_ms": {k: pct(v, 50) for k, v in phase.items()},
        "match_entities_p50_ms": pct(match_ms, 50),
        "mean": {k: round(statistics.mean(v), 1) for k, v in info.items()},
    }
    print(json.dumps(out, indent=2))
    (ROOT / "benchmarks" / "results" / "recall_channels.json").write_text(
        json.dumps(out, indent=2) + "\n")
    pool.close()
    if args.stop:
        postgres.stop(s, log=lambda *_: None)


if __name__ == "__main__":
    main()
