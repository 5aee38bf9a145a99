"""Micro-benchmarks of issue 6's link stage, dedup scan and recall's entity query.

    cd <checkout> && HF_HUB_OFFLINE=1 /path/to/venv/python benchmarks/link_stage.py

Starts its own PostgreSQL (rcll.dev.postgres; ``--state-dir``, ``--port``), loads LoCoMo
turns (one unit per turn, real all-MiniLM-L6-v2 vectors, cached in the state dir) and prints:

- the ``link`` stage alone (:func:`rcll.retain.link_stage.run_link`, as the worker runs it:
  one job holding the bank's units, batches of 128) in units/s, on a one-conversation bank
  (conv-41, 663 turns; exact scan) and on all of LoCoMo in one bank (5,882 turns; exact, then
  through the bank's own HNSW index as ``maintenance.vector_indexes`` would build it), beside
  the 99.4 units/s of chunk-mode ingest (docs/decisions/0001-evaluation-history.md) as a share of its time;
- one dedup scan (500 newest units) on the conv-41 bank;
- recall p50 on the conv-41 bank (two entities per unit) without and with the entities of
  recall results (rcll.search.recall._entities), query vectors precomputed, each query
  run without then with, five rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"  # beside the checkout
sys.path.insert(0, str(ROOT))

from rcll.db import make_pool  # noqa: E402
from rcll.dev import postgres  # noqa: E402
from rcll.dev.scratch import scratch_database  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.models.embedder import input_stamp  # noqa: E402
from rcll.models.tokenizer import TokenCounter  # noqa: E402
from rcll.retain import link_stage  # noqa: E402
from rcll.retain.pipeline import RetainContext  # noqa: E402
from rcll.search import recall as recall_mod  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402
from rcll.store import dedup, links, vector_index  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
CHUNK_MODE_UNITS_PER_S = 99.4  # docs/decisions/0001-evaluation-history.md: chunk-mode ingest of LoCoMo after issue 5


class _Emb:
    model_name = stamp = MODEL

    def __init__(self, table: dict[str, np.ndarray] | None = None):
        self.table = table or {}

    def embed(self, texts, token_counts=None):
        return np.stack([self.table[t] for t in texts])


class _Handle:
    def __init__(self, emb):
        self.emb, self.error, self.model_name, self.stamp = emb, None, MODEL, MODEL

    def get(self):
        return self.emb


def vectors(state: Path, texts: list[str]) -> np.ndarray:
    cache = state / "locomo_minilm.npy"
    if cache.exists():
        v = np.load(cache)
        if len(v) == len(texts):
            return v
    from rcll.models.embedder import SentenceTransformerEmbedder
    t = time.perf_counter()
    v = SentenceTransformerEmbedder(MODEL, batch_size=64).embed(texts).astype(np.float32)
    print(f"embedded {len(texts)} turns in {time.perf_counter() - t:.0f} s")
    np.save(cache, v)
    return v


def load_bank(conn, bank: str, texts: list[str], vecs: np.ndarray) -> str:
    """The bank's units (one job, created in order) and their vectors; returns the job id."""
    conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (bank, bank))
    job = conn.execute("""INSERT INTO jobs (bank_id, kind, state, stage) VALUES
                          (%s, 'retain', 'running', 'link') RETURNING id""", (bank,)).fetchone()["id"]
    stamp = input_stamp(MODEL)
    with conn.cursor() as cur:
        ids = [r["id"] for r in cur.execute(
            """INSERT INTO memory_units (bank_id, job_id, text, created_at)
               SELECT %s, %s, t, now() + make_interval(secs => o)
               FROM unnest(%s::text[]) WITH ORDINALITY AS x(t, o) RETURNING id""",
            (bank, job, texts)).fetchall()]
        cur.executemany("""INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp,
                           embedding) VALUES (%s, %s, %s, %s, %s)""",
                        [(i, bank, MODEL, stamp, v) for i, v in zip(ids, vecs, strict=True)])
    return str(job)


def link_set(pool, bank: str) -> set[tuple[str, str]]:
    with pool.connection() as conn:
        return {(str(r["from_unit"]), str(r["to_unit"])) for r in conn.execute(
            "SELECT from_unit, to_unit FROM memory_links WHERE bank_id = %s", (bank,))}


