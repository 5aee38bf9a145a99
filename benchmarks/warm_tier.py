"""Tier 2 (warm) latency and recall beside the exact dense query, on a few thousand real units.

    cd <checkout> && PYTHONPATH=. HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 \\
        .venv/bin/python benchmarks/warm_tier.py [--source-url postgresql://.../rcll]

Starts its own PostgreSQL (``--state-dir``, ``--port``) with every migration (0016: the
``lsh`` column) and loads one bank of all ten LoCoMo conversations (5,882 live turns): the
turn texts and their all-MiniLM-L6-v2 vectors are READ from ``--source-url`` (the dev stack's
``eval-locomo-*`` banks, one read-only transaction), or embedded from ``--data`` when that
database does not answer; the real entities stage (:func:`rcll.retain.entity_stage
.write_batch`) writes entities and mentions; ``VACUUM ANALYZE`` (steady state: the index-only
shortlist needs the visibility map). Query vectors of ``--questions`` LoCoMo questions (every
k-th, all conversations) are embedded up front (not timed); entities are matched per query
(not timed: query preparation is shared with tier 3).

Prints, per question in ``--rounds`` rounds, each variant in a row so they share the load:

- ``exact_dense``: :func:`rcll.search.dense.dense_candidates` with ``limit=10`` — the exact
  pgvector cosine top-10 of the bank (no HNSW index in this scratch database), the baseline;
- ``warm_s{K}_e{D}``: :func:`rcll.cascade.warm.warm_lookup` (threshold −1, limit 10) with a
  ``K``-unit LSH shortlist (``--shortlists``) and a drawer of the ``D`` most recent mentions
  per matched entity (``--per-entity``; 0 = drawer off);

with p50/p95 ms and recall@10 against ``exact_dense`` (and how many of the hits came from the
entity drawer), then, offline in numpy on the same vectors, the shortlist recall@10 of
other signature sizes (64 to 1,024 bits) and of LSH banding (the GIN-indexable
alternative) — which is how the 512-bit Hamming design was chosen. The EXPLAIN of one
shortlist shows it is an index-only scan. ``big_bank``: the cost on a bank of 60,000 units
(the shortlist's scan is linear in the bank), naming an entity every unit mentions, with and
without the index migration 0016 drops, beside the exact dense query on that bank.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rcll.cascade import lsh  # noqa: E402
from rcll.cascade.warm import warm_lookup  # noqa: E402
from rcll.db import make_pool  # noqa: E402
from rcll.dev import postgres  # noqa: E402
from rcll.dev.scratch import scratch_database  # noqa: E402
from rcll.entities.extractor import extract  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.models.embedder import input_stamp  # noqa: E402
from rcll.retain.entity_stage import write_batch  # noqa: E402
from rcll.search.channels import PreparedQuery  # noqa: E402
from rcll.search.dense import dense_candidates  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402
from rcll.search.query_prep import match_entities  # noqa: E402
from rcll.search.scope import CallerScope  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
BANK = "locomo"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"


def embed(texts: list[str]) -> np.ndarray:
    from rcll.models.embedder import SentenceTransformerEmbedder
    return SentenceTransformerEmbedder(MODEL, batch_size=64).embed(texts).astype(np.float32)


def source_units(url: str, data: Path) -> tuple[list[dict], np.ndarray, str]:
    """``(items, vectors, where from)``: live LoCoMo turns with ``content``, ``metadata``,
    ``timestamp`` and their vectors, read-only from ``url``, else embedded from ``data``."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            register_vector(conn)
            conn.execute("SET TRANSACTION READ ONLY")
            rows = conn.execute(
                """SELECT u.text, u.metadata, u.mentioned_at, e.embedding
                   FROM memory_units u JOIN memory_embeddings e ON e.unit_id = u.id
                   WHERE u.bank_id LIKE 'eval-locomo-%%' AND e.model = %s
                     AND u.superseded_by_id IS NULL AND u.invalidated_reason IS NULL
                   ORDER BY u.bank_id, u.created_at, u.id""", (MODEL,)).fetchall()
        if rows:
            items = [{"content": r[0], "metadata": r[1] or {}, "timestamp": r[2]} for r in rows]
            return items, np.stack([r[3].to_numpy() for r in rows]).astype(np.float32), url
    except psycopg.OperationalError as exc:
        print(f"source database unavailable ({exc}); embedding {data}", file=sys.stderr)
    ds = load_locomo(data)
    items = [dict(i, timestamp=datetime.fromisoformat(i["timestamp"]).replace(tzinfo=UTC)
                  if i.get("timestamp") else None) for b in ds.banks.values() for i in b]
    return items, embed([i["content"] for i in items]), str(data)


