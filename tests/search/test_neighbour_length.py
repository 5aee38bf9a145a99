"""The stored neighbour length (migration 0018) the lexical channel's context field reads:
equal to the sum over the links after retain; marked stale by the triggers on edits,
audience changes, new links and deletes, refreshed by the drain without waiting for locks;
NULL where visibility depends on the caller; ranking exactly as the query-time sum did."""

import psycopg
import pytest
from alembic import command

from rcll.dev import postgres
from rcll.search import lexical
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope
from rcll.store import migrate, neighbour_length, unit_edits

TS = "2023-05-08T13:56:00Z"
TURNS = [
    "Ana: Did you go to the pride parade downtown?",
    "Ben: Yes, I went last Tuesday with my sister, it was amazing and very loud!",
    "Ana: I love that. What else is new?",
    "Ben: I started pottery classes, my first bowl cracked in the kiln.",
    "Ana: Pottery is hard, keep at it.",
    "Ben: The weather was lovely all week at the parade and after.",
]

LIVE = """SELECT u.id, (SELECT coalesce(sum(l.weight * o.tsv_len), 0) FROM (
              SELECT to_unit AS nb, weight FROM memory_links
              WHERE from_unit = u.id AND type = 'temporal'
              UNION ALL
              SELECT from_unit, weight FROM memory_links
              WHERE to_unit = u.id AND type = 'temporal') l
          JOIN memory_units o ON o.id = l.nb) AS live,
          CASE WHEN EXISTS (SELECT 1 FROM nb_len_stale s WHERE s.unit_id = u.id)
               THEN 'stale' ELSE u.nb_len::text END AS nb_len
          FROM memory_units u WHERE u.bank_id = %s"""


def _retain(client, bank, turns=TURNS, prefix="t"):
    items = [{"content": t, "timestamp": TS, "context": "session 1",
              "document_id": f"{prefix}{i}"} for i, t in enumerate(turns)]
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200, r.get_json()


def _lengths(conn, bank):
    """``{unit_id: (live sum, stored)}``; stored is a float, None (visibility depends on the
    caller) or ``"stale"`` (marked, not refreshed yet)."""
    def stored(v):
        return v if v in (None, "stale") else float(v)
    return {str(r["id"]): (r["live"], stored(r["nb_len"]))
            for r in conn.execute(LIVE, (bank,))}


def _ids(conn, bank):
    return {r["document_id"]: str(r["id"]) for r in conn.execute(
        "SELECT d.document_id, u.id FROM memory_units u JOIN documents d "
        "ON d.id = u.document_id WHERE u.bank_id = %s", (bank,)).fetchall()}


def test_stored_length_equals_the_sum_over_links_after_retain(client, worker, services):
    _retain(client, "nbl1")
    with services.pool.connection() as conn:
        lengths = _lengths(conn, "nbl1")
        links = conn.execute("SELECT count(*) AS n FROM memory_links WHERE bank_id = 'nbl1' "
                             "AND type = 'temporal'").fetchone()["n"]
    assert links >= 5  # a conversation: every turn linked to the ones before it
    assert all(live > 0 for live, _ in lengths.values())
    assert {uid: pytest.approx(live) for uid, (live, _) in lengths.items()} == \
        {uid: stored for uid, (_, stored) in lengths.items()}


def _neighbours(conn, uid):
    return {str(r["nb"]) for r in conn.execute(
        "SELECT to_unit AS nb FROM memory_links WHERE from_unit = %s AND type = 'temporal' "
        "UNION SELECT from_unit FROM memory_links WHERE to_unit = %s AND type = 'temporal'",
        (uid, uid))}


