"""The entities stage end to end through the real worker: entities, mentions, links; replay."""

from rcll.retain import entity_stage
from tests.conftest import wait_job

ITEMS = [
    ("Caroline: I met Dana Lee in Room 101 about INC-4471.", "2024-03-01T10:00:00"),
    ("Melanie: Did Dana Lee fix INC-4471 before Friday?", "2024-03-01T10:05:00"),
    ("Caroline: Yes, and Room 102 is booked for the review with @oncall.", "2024-03-01T10:07:00"),
    ("Melanie: Great, Caroline! Send the notes to dana.lee@example.com please.", "2024-03-01T10:09:00"),
    ("Caroline: Next week I visit New York with Melanie.", "2024-03-09T09:00:00"),
]


def _table_counts(services, bank: str) -> dict:
    with services.pool.connection() as conn:
        return conn.execute(
            """SELECT (SELECT count(*) FROM entities WHERE bank_id = %(b)s) AS entities,
                      (SELECT count(*) FROM unit_entities WHERE bank_id = %(b)s) AS mentions,
                      (SELECT count(*) FROM memory_links WHERE bank_id = %(b)s
                         AND type = 'entity') AS entity_links,
                      (SELECT count(*) FROM memory_links WHERE bank_id = %(b)s
                         AND type = 'temporal') AS temporal_links,
                      (SELECT count(*) FROM entity_merge_proposals
                         WHERE bank_id = %(b)s) AS proposals""", {"b": bank}).fetchone()


def test_retain_stores_entities_mentions_and_links(client, worker, services):
    bank = "entities-stage"
    items = [{"content": c, "timestamp": t, "document_id": f"d{i}"}
             for i, (c, t) in enumerate(ITEMS)]
    op = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items}).get_json()
    done = wait_job(client, bank, op["operation_id"])
    assert done["state"] == "succeeded", done
    with services.pool.connection() as conn:
        names = {r["normalized"]: r["n"] for r in conn.execute(
            """SELECT e.normalized, count(ue.unit_id) AS n FROM entities e
               LEFT JOIN unit_entities ue ON ue.entity_id = e.id
               WHERE e.bank_id = %s GROUP BY 1""", (bank,))}
    assert names == {"caroline": 4, "melanie": 3, "dana lee": 2, "room 101": 1, "inc 4471": 2,
                     "room 102": 1, "@oncall": 1, "dana.lee@example.com": 1, "new york": 1}
    before = _table_counts(services, bank)
    assert before["mentions"] == 16 == done["counts"]["entity_mentions"]
    assert before["entities"] == 9 == done["counts"]["entities_created"]
    # Room 101 / Room 102 differ in a number: two entities, no proposal
    assert before["proposals"] == 0
    # the 4 turns of 1 March link to their predecessors (1 + 2 + 2); 9 March is a week later
    assert before["temporal_links"] == 5 == done["counts"]["temporal_links"]
    assert before["entity_links"] == done["counts"]["entity_links"] > 0

    # replay the stage (a redelivered message): nothing is written twice
    with services.pool.connection() as conn:
        conn.execute("UPDATE jobs SET state = 'running', stage = 'entities' WHERE id = %s",
                     (op["operation_id"],))
    again = entity_stage.run_entities(services.retain_context(), op["operation_id"])
    assert again["entity_mentions"] == 16 and again["entities_created"] == 9
    assert _table_counts(services, bank) == before


def test_entity_links_are_bounded_per_mention(client, worker, services):
    bank = "entities-bounded"
    items = [{"content": f"Caroline: note {i} about the garden.", "document_id": f"n{i}",
              "timestamp": f"2024-01-{i + 1:02d}T08:00:00"} for i in range(12)]
    op = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items}).get_json()
    assert wait_job(client, bank, op["operation_id"])["state"] == "succeeded"
    with services.pool.connection() as conn:
        per_unit = conn.execute(
            """SELECT max(n) AS most, sum(n) AS total FROM (SELECT from_unit, count(*) AS n
               FROM memory_links WHERE bank_id = %s AND type = 'entity' GROUP BY 1) t""",
            (bank,)).fetchone()
    # 12 units mention Caroline: unit k links to min(k, 5) earlier ones
    assert per_unit["most"] == entity_stage.ENTITY_LINKS_PER_MENTION
    assert per_unit["total"] == sum(min(k, 5) for k in range(12))


def test_names_of_one_batch_resolve_against_each_other(client, worker, services):
    bank = "entities-batch"
    items = [{"content": "Lena: the Kubernetes Clusters are upgraded.", "document_id": "k1"},
             {"content": "Lena: one Kubernetes Cluster still lags, ask Caroline Smith.",
              "document_id": "k2"},
             {"content": "Omar: I think Caroline knows.", "document_id": "k3"}]
    op = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items}).get_json()
    assert wait_job(client, bank, op["operation_id"])["state"] == "succeeded"
    with services.pool.connection() as conn:
        rows = {r["normalized"]: r["aliases"] for r in conn.execute(
            "SELECT normalized, aliases FROM entities WHERE bank_id = %s", (bank,))}
        props = conn.execute(
            """SELECT a.normalized AS a, b.normalized AS b FROM entity_merge_proposals p
               JOIN entities a ON a.id = p.entity_a JOIN entities b ON b.id = p.entity_b
               WHERE p.bank_id = %s""", (bank,)).fetchall()
    assert rows == {"lena": [], "kubernetes clusters": ["kubernetes cluster"],
                    "caroline smith": [], "omar": [], "caroline": []}
    assert [{p["a"], p["b"]} for p in props] == [{"caroline", "caroline smith"}]


def test_a_certain_fuzzy_match_becomes_an_alias_with_history(client, worker, services):
    bank = "entities-alias"
    for n, content in enumerate(["Lena: the Kubernetes Cluster is up.",
                                 "Lena: both Kubernetes Clusters are up."]):
        op = client.post(f"/v1/default/banks/{bank}/memories",
                         json={"items": [{"content": content, "document_id": f"a{n}"}]}).get_json()
        assert wait_job(client, bank, op["operation_id"])["state"] == "succeeded"
    with services.pool.connection() as conn:
        rows = conn.execute(
            """SELECT e.normalized, e.aliases, h.action, h.detail FROM entities e
               LEFT JOIN entity_history h ON h.entity_id = e.id
               WHERE e.bank_id = %s AND e.normalized LIKE 'kube%%'""", (bank,)).fetchall()
    assert [(r["normalized"], r["aliases"], r["action"], r["detail"]) for r in rows] == [
        ("kubernetes cluster", ["kubernetes clusters"], "alias_added",
         {"alias": "kubernetes clusters"})]