def load(conn, items: list[dict], vecs: np.ndarray) -> dict:
    conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (BANK, BANK))
    job = conn.execute("""INSERT INTO jobs (bank_id, kind, state, stage) VALUES
                          (%s, 'retain', 'running', 'entities') RETURNING id""",
                       (BANK,)).fetchone()["id"]
    ids = [r["id"] for r in conn.execute(
        """INSERT INTO memory_units (bank_id, job_id, text, mentioned_at, metadata, created_at)
           SELECT %s, %s, t, m, md, now() + make_interval(secs => o)
           FROM unnest(%s::text[], %s::timestamptz[], %s::jsonb[]) WITH ORDINALITY AS x(t, m, md, o)
           RETURNING id""",
        (BANK, job, [i["content"] for i in items], [i["timestamp"] for i in items],
         [json.dumps(i["metadata"]) for i in items])).fetchall()]
    rows = [(i, BANK, MODEL, input_stamp(MODEL), v) for i, v in zip(ids, vecs, strict=True)]
    # baseline: the table as before migration 0016 (no lsh column, its two indexes)
    conn.execute("""CREATE TEMP TABLE plain (unit_id uuid, bank_id text, model text,
                    input_stamp text, embedding vector, created_at timestamptz DEFAULT now(),
                    PRIMARY KEY (unit_id, model))""")
    conn.execute("CREATE INDEX ON plain (bank_id, model)")
    insert_ms = {}
    for table in ("plain", "memory_embeddings"):  # the write path's statement, row by row
        t = time.perf_counter()
        with conn.cursor() as cur:
            cur.executemany(f"""INSERT INTO {table} (unit_id, bank_id, model, input_stamp,
                                embedding) VALUES (%s, %s, %s, %s, %s)""", rows)
        insert_ms[table] = round((time.perf_counter() - t) * 1000 / len(ids), 3)
    # what migration 0016 costs an existing table: the rewrite that fills lsh
    t = time.perf_counter()
    conn.execute(f"ALTER TABLE plain ADD COLUMN lsh bit({lsh.BITS}) "
                 f"GENERATED ALWAYS AS ({lsh.FUNCTION}(embedding)) STORED")
    rewrite_ms = (time.perf_counter() - t) * 1000
    conn.execute("DROP TABLE plain")
    batch = [(str(uid), [(m, "deterministic") for m in extract(it["content"], it["metadata"])])
             for uid, it in zip(ids, items, strict=True)]
    counts = write_batch(conn, BANK, batch)
    return {"units": len(ids), "entity_stage": counts,
            "embedding_insert_ms_per_row": {"before_0016": insert_ms["plain"],
                                            "with_lsh_column": insert_ms["memory_embeddings"]},
            "migration_rewrite_ms_per_1k_rows": round(rewrite_ms * 1000 / len(ids), 1)}


def pct(v: list[float], p: float) -> float:
    return round(float(np.percentile(v, p)), 2)


def offline_sweep(X: np.ndarray, Q: np.ndarray, exact: list[list[int]], shortlists: list[int]) -> dict:
    """Shortlist recall@10 of SimHash signatures of other sizes (Hamming ranking) and of LSH
    banding (any band of b bits equal), numpy, on the same vectors; planes as lsh.planes."""
    out: dict = {}
    for bits in (64, 128, 256, 512, 1024):
        P = lsh.planes(bits)
        SX, SQ = (X[:, :lsh.DIMS] @ P.T) > 0, (Q[:, :lsh.DIMS] @ P.T) > 0
        for k in shortlists:
            rec = [len(set(np.argsort((SX != SQ[i]).sum(1), kind="stable")[:k]) & set(exact[i])) / 10
                   for i in range(len(Q))]
            out[f"hamming_b{bits}_s{k}"] = round(float(np.mean(rec)), 3)
        if bits != lsh.BITS:
            continue
        for b in (8, 12):
            w = 1 << np.arange(b)
            nb = bits // b
            bx = np.stack([(SX[:, j * b:(j + 1) * b] * w).sum(1) for j in range(nb)], 1)
            bq = np.stack([(SQ[:, j * b:(j + 1) * b] * w).sum(1) for j in range(nb)], 1)
            rec, frac = [], []
            for i in range(len(Q)):
                cand = np.where((bx == bq[i]).any(1))[0]
                frac.append(len(cand) / len(X))
                rec.append(len(set(cand) & set(exact[i])) / 10)
            out[f"bands_{nb}x{b}bit"] = {"recall_any_candidate": round(float(np.mean(rec)), 3),
                                         "candidates_share_of_bank": round(float(np.mean(frac)), 3)}
    # the ceiling of any signature of the first 64 dims: exact cosine of the sub-vectors
    Xs = X[:, :lsh.DIMS] / np.linalg.norm(X[:, :lsh.DIMS], axis=1, keepdims=True)
    Qs = Q[:, :lsh.DIMS] / np.linalg.norm(Q[:, :lsh.DIMS], axis=1, keepdims=True)
    for k in shortlists:
        rec = [len(set(np.argsort(-(Xs @ Qs[i]))[:k]) & set(exact[i])) / 10 for i in range(len(Q))]
        out[f"subvector64_exact_s{k}"] = round(float(np.mean(rec)), 3)
    return out