def test_writes_mark_stale_and_the_drain_refreshes(client, worker, services):
    _retain(client, "nbl2")
    with services.pool.connection() as conn:
        ids = _ids(conn, "nbl2")
        before = _lengths(conn, "nbl2")
        assert "stale" not in {v for _, v in before.values()}  # the stage drained them
        row = conn.execute("SELECT * FROM memory_units WHERE id = %s", (ids["t1"],)).fetchone()
        assert unit_edits.update(conn, ids["t1"], row["revision"],
                                 {"text": row["text"] + " We also saw the fireworks, the "
                                                        "floats, the bands and the dancers."},
                                 token_count=40) is not None
        nbs = _neighbours(conn, ids["t1"])
        marked = _lengths(conn, "nbl2")
        # the edit marked t1 and its neighbours, and touched no other unit's row
        assert nbs and {u for u, (_, v) in marked.items() if v == "stale"} == nbs | {ids["t1"]}
        assert neighbour_length.drain(conn) >= len(nbs) + 1
        edited = _lengths(conn, "nbl2")
        # t1 got longer: every unit linked to it has a longer neighbour length, others not
        assert all(edited[u][1] > before[u][1] for u in nbs)
        assert all(edited[u][1] == before[u][1] for u in edited if u not in nbs)
        assert all(edited[u][1] == pytest.approx(edited[u][0]) for u in edited)
        # another audience on t2: its neighbours' visibility now depends on the caller
        conn.execute("UPDATE memory_units SET audience = 'alice' WHERE id = %s", (ids["t2"],))
        neighbour_length.drain(conn)
        mixed = _lengths(conn, "nbl2")
        t2_nbs = _neighbours(conn, ids["t2"])
        assert mixed[ids["t2"]][1] is None and all(mixed[u][1] is None for u in t2_nbs)
        conn.execute("UPDATE memory_units SET audience = 'bank' WHERE id = %s", (ids["t2"],))
        neighbour_length.drain(conn)
        assert _lengths(conn, "nbl2") == edited
        # deleting a unit (its links cascade) shortens its neighbours
        conn.execute("DELETE FROM memory_units WHERE id = %s", (ids["t5"],))
        assert _lengths(conn, "nbl2")[ids["t4"]][1] == "stale"
        neighbour_length.drain(conn)
        after = _lengths(conn, "nbl2")
        assert all(after[u][1] == pytest.approx(after[u][0]) for u in after)
        assert after[ids["t4"]][1] < edited[ids["t4"]][1]
        left = conn.execute("SELECT count(*) AS n FROM nb_len_stale").fetchone()["n"]
    assert left == 0  # the deleted unit's own mark went with the drain too


def test_the_drain_skips_units_another_transaction_holds(client, worker, services):
    """A writer holding a unit's row (an edit in progress) never waits on the drain, and
    the drain never waits on it: that unit stays stale and is refreshed by a later drain."""
    _retain(client, "nbl5")
    with services.pool.connection() as a, services.pool.connection() as b:
        ids = _ids(a, "nbl5")
        a.execute("UPDATE memory_units SET text = text || ' and the kiln' WHERE id = %s",
                  (ids["t3"],))
        a.commit()
        held = sorted(_neighbours(b, ids["t3"]))[0]
        b.execute("SELECT 1 FROM memory_units WHERE id = %s FOR UPDATE", (held,))
        a.execute("SET LOCAL lock_timeout = '2s'")
        neighbour_length.drain(a)  # would time out if it waited for b
        a.commit()
        assert _lengths(a, "nbl5")[held][1] == "stale"
        b.rollback()
        neighbour_length.drain(a)
        a.commit()
        lengths = _lengths(a, "nbl5")
    assert all(stored == pytest.approx(live) for live, stored in lengths.values())


def _tie_groups(candidates, rel=1e-6):
    """The ranking as a list of sets of unit ids, units whose scores are equal within
    ``rel`` (relative) in one set."""
    groups: list[tuple[float, set[str]]] = []
    for c in candidates:
        if groups and c.score == pytest.approx(groups[-1][0], rel=rel):
            groups[-1][1].add(c.unit_id)
        else:
            groups.append((c.score, {c.unit_id}))
    return [ids for _, ids in groups]


def test_tie_groups_tell_a_swap_of_equal_scores_from_a_reordering():
    class C:
        def __init__(self, unit_id, score):
            self.unit_id, self.score = unit_id, score
    a = [C("x", 2.0), C("y", 1.0), C("z", 1.0 + 1e-9)]
    assert _tie_groups(a) == _tie_groups([a[0], a[2], a[1]]) == [{"x"}, {"y", "z"}]
    assert _tie_groups(a) != _tie_groups([C("y", 2.0), C("x", 1.0), C("z", 1.0)])


