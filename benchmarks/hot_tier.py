"""Tier 1 (hot, Redis) lookup latency against PostgreSQL exact cosine over the same units.

For each capacity (128, 512, 2048 units in one bank) it stores the same real units twice:
as rows of ``memory_units`` + ``memory_embeddings`` (all-MiniLM-L6-v2 vectors of LoCoMo
turns, 384 dimensions) and as tier 1 of that bank (``HotTier.promote``). Then it asks
LoCoMo questions (embedded once, untimed) of both:

- ``hot``: :meth:`HotTier.lookup` (threshold 0.5, limit 10), the process cache warm and
  nothing changed since the previous lookup: one Redis round trip for the change log, a
  numpy product, one round trip for the hits' use history;
- ``hot+chg``: the same, but before each lookup (untimed) a recall's updates were recorded
  (``record_use`` of 3 units with a new query as their cue), so every timed lookup also
  fetches the changed units' cues (one more round trip) — the steady state of a busy bank;
- ``pg``: the dense channel's query (:func:`rcll.search.dense.dense_candidates`, exact
  cosine for banks below ``vector_index_min_units``; limit 10, floor 0.5) in a READ ONLY
  transaction on a pooled connection — the baseline, in the same run.

Times are client-side wall clock around one call (Redis and PostgreSQL on loopback), after
one untimed warm-up pass; ``agree@10`` is the overlap of the two top-10 id sets (float16
storage in Redis vs float32 in PostgreSQL). Run (the dev stack's PostgreSQL is started if
it is not running; tables ``bench-hot-*`` banks are rebuilt)::

    PYTHONPATH=. python benchmarks/hot_tier.py [--queries 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from pathlib import Path

import numpy as np

from rcll.bootstrap import bootstrap
from rcll.cascade.hot import HotTier, HotUnit
from rcll.config import get_settings
from rcll.dev import postgres
from rcll.dev import redis as dev_redis
from rcll.eval.datasets import load_locomo
from rcll.models.embedder import input_stamp
from rcll.search.dense import dense_candidates
from rcll.search.scope import CallerScope
from rcll.store import migrate

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CAPACITIES = (128, 512, 2048)
THRESHOLD, LIMIT = 0.5, 10


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def store_bank(pool, bank: str, texts: list[str], vectors: np.ndarray, model: str) -> list[str]:
    """(Re)create ``bank`` with one unit and one embedding per text; the unit ids."""
    with pool.connection() as conn, conn.transaction():
        conn.execute("DELETE FROM memory_banks WHERE id = %s", (bank,))
        conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (bank, bank))
        ids = [str(uuid.uuid4()) for _ in texts]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memory_units (id, bank_id, text, token_count) VALUES (%s, %s, %s, %s)",
                [(i, bank, t, len(t.split())) for i, t in zip(ids, texts, strict=True)])
            cur.executemany(
                """INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, embedding)
                   VALUES (%s, %s, %s, %s, %s)""",
                [(i, bank, model, input_stamp(model), v) for i, v in zip(ids, vectors, strict=True)])
        conn.execute("ANALYZE memory_units")
        conn.execute("ANALYZE memory_embeddings")
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    settings = get_settings()
    postgres.start(settings, log=lambda *_: None)
    migrate.upgrade(settings)
    dev_redis.ensure(settings, log=lambda *_: None)
    svc = bootstrap(settings)
    emb = svc.embedder.get()
    assert emb is not None, svc.embedder.error
    ds = load_locomo(DATA / "locomo")
    texts = list(dict.fromkeys(it["content"] for items in ds.banks.values() for it in items))
    texts = texts[: max(CAPACITIES)]
    questions = [q.query for q in ds.questions][: args.queries]
    cue_texts = [q.query for q in ds.questions][args.queries: args.queries + 200]
    cache = settings.state_dir / f"bench_hot_tier_{len(texts)}_{len(questions)}.npz"
    if cache.exists():  # the embeddings of a previous run (same texts): not timed anyway
        z = np.load(cache)
        U, Q, cue_pool = z["U"], z["Q"], z["C"]
    else:
        t = time.perf_counter()
        U = emb.embed(texts).astype(np.float32)
        Q = emb.embed(questions).astype(np.float32)
        cue_pool = emb.embed(cue_texts).astype(np.float32)
        print(f"embedded {len(texts)} units and {len(questions)} + {len(cue_pool)} queries "
              f"in {time.perf_counter() - t:.1f} s (untimed)")
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, U=U, Q=Q, C=cue_pool)
    hot = HotTier(svc.redis, capacity=max(CAPACITIES), prefix="bench:hot")
    model = settings.embedder_stamp
    print(f"\nthreshold {THRESHOLD}, limit {LIMIT}, {len(questions)} queries per cell; ms, "
          "client-side wall clock\n")
    print(f"{'units':>6} | {'hot p50':>8} {'hot p95':>8} | {'hot+chg p50':>11} {'hot+chg p95':>11}"
          f" | {'pg p50':>7} {'pg p95':>7} | {'p50 ratio':>9} | {'agree@10':>8} | hits/q")
    for cap in CAPACITIES:
        bank = f"bench-hot-{cap}"
        ids = store_bank(svc.pool, bank, texts[:cap], U[:cap], model)
        hot.drop_bank(bank)
        time.sleep(0.001)
        hot.promote(bank, [HotUnit(i, U[k], 2, "general", "fact", len(texts[k].split()))
                           for k, i in enumerate(ids)], read_at=time.time())
        assert hot.size(bank) == cap, hot.size(bank)
        scope = CallerScope(bank)

        def hot_q(v, scope=scope):
            return hot.lookup(scope, v, threshold=THRESHOLD, limit=LIMIT)

        def pg_q(v, conn, bank=bank):
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                return dense_candidates(conn, CallerScope(bank), v, model=model,
                                        limit=LIMIT, floor=THRESHOLD)

        for v in Q:  # warm-up: caches, prepared statements, buffers
            hot_q(v)
        with svc.read_pool.connection() as conn:
            for v in Q:
                pg_q(v, conn)
        hot_ms, chg_ms, pg_ms, agree, nhits = [], [], [], [], []
        hot_sets = []
        for v in Q:
            t = time.perf_counter()
            hits = hot_q(v)
            hot_ms.append((time.perf_counter() - t) * 1000)
            nhits.append(len(hits))
            hot_sets.append({h.unit_id for h in hits})
        rng = np.random.default_rng(cap)
        for v in Q:
            hot.record_use(bank, list(rng.choice(ids, 3, replace=False)),
                           query_vector=cue_pool[rng.integers(len(cue_pool))])
            t = time.perf_counter()
            hot_q(v)
            chg_ms.append((time.perf_counter() - t) * 1000)
        # the pool hands out the same warm connection; each call is one READ ONLY transaction
        for v, hh in zip(Q, hot_sets, strict=True):
            with svc.read_pool.connection() as conn:
                t = time.perf_counter()
                rows = pg_q(v, conn)
                pg_ms.append((time.perf_counter() - t) * 1000)
            ph = {c.unit_id for c in rows}
            if ph or hh:
                agree.append(len(ph & hh) / max(len(ph), len(hh)))
        print(f"{cap:>6} | {statistics.median(hot_ms):>8.2f} {pct(hot_ms, 95):>8.2f} | "
              f"{statistics.median(chg_ms):>11.2f} {pct(chg_ms, 95):>11.2f} | "
              f"{statistics.median(pg_ms):>7.2f} {pct(pg_ms, 95):>7.2f} | "
              f"{statistics.median(pg_ms) / statistics.median(hot_ms):>8.1f}x | "
              f"{statistics.mean(agree) if agree else float('nan'):>8.3f} | "
              f"{statistics.mean(nhits):.1f}")
        hot.drop_bank(bank)
        with svc.pool.connection() as conn:
            conn.execute("DELETE FROM memory_banks WHERE id = %s", (bank,))
    svc.close()
    print("\nagree@10: |hot ∩ pg| / max(|hot|, |pg|) of the top-10 ids, hot as in the 'hot' "
          "column (no cues yet); p50 ratio = pg p50 / hot p50")


if __name__ == "__main__":
    main()