def big_bank(pool, url: str, qvecs: np.ndarray, units: int = 60_000, runs: int = 20) -> dict:
    """A second bank "big" of ``units`` units (the LoCoMo vectors cycled; every unit mentions
    one entity "Heavy"): p50/p95 ms of warm_lookup (shortlist 400, drawer 100) without and
    with that entity named — the second with migration 0016's index set and with its dropped
    ``unit_entities_entity (entity_id)`` recreated in a rolled-back transaction (the
    "before") — beside the exact dense top-10 of the bank (no HNSW index here; production
    builds one per bank from 5,000 vectors)."""
    with pool.connection() as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('big', 'big')")
        eid = conn.execute("INSERT INTO entities (bank_id, name, normalized) VALUES "
                           "('big', 'Heavy', 'heavy') RETURNING id::text AS id").fetchone()["id"]
        conn.execute("INSERT INTO memory_units (bank_id, text) SELECT 'big', 'u ' || g "
                     "FROM generate_series(1, %s) g", (units,))
        n_src = conn.execute("SELECT count(*) AS n FROM memory_embeddings WHERE bank_id = %s",
                             (BANK,)).fetchone()["n"]
        conn.execute(
            """INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, embedding)
               SELECT u.id, 'big', e.model, e.input_stamp, e.embedding
               FROM (SELECT id, row_number() OVER (ORDER BY id) %% %s AS k FROM memory_units
                     WHERE bank_id = 'big') u
               JOIN (SELECT model, input_stamp, embedding,
                            row_number() OVER (ORDER BY unit_id) - 1 AS k
                     FROM memory_embeddings WHERE bank_id = %s) e ON e.k = u.k""",
            (n_src, BANK))
        conn.execute("INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention) "
                     "SELECT id, %s, 'big', 'Heavy' FROM memory_units WHERE bank_id = 'big'",
                     (eid,))
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
    scope = CallerScope("big")
    out: dict = {"units": units}
    cases = [("warm_no_entity", None, False), ("warm_heavy_entity", None, True),
             ("warm_heavy_entity_before_0016",
              "CREATE INDEX unit_entities_entity ON unit_entities (entity_id)", True),
             ("exact_dense", None, None)]
    for name, ddl, named in cases:
        ts = []
        with pool.connection() as conn, conn.transaction(force_rollback=True):
            if ddl:
                conn.execute(ddl)
                conn.execute("ANALYZE unit_entities")
            for i in range(runs):
                qv = qvecs[i % len(qvecs)]
                pq = PreparedQuery(RecallQuery(query="Heavy"), vector=qv, model=MODEL)
                if named:
                    pq.entities = [{"id": eid, "name": "Heavy", "matched": "heavy"}]
                t = time.perf_counter()
                if named is None:
                    dense_candidates(conn, scope, qv, model=MODEL, limit=10, floor=-1.0)
                else:
                    warm_lookup(conn, scope, pq, threshold=-1.0, limit=10)
                ts.append((time.perf_counter() - t) * 1000)
        out[name] = {"p50": pct(ts, 50), "p95": pct(ts, 95)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "warm"))
    ap.add_argument("--port", type=int, default=55433)
    ap.add_argument("--source-url", default="postgresql://rcll@127.0.0.1:54329/rcll")
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shortlists", default="100,200,400")
    ap.add_argument("--per-entity", default="0,50,100",
                    help="drawer sizes (most recent mentions per matched entity; 0 = off)")
    ap.add_argument("--stop", action="store_true")
    args = ap.parse_args()
    shortlists = [int(x) for x in args.shortlists.split(",")]
    drawers = [int(x) for x in args.per_entity.split(",")]
    combos = [(k, d) for d in drawers for k in shortlists]
    s = scratch_database(Path(args.state_dir), args.port, "warm_bench")

    items, vecs, origin = source_units(args.source_url, Path(args.data))
    ds = load_locomo(args.data)
    step = max(1, len(ds.questions) // args.questions)
    questions = [q.query for q in ds.questions[::step]][: args.questions]
    qvecs = embed(questions)
    pool = make_pool(s.db_url, max_size=2, name="bench")
    pool.open(wait=True)
    t = time.perf_counter()
    with pool.connection() as conn:
        bank = load(conn, items, vecs)
    bank["load_s"] = round(time.perf_counter() - t, 1)
    with psycopg.connect(s.db_url, autocommit=True) as c:
        c.execute("VACUUM ANALYZE")
    scope = CallerScope(BANK)
    with pool.connection() as conn:
        ents = [match_entities(conn, BANK, q) for q in questions]
        id_of = {r["id"]: i for i, r in enumerate(conn.execute(
            "SELECT unit_id::text AS id FROM memory_embeddings ORDER BY unit_id").fetchall())}
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT unit_id FROM memory_embeddings "
            f"WHERE bank_id = %s AND model = %s ORDER BY lsh <~> {lsh.FUNCTION}(%s::vector) "
            "LIMIT 400", (BANK, MODEL, qvecs[0])).fetchall()
    X = np.zeros((len(id_of), vecs.shape[1]), np.float32)
    with pool.connection() as conn:
        for r in conn.execute("SELECT unit_id::text AS id, embedding FROM memory_embeddings"):
            X[id_of[r["id"]]] = r["embedding"].to_numpy()

    variants = ["exact_dense"] + [f"warm_s{k}_e{d}" for k, d in combos]
    ms: dict[str, list[float]] = {v: [] for v in variants}
    recall: dict[str, list[float]] = {v: [] for v in variants[1:]}
    via_entity: dict[str, list[int]] = {v: [] for v in variants[1:]}
    exact_idx: list[list[int]] = []
    for rnd in range(args.rounds):
        for qi, (q, qv) in enumerate(zip(questions, qvecs, strict=True)):
            pq = PreparedQuery(RecallQuery(query=q), vector=qv, model=MODEL)
            pq.entities = ents[qi]
            with pool.connection() as conn, conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                t = time.perf_counter()
                exact = [c.unit_id for c in dense_candidates(conn, scope, qv, model=MODEL,
                                                             limit=10, floor=-1.0)]
                ms["exact_dense"].append((time.perf_counter() - t) * 1000)
                if rnd == 0:
                    exact_idx.append([id_of[u] for u in exact])
                for k, d in combos:
                    name = f"warm_s{k}_e{d}"
                    t = time.perf_counter()
                    hits = warm_lookup(conn, scope, pq, threshold=-1.0, limit=10, shortlist=k,
                                       per_entity=d)
                    ms[name].append((time.perf_counter() - t) * 1000)
                    if rnd == 0:
                        recall[name].append(len(set(exact) & {h.unit_id for h in hits}) / 10)
                        via_entity[name].append(sum(h.via == "entity" for h in hits))
    big = big_bank(pool, s.db_url, qvecs)
    out = {
        "bank": {**bank, "source": origin, "questions": len(questions), "rounds": args.rounds,
                 "signature_bits": lsh.BITS, "signature_dims": lsh.DIMS,
                 "questions_with_entities": sum(bool(e) for e in ents)},
        "ms": {v: {"p50": pct(x, 50), "p95": pct(x, 95)} for v, x in ms.items()},
        "recall@10_vs_exact": {v: round(float(np.mean(x)), 3) for v, x in recall.items()},
        "mean_hits_via_entity": {v: round(float(np.mean(x)), 2) for v, x in via_entity.items()},
        "offline_signature_sweep": offline_sweep(X, qvecs, exact_idx, shortlists),
        "big_bank": big,
        "shortlist_plan": [r["QUERY PLAN"] for r in plan],
    }
    print(json.dumps(out, indent=2))
    (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "results" / "warm_tier.json").write_text(json.dumps(out, indent=2) + "\n")
    pool.close()
    if args.stop:
        postgres.stop(s, log=lambda *_: None)


if __name__ == "__main__":
    main()