def test_stored_and_query_time_lengths_rank_alike(client, worker, services, monkeypatch):
    _retain(client, "nbl3")
    _retain(client, "nbl3", turns=[t.replace("Ana", "Cleo") + " (again)" for t in TURNS],
            prefix="s")
    with services.pool.connection() as conn:
        conn.execute("UPDATE memory_units SET audience = 'alice' WHERE id = %s",
                     (_ids(conn, "nbl3")["t3"],))  # one neighbour the caller cannot see
        neighbour_length.drain(conn)
        scopes = [CallerScope.for_query("nbl3", RecallQuery(query="q"), None),
                  CallerScope(bank_id="nbl3", all_audiences=False, member_id="bob")]
        for query in ("parade", "pottery bowl kiln", "weather week"):
            for scope in scopes:
                stored, _ = lexical.lexical_candidates(conn, scope, query, limit=20,
                                                       df_cutoff=0.15, context_weight=0.5)
                monkeypatch.setattr(lexical, "NEIGHBOUR_LEN", "NULL::real")
                live, _ = lexical.lexical_candidates(conn, scope, query, limit=20,
                                                     df_cutoff=0.15, context_weight=0.5)
                monkeypatch.undo()
                assert stored, query
                # the same units in the same order, up to ties: the stored length is a
                # float4, the query-time sum a float8, so two units whose scores are equal
                # (a turn and its copy) may swap on the last bits
                assert _tie_groups(stored) == _tie_groups(live), query
                assert [c.score for c in stored] == pytest.approx([c.score for c in live])


def test_migration_0018_fills_existing_units(settings):
    db = "rcll_mig18"
    postgres.create_database(settings, db, drop=True)
    url = f"postgresql://rcll@127.0.0.1:{settings.pg_port}/{db}"
    migrate.upgrade(settings, url, "0017")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('m', 'm')")
        a, b, c = (conn.execute("INSERT INTO memory_units (bank_id, text) VALUES ('m', %s) "
                                "RETURNING id, tsv_len", (t,)).fetchone()
                   for t in ("one two three", "four five", "six"))
        conn.execute("INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight) "
                     "VALUES (%s, %s, 'm', 'temporal', 0.5), (%s, %s, 'm', 'temporal', 1.0)",
                     (b[0], a[0], c[0], b[0]))
    migrate.upgrade(settings, url, "0018")
    with psycopg.connect(url, autocommit=True) as conn:
        got = dict(conn.execute("SELECT id, nb_len FROM memory_units").fetchall())
    command.downgrade(migrate.alembic_config(url), "0017")
    with psycopg.connect(url, autocommit=True) as conn:
        cols = conn.execute("SELECT count(*) FROM information_schema.columns WHERE "
                            "table_name = 'memory_units' AND column_name = 'nb_len'").fetchone()
    assert (a[1], b[1], c[1]) == (3, 2, 1)
    assert got == {a[0]: 0.5 * 2, b[0]: 0.5 * 3 + 1.0 * 1, c[0]: 1.0 * 2}
    assert cols[0] == 0


def test_concurrent_retains_into_one_conversation_keep_it_exact(app, worker, services):
    """Four retains at once into one bank, their turns interleaved in time, so each links to
    turns the others write: every stored length still equals the sum over its links."""
    import threading

    errors: list = []

    def retain(k):
        items = [{"content": f"Speaker{k}: turn {i} about topic {k * 10 + i} and the parade",
                  "timestamp": f"2023-05-08T13:{i:02d}:{k * 10:02d}Z",
                  "context": "session 1", "document_id": f"c{k}-{i}"} for i in range(12)]
        r = app.test_client().post("/v1/default/banks/nbl4/memories",
                                   json={"items": items, "async": False})
        if r.status_code != 200:
            errors.append(r.get_json())

    threads = [threading.Thread(target=retain, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    neighbour_length.drain_all(services.pool)  # what a drain skipped while a batch held it
    with services.pool.connection() as conn:
        lengths = _lengths(conn, "nbl4")
        cross = conn.execute(
            """SELECT count(*) AS n FROM memory_links l
               JOIN memory_units a ON a.id = l.from_unit JOIN memory_units b ON b.id = l.to_unit
               WHERE l.bank_id = 'nbl4' AND l.type = 'temporal'
                 AND split_part(a.text, ':', 1) <> split_part(b.text, ':', 1)""").fetchone()["n"]
    assert len(lengths) == 48
    assert cross > 0  # the batches did link to each other's turns
    assert all(stored == pytest.approx(live) for live, stored in lengths.values())