def time_link(pool, ctx: RetainContext, bank: str, job: str) -> dict:
    with pool.connection() as conn:
        conn.execute("DELETE FROM memory_links WHERE bank_id = %s", (bank,))
        n = conn.execute("SELECT count(*) AS n FROM memory_units WHERE bank_id = %s",
                         (bank,)).fetchone()["n"]
    t = time.perf_counter()
    counts = link_stage.run_link(ctx, job)
    dt = time.perf_counter() - t
    ups = n / dt
    return {"units": n, "seconds": round(dt, 2), "units_per_s": round(ups, 1),
            "links": counts["semantic_links"],
            "share_of_chunk_mode_ingest": round(CHUNK_MODE_UNITS_PER_S / ups, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "links"))
    ap.add_argument("--port", type=int, default=55441)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--stop", action="store_true")
    args = ap.parse_args()
    state = Path(args.state_dir)
    s = scratch_database(state, args.port, "links_bench")

    ds = load_locomo(args.data)
    conv = "eval-locomo-conv-41"
    texts = [it["content"] for items in ds.banks.values() for it in items]
    vecs = vectors(state, texts)
    by_text = dict(zip(texts, vecs, strict=True))
    conv_texts = [it["content"] for it in ds.banks[conv]]
    pool = make_pool(s.db_url, max_size=4, name="bench")
    pool.open(wait=True)
    with pool.connection() as conn:
        jobs = {"conv": load_bank(conn, "conv", conv_texts, np.stack([by_text[t] for t in conv_texts])),
                "all": load_bank(conn, "all", texts, vecs)}
        conn.execute("ANALYZE")
    ctx = RetainContext(pool=pool, classifier=None, tokens=None, embedder=_Handle(_Emb()),
                        semantic_link_top_k=5, semantic_link_min_cosine=0.60)
    out: dict = {}
    out["link_conv41_exact_memory"] = time_link(pool, ctx, "conv", jobs["conv"])
    out["link_all_locomo_exact_memory"] = time_link(pool, ctx, "all", jobs["all"])
    exact = link_set(pool, "all")
    link_stage.EXACT_MAX_VECTORS = 0  # force the SQL path
    out["link_conv41_sql_exact_scan"] = time_link(pool, ctx, "conv", jobs["conv"])
    vector_index.ensure_bank_indexes(s.db_url, min_units=5_000, log_fn=lambda *_: None)
    for ef in (40, 100, 200):
        links.LINK_EF_SEARCH = ef
        key = f"link_all_locomo_sql_hnsw_ef{ef}"
        out[key] = time_link(pool, ctx, "all", jobs["all"])
        hnsw = link_set(pool, "all")  # links found through the graph that exact search finds too
        out[key]["links_also_exact"] = round(len(hnsw & exact) / max(len(exact), 1), 4)
    links.LINK_EF_SEARCH = 40
    link_stage.EXACT_MAX_VECTORS = 20_000
    # a small job (one unit, as one retained turn) into the full bank: SQL through its index
    with pool.connection() as conn:
        conn.execute("UPDATE memory_units SET job_id = NULL WHERE bank_id = 'all'")
        one = conn.execute("INSERT INTO jobs (bank_id, kind, state, stage) VALUES ('all', "
                           "'retain', 'running', 'link') RETURNING id").fetchone()["id"]
        conn.execute("UPDATE memory_units SET job_id = %s WHERE id = (SELECT id FROM memory_units "
                     "WHERE bank_id = 'all' ORDER BY created_at DESC LIMIT 1)", (one,))
    t = time.perf_counter()
    for _ in range(10):
        link_stage.run_link(ctx, str(one))
    out["link_one_unit_job_into_5882_ms"] = round((time.perf_counter() - t) * 100, 1)

    with pool.connection() as conn, conn.transaction():
        t = time.perf_counter()
        scan = dedup.scan(conn, "conv", model=MODEL, window=500, min_cosine=0.80)
        out["dedup_scan_conv41"] = {**scan, "seconds": round(time.perf_counter() - t, 3)}

    # recall p50 without / with the entity query (two entities per unit: both speakers)
    with pool.connection() as conn:
        speakers = sorted({t.split(":", 1)[0] for t in conv_texts})
        ents = {n: conn.execute("INSERT INTO entities (bank_id, name, normalized) VALUES "
                                "('conv', %s, lower(%s)) RETURNING id", (n, n)).fetchone()["id"]
                for n in speakers}
        for n, eid in ents.items():
            conn.execute("""INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention)
                            SELECT id, %s, 'conv', %s FROM memory_units WHERE bank_id = 'conv'""",
                         (eid, n))
        conn.execute("ANALYZE")
    queries = [q.query for q in ds.questions if q.bank_id == conv][:40]
    qemb = query_vectors(state, queries)
    rctx = recall_mod.RecallContext(pool=pool, embedder=_Handle(_Emb(qemb)),
                                    tokens=TokenCounter(MODEL))
    real = recall_mod._entities
    times: dict[str, list[float]] = {"without_entities": [], "with_entities": []}
    n_ents = []
    for q in queries[:3]:
        recall_mod.recall(rctx, "conv", RecallQuery(query=q))  # warm
    for _ in range(5):  # each query twice in a row, without then with: pairs share the load
        for q in queries:
            for key in times:
                recall_mod._entities = real if key == "with_entities" else (lambda conn, ids: {})
                t = time.perf_counter()
                res = recall_mod.recall(rctx, "conv", RecallQuery(query=q))
                times[key].append((time.perf_counter() - t) * 1000)
                if key == "with_entities":
                    n_ents.append(sum(len(r["entities"]) for r in res.results))
    recall_mod._entities = real
    out["recall_p50_ms"] = {k: round(statistics.median(v), 2) for k, v in times.items()}
    out["recall_entities_per_answer"] = round(statistics.mean(n_ents), 1)
    print(json.dumps(out, indent=2))
    (ROOT / "benchmarks" / "results" / "link_stage.json").write_text(json.dumps(out, indent=2) + "\n")
    pool.close()
    if args.stop:
        postgres.stop(s, log=lambda *_: None)


def query_vectors(state: Path, queries: list[str]) -> dict[str, np.ndarray]:
    cache = state / "locomo_conv41_queries.json"
    if cache.exists():
        data = json.loads(cache.read_text())
        if data["queries"] == queries:
            return {q: np.array(v, dtype=np.float32) for q, v in zip(queries, data["vectors"], strict=True)}
    from rcll.models.embedder import SentenceTransformerEmbedder
    v = SentenceTransformerEmbedder(MODEL).embed(queries).astype(np.float32)
    cache.write_text(json.dumps({"queries": queries, "vectors": v.tolist()}))
    return dict(zip(queries, v, strict=True))


if __name__ == "__main__":
    main()
