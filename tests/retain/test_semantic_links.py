"""The ``link`` stage: semantic links between near-duplicate units, none to unrelated ones;
a replay writes nothing twice; no embedder is a job warning (spec §4.5)."""

from rcll.models.embedder import EmbedderHandle
from rcll.retain import stages
from rcll.store import links
from tests.conftest import wait_job

ITEMS = [
    {"content": "Kim: the office moves to Berlin in May, right after the audit.", "document_id": "k1"},
    {"content": "Kim: our office is moving to Berlin in May, just after the audit.",
     "document_id": "k2"},
    {"content": "Zed: the pasta recipe needs two eggs, flour and a pinch of salt.",
     "document_id": "z1"},
]


def _links(services, bank: str) -> dict[tuple[str, str], float]:
    with services.pool.connection() as conn:
        rows = conn.execute(
            """SELECT df.document_id AS a, dt.document_id AS b, l.weight FROM memory_links l
               JOIN memory_units f ON f.id = l.from_unit JOIN documents df ON df.id = f.document_id
               JOIN memory_units t ON t.id = l.to_unit JOIN documents dt ON dt.id = t.document_id
               WHERE l.bank_id = %s AND l.type = 'semantic'""", (bank,)).fetchall()
    return {(r["a"], r["b"]): r["weight"] for r in rows}


def test_retain_through_the_worker_links_near_duplicates_only(client, services, worker):
    bank = "links-worker"
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS})
    assert r.status_code == 200  # Hindsight path: its client maps only 200
    op = wait_job(client, bank, r.get_json()["operation_id"])
    assert op["state"] == "succeeded", op
    found = _links(services, bank)
    assert set(found) == {("k1", "k2"), ("k2", "k1")}  # both new: each links to the other
    assert 0.8 < found[("k1", "k2")] == found[("k2", "k1")] <= 1.0
    assert op["counts"]["semantic_links"] == 2 and op["counts"]["units_linked"] == 3

    # a later unit links to the earlier ones; the earlier links stay as they were
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": "Zed: the pasta recipe needs 2 eggs, flour and some salt.", "document_id": "z2"}]})
    assert wait_job(client, bank, r.get_json()["operation_id"])["state"] == "succeeded"
    found2 = _links(services, bank)
    assert set(found2) - set(found) == {("z2", "z1")}
    assert all(found2[k] == v for k, v in found.items())


def test_replayed_link_stage_writes_nothing_twice(client, services):
    bank = "links-replay"
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS, "async": False})
    job_id = r.get_json()["operation_id"]
    before = _links(services, bank)
    assert len(before) == 2
    with services.pool.connection() as conn:  # as if the message were redelivered
        conn.execute("UPDATE jobs SET state = 'running', stage = 'link' WHERE id = %s", (job_id,))
    counts = stages.by_name("link").run(services.retain_context(), job_id)
    assert counts == {"semantic_links": 2, "units_linked": 3}
    assert _links(services, bank) == before
    with services.pool.connection() as conn, conn.transaction():
        ids = [str(x["id"]) for x in conn.execute(
            "SELECT id FROM memory_units WHERE bank_id = %s", (bank,)).fetchall()]
        assert links.write_semantic(conn, bank_id=bank, unit_ids=ids, model="all-MiniLM-L6-v2",
                                    top_k=5, min_cosine=0.6) == 0
    # the same items again: nothing new stored, so nothing new linked
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS, "async": False})
    assert _links(services, bank) == before


def test_link_floor_and_top_k_bound_the_links(services):
    """top_k caps the links per unit; a floor above every cosine writes none."""
    import numpy as np

    bank = "links-bounds"
    with services.pool.connection() as conn, conn.transaction():
        conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (bank, bank))
        base = np.zeros(384, dtype=np.float32)
        base[0] = 1.0
        ids = []
        for i in range(8):  # eight vectors all within cosine 0.99 of each other
            v = base.copy()
            v[1 + i] = 0.05
            v /= np.linalg.norm(v)
            uid = conn.execute("INSERT INTO memory_units (bank_id, text) VALUES (%s, %s) "
                               "RETURNING id", (bank, f"unit {i}")).fetchone()["id"]
            conn.execute("INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp, "
                         "embedding) VALUES (%s, %s, 'm', 's', %s::vector)",
                         (uid, bank, str(v.tolist())))
            ids.append(str(uid))
        assert links.write_semantic(conn, bank_id=bank, unit_ids=ids[:1], model="m", top_k=3,
                                    min_cosine=0.999) == 0
        assert links.write_semantic(conn, bank_id=bank, unit_ids=ids[:2], model="m", top_k=3,
                                    min_cosine=0.9) == 6
        per_unit = conn.execute(
            """SELECT from_unit, count(*) AS n FROM memory_links WHERE bank_id = %s
               GROUP BY 1""", (bank,)).fetchall()
        assert sorted(r["n"] for r in per_unit) == [3, 3]


def test_no_embedder_skips_the_stage_with_a_warning(client, services):
    bank = "links-noemb"
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS[:1], "async": False})
    job_id = r.get_json()["operation_id"]
    with services.pool.connection() as conn:
        conn.execute("UPDATE jobs SET state = 'running', stage = 'link' WHERE id = %s", (job_id,))
    ctx = services.retain_context()
    ctx.embedder = EmbedderHandle("all-MiniLM-L6-v2", enabled=False)
    counts = stages.by_name("link").run(ctx, job_id)
    assert len(counts["warnings"]) == 1
    assert counts["warnings"][0].startswith("semantic links skipped, embedder unavailable")


def test_sql_knn_path_writes_the_links_the_in_memory_path_writes(client, services, monkeypatch):
    """Banks above EXACT_MAX_VECTORS are linked by the SQL kNN; both searches are exact on a
    small bank, so they must write the same links with the same weights."""
    from rcll.retain import link_stage

    bank = "links-paths"
    items = [*ITEMS, {"content": "Zed: the pasta recipe needs 2 eggs, flour and some salt.",
                      "document_id": "z2"},
             {"content": "Kim: the Berlin office move happens in May after the audit.",
              "document_id": "k3"}]
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    job_id = r.get_json()["operation_id"]
    in_memory = _links(services, bank)
    assert len(in_memory) >= 6
    with services.pool.connection() as conn:
        conn.execute("DELETE FROM memory_links WHERE bank_id = %s", (bank,))
        conn.execute("UPDATE jobs SET state = 'running', stage = 'link' WHERE id = %s", (job_id,))
    monkeypatch.setattr(link_stage, "EXACT_MAX_VECTORS", 0)
    counts = stages.by_name("link").run(services.retain_context(), job_id)
    assert counts["semantic_links"] == len(in_memory)
    via_sql = _links(services, bank)
    assert set(via_sql) == set(in_memory)
    assert all(abs(via_sql[k] - in_memory[k]) < 1e-5 for k in in_memory)


def test_top_k_pairs_is_exact():
    import numpy as np

    from rcll.retain.link_stage import top_k_pairs

    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((50, 16)).astype(np.float32)
    ids = [f"u{i}" for i in range(50)]
    pairs = top_k_pairs(ids, vecs, [0, 7], top_k=3, min_cosine=-1.0)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    for src in (0, 7):
        sims = unit[src] @ unit.T
        sims[src] = -np.inf
        want = {ids[j] for j in np.argsort(-sims)[:3]}
        assert {t for s, t, _ in pairs if s == ids[src]} == want
    assert top_k_pairs(ids, vecs, [0], top_k=3, min_cosine=1.01) == []
