"""Tier 2 (warm): LSH signature column, entity drawer, LSH shortlist, cosine verification,
the caller scope — against real PostgreSQL + pgvector, real embedder, real retain pipeline."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from rcll.cascade import lsh
from rcll.cascade.warm import warm_lookup
from rcll.dev import postgres
from rcll.eval.datasets import load_locomo
from rcll.models.embedder import input_stamp
from rcll.search.channels import PreparedQuery
from rcll.search.models import RecallQuery
from rcll.search.query_prep import prepare_query
from rcll.search.recall import prepare
from rcll.search.scope import CallerScope
from rcll.store import migrate

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"

ITEMS = [
    {"content": "Caroline: I moved to Nashville last spring.", "document_id": "a",
     "room": "general"},
    {"content": "Melanie: the bars in Nashville play live music every night.", "document_id": "b",
     "room": "general"},
    {"content": "Caroline: the deploy of the billing service broke.", "document_id": "c",
     "room": "deployment"},
    {"content": "Caroline: archived notes from my first job in Nashville.", "document_id": "d",
     "room": "general", "layer": 3},
    {"content": "Dave: I repaired the old bicycle chain.", "document_id": "e",
     "room": "general"},
    {"content": "Dave: my bicycle needs new brakes before the race.", "document_id": "f",
     "room": "general"},
]


def _retain(client, bank: str, items=ITEMS) -> None:
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200, r.get_json()


def _lookup(services, bank: str, query: str, *, threshold: float = 0.0, limit: int = 50,
            entities: bool = True, **kw) -> tuple[list, PreparedQuery]:
    """warm_lookup as recall runs it: query embedded once, entities matched, READ ONLY."""
    rq = RecallQuery(query=query, **{k: kw.pop(k) for k in list(kw)
                                     if k in ("room", "hall", "max_layer", "include_archive",
                                              "include_superseded")})
    scope = CallerScope.for_query(bank, rq, None)
    pq = prepare(services.recall_context(), rq, True)
    with services.pool.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        prepare_query(conn, scope, pq, time_window=False, entities=entities)
        return warm_lookup(conn, scope, pq, threshold=threshold, limit=limit, **kw), pq


def _texts(services, hits) -> list[str]:
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT id::text AS id, text FROM memory_units WHERE id = ANY(%s::uuid[])",
                            ([h.unit_id for h in hits],)).fetchall()
    by = {r["id"]: r["text"] for r in rows}
    return [by[h.unit_id] for h in hits]


def _hamming(a: str, b: str) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def test_new_rows_get_the_signature_postgres_computes(client, worker, services):
    _retain(client, "warm-sig")
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT embedding, lsh::text AS lsh FROM memory_embeddings "
                            "WHERE bank_id = 'warm-sig'").fetchall()
    assert len(rows) == len(ITEMS)
    for r in rows:
        assert len(r["lsh"]) == lsh.BITS
        # float rounding may flip a bit whose projection is ~0; none did here
        assert _hamming(r["lsh"], lsh.signature(r["embedding"])) <= 1
    assert len({r["lsh"] for r in rows}) == len(rows)


def test_migration_fills_existing_rows(settings):
    """Rows written before migration 0016 get their signature from its table rewrite."""
    name = "rcll_warm_migrate"
    postgres.create_database(settings, name, drop=True)
    url = settings.db_url.rsplit("/", 1)[0] + "/" + name
    migrate.upgrade(settings, url, "0014")
    vecs = np.random.default_rng(7).normal(size=(5, settings.embedding_dim)).astype(np.float32)
    with psycopg.connect(url, row_factory=dict_row) as conn:
        register_vector(conn)
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('old', 'old')")
        for v in vecs:
            uid = conn.execute("INSERT INTO memory_units (bank_id, text) VALUES ('old', 'x') "
                               "RETURNING id").fetchone()["id"]
            conn.execute("INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, "
                         "embedding) VALUES (%s, 'old', 'm', 's', %s)", (uid, v))
    migrate.upgrade(settings, url)
    with psycopg.connect(url, row_factory=dict_row) as conn:
        register_vector(conn)
        rows = conn.execute("SELECT embedding, lsh::text AS lsh FROM memory_embeddings").fetchall()
        assert conn.execute("SELECT count(*) AS n FROM pg_indexes "
                            "WHERE indexname = 'memory_embeddings_bank_lsh'").fetchone()["n"] == 1
    assert len(rows) == 5
    for r in rows:
        assert r["lsh"] is not None
        assert _hamming(r["lsh"], lsh.signature(r["embedding"])) <= 1


def test_entity_drawer_narrows_and_lsh_shortlists(client, worker, services):
    _retain(client, "warm-ent")
    # shortlist of 1: only the drawer can bring the Caroline units
    hits, pq = _lookup(services, "warm-ent", "What did Caroline say about work?", shortlist=1)
    assert [e["name"] for e in pq.entities] == ["Caroline"]
    by_via = {}
    for h in hits:
        by_via.setdefault(h.via, []).append(h)
    texts = _texts(services, by_via["entity"])
    # the two live Caroline units of layers 0-2 (the layer-3 one is out of scope)
    assert sorted(t.split(":")[0] for t in texts) == ["Caroline", "Caroline"]
    assert len(by_via.get("lsh", [])) <= 1
    # best first, verified by the full cosine
    sims = [h.similarity for h in hits]
    assert sims == sorted(sims, reverse=True)
    with services.pool.connection() as conn:
        exact = {r["id"]: r["sim"] for r in conn.execute(
            "SELECT unit_id::text AS id, 1 - (embedding <=> %s) AS sim FROM memory_embeddings "
            "WHERE bank_id = 'warm-ent'", (pq.vector,)).fetchall()}
    for h in hits:
        assert h.similarity == pytest.approx(exact[h.unit_id], abs=1e-6)
        assert h.activation is None
    # drawer off: the shortlist of 1 alone
    hits, _ = _lookup(services, "warm-ent", "What did Caroline say about work?", shortlist=1,
                      per_entity=0)
    assert len(hits) <= 1 and {h.via for h in hits} <= {"lsh"}
    # no entity named: the LSH shortlist alone, and the threshold holds
    hits, pq = _lookup(services, "warm-ent", "fixing a bike", threshold=0.3)
    assert pq.entities == [] and hits
    assert {h.via for h in hits} == {"lsh"}
    assert all(h.similarity >= 0.3 for h in hits)
    assert _texts(services, hits)[0].startswith("Dave:")
    hits, _ = _lookup(services, "warm-ent", "fixing a bike", threshold=0.99)
    assert hits == []
    hits, _ = _lookup(services, "warm-ent", "fixing a bike", limit=2)
    assert len(hits) == 2


def test_scope_filters_every_hit(client, worker, services):
    _retain(client, "warm-scope")
    _retain(client, "warm-scope-other",
            [{"content": "Caroline: Nashville again, from another bank.", "document_id": "z"}])
    q = "Caroline in Nashville"

    def texts(**kw):
        return _texts(services, _lookup(services, "warm-scope", q, **kw)[0])

    base = texts()
    assert "Caroline: Nashville again, from another bank." not in base
    assert not any("archived" in t for t in base)  # layer 3 needs max_layer=3
    assert any("archived" in t for t in texts(max_layer=3))
    assert texts(room="deployment") == ["Caroline: the deploy of the billing service broke."]
    with services.pool.connection() as conn:
        halls = {r["text"]: r["hall"] for r in conn.execute(
            "SELECT text, hall FROM memory_units WHERE bank_id = 'warm-scope'").fetchall()}
    some_hall = halls["Dave: I repaired the old bicycle chain."]
    got = texts(hall=some_hall)
    assert got and all(halls[t] == some_hall for t in got)
    # a lower layer cap
    with services.pool.connection() as conn:
        conn.execute("UPDATE memory_units SET layer = 1 WHERE bank_id = 'warm-scope' "
                     "AND text LIKE 'Dave:%%'")
    assert all(t.startswith("Dave:") for t in texts(max_layer=1))
    # tier 2 serves no history scope
    assert _lookup(services, "warm-scope", q, include_superseded=True)[0] == []
    # a bank that does not exist answers nothing
    assert _lookup(services, "warm-nobank", q)[0] == []


def test_superseded_invalidated_or_deleted_units_leave_at_once(client, worker, services):
    _retain(client, "warm-stale")
    q = "Caroline in Nashville"
    hits, _ = _lookup(services, "warm-stale", q)
    texts = _texts(services, hits)
    ids = {t: h.unit_id for t, h in zip(texts, hits, strict=True)}
    moved = ids["Caroline: I moved to Nashville last spring."]
    bars = ids["Melanie: the bars in Nashville play live music every night."]
    chain = ids["Dave: I repaired the old bicycle chain."]
    with services.pool.connection() as conn:
        conn.execute("UPDATE memory_units SET superseded_by_id = %s WHERE id = %s", (bars, moved))
        conn.execute("UPDATE memory_units SET invalidated_reason = 'document_replaced' "
                     "WHERE id = %s", (bars,))
        conn.execute("DELETE FROM memory_units WHERE id = %s", (chain,))
    after = {h.unit_id for h in _lookup(services, "warm-stale", q)[0]}
    assert after and not after & {moved, bars, chain}
    assert len(after) == len(hits) - 3


def test_only_vectors_of_the_query_model_count(client, worker, services):
    _retain(client, "warm-model")
    hits, pq = _lookup(services, "warm-model", "fixing a bike")
    with services.pool.connection() as conn:
        uid = conn.execute("INSERT INTO memory_units (bank_id, text) VALUES ('warm-model', "
                           "'only an old model vector') RETURNING id::text AS id").fetchone()["id"]
        # the query's own vector, stored under another model: cosine 1 if it counted
        conn.execute("INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, "
                     "embedding) VALUES (%s, 'warm-model', 'old-model', 's', %s)",
                     (uid, pq.vector))
        conn.execute("INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, "
                     "embedding) SELECT unit_id, bank_id, 'old-model', 's', embedding "
                     "FROM memory_embeddings WHERE bank_id = 'warm-model' AND model = %s "
                     "AND unit_id <> %s", (pq.model, uid))
    after, _ = _lookup(services, "warm-model", "fixing a bike")
    assert uid not in {h.unit_id for h in after}
    assert [(h.unit_id, round(h.similarity, 6)) for h in after] == \
        [(h.unit_id, round(h.similarity, 6)) for h in hits]


def test_needs_a_query_vector(services):
    pq = PreparedQuery(RecallQuery(query="anything"))
    with services.pool.connection() as conn:
        assert warm_lookup(conn, CallerScope("warm-sig"), pq, threshold=0.0, limit=5) == []


# ---- LSH recall on a realistic bank ------------------------------------------------------

RECALL_CONV = "conv-43"
RECALL_SHORTLIST = 100
RECALL_FLOOR = 0.80  # measured 0.875 (60 questions of conv-43, 680 units; seed-fixed planes)


def test_lsh_shortlist_recalls_the_exact_top10_on_a_locomo_bank(services):
    """One LoCoMo conversation (real MiniLM vectors of its turns and questions): recall of the
    exact cosine top-10 by warm_lookup with the drawer off and a shortlist of 100 units."""
    if not (LOCOMO / "locomo10_memories.jsonl").exists():
        pytest.skip(f"LoCoMo data not found at {LOCOMO}")
    ds = load_locomo(LOCOMO)
    texts = [i["content"] for i in ds.banks[f"eval-locomo-{RECALL_CONV}"]]
    queries = [q.query for q in ds.questions if q.bank_id == f"eval-locomo-{RECALL_CONV}"][:60]
    emb = services.embedder.get()
    vecs = emb.embed(texts + queries)
    uvecs, qvecs = vecs[:len(texts)], vecs[len(texts):]
    bank = "warm-locomo"
    with services.pool.connection() as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (bank, bank))
        ids = [str(uuid.uuid4()) for _ in texts]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO memory_units (id, bank_id, text) VALUES (%s, %s, %s)",
                            list(zip(ids, [bank] * len(ids), texts, strict=True)))
            cur.executemany("INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp,"
                            " embedding) VALUES (%s, %s, %s, %s, %s)",
                            [(i, bank, emb.stamp, input_stamp(emb.stamp), v)
                             for i, v in zip(ids, uvecs, strict=True)])
    scope = CallerScope(bank)
    recalls = []
    with services.pool.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        for qv in qvecs:
            exact = [r["id"] for r in conn.execute(
                "SELECT unit_id::text AS id FROM memory_embeddings WHERE bank_id = %s "
                "ORDER BY embedding <=> %s LIMIT 10", (bank, qv)).fetchall()]
            pq = PreparedQuery(RecallQuery(query="q"), vector=qv, model=emb.stamp)
            got = warm_lookup(conn, scope, pq, threshold=-1.0, limit=10,
                              shortlist=RECALL_SHORTLIST)
            recalls.append(len(set(exact) & {h.unit_id for h in got}) / 10)
    mean = float(np.mean(recalls))
    print(f"LSH recall@10, {len(texts)} units, shortlist {RECALL_SHORTLIST}: {mean:.3f}")
    assert mean >= RECALL_FLOOR


def test_warm_tier_never_writes(client, worker, settings):
    """No write SQL in the warm tier's modules, and it answers under the SELECT-only role."""
    import re

    from rcll.dev.postgres import READER_ROLE
    write_sql = re.compile(r"\b(insert\s+into|update\s+\w+\s+set|delete\s+from|truncate)\b", re.I)
    for name in ("warm.py", "lsh.py", "hits.py"):
        assert not write_sql.search((ROOT / "rcll" / "cascade" / name).read_text()), name
    _retain(client, "warm-ro")
    reader_url = f"postgresql://{READER_ROLE}@127.0.0.1:{settings.pg_port}/rcll_test"
    with psycopg.connect(reader_url, row_factory=dict_row) as conn:
        register_vector(conn)
        vec = conn.execute("SELECT embedding FROM memory_embeddings WHERE bank_id = 'warm-ro' "
                           "LIMIT 1").fetchone()["embedding"].to_numpy()
        model = conn.execute("SELECT model FROM memory_embeddings WHERE bank_id = 'warm-ro' "
                             "LIMIT 1").fetchone()["model"]
        conn.execute("SET TRANSACTION READ ONLY")
        pq = PreparedQuery(RecallQuery(query="q"), vector=vec, model=model)
        hits = warm_lookup(conn, CallerScope("warm-ro"), pq, threshold=0.99, limit=5)
    assert len(hits) == 1 and hits[0].similarity == pytest.approx(1.0, abs=1e-5)
