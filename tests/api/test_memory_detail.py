"""``GET …/memories/{id}``: a unit with its links, entities and sources; recall results carry
their entities."""

from uuid import uuid4


def _setup(client, services, bank: str) -> dict:
    """Three chunk units by retain (the entities stage finds Maya and Pixel in two of them); a
    derived fact and its links and mentions inserted directly (no LLM in these tests)."""
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": "Maya: I adopted a grey cat called Pixel last Sunday.", "document_id": "m1"},
        {"content": "Maya: Pixel the cat sleeps on my keyboard all day.", "document_id": "m2"},
        {"content": "my cat naps in the sun all week long", "document_id": "m3"},
    ], "async": False})
    assert r.get_json()["state"] == "succeeded"
    with services.pool.connection() as conn, conn.transaction():
        chunks = {x["document_id"]: str(x["id"]) for x in conn.execute(
            """SELECT u.id, d.document_id FROM memory_units u JOIN documents d
               ON d.id = u.document_id WHERE u.bank_id = %s""", (bank,)).fetchall()}
        fact = str(conn.execute(
            """INSERT INTO memory_units (bank_id, kind, text, origin, confidence,
                   extraction_version)
               VALUES (%s, 'fact', 'Maya adopted a grey cat named Pixel.', 'derived', 0.9,
                       'extract-v1') RETURNING id""", (bank,)).fetchone()["id"])
        conn.execute("""INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
                        VALUES (%s, %s, %s, 'derived_from', 1.0)""", (fact, chunks["m1"], bank))
        ents = {r["name"]: str(r["id"]) for r in conn.execute(
            "SELECT id, name FROM entities WHERE bank_id = %s", (bank,)).fetchall()}
        assert set(ents) == {"Maya", "Pixel"}  # made by the entities stage
        for unit, name, mention in ((fact, "Maya", "Maya"), (fact, "Pixel", "Pixel")):
            conn.execute("""INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention)
                            VALUES (%s, %s, %s, %s)""", (unit, ents[name], bank, mention))
    return {"fact": fact, **chunks, **ents}


def test_a_derived_unit_shows_its_sources_links_and_entities(client, services):
    bank = "mem-detail"
    ids = _setup(client, services, bank)
    r = client.get(f"/v1/default/banks/{bank}/memories/{ids['fact']}")
    assert r.status_code == 200, r.get_json()
    u = r.get_json()
    assert (u["id"], u["kind"], u["origin"], u["extraction_version"]) == (
        ids["fact"], "fact", "derived", "extract-v1")
    assert abs(u["confidence"] - 0.9) < 1e-6 and u["revision"] == 1
    assert u["superseded_by_id"] is None and u["invalidated_reason"] is None
    assert [s["id"] for s in u["sources"]] == [ids["m1"]]
    assert u["sources"][0]["document_id"] == "m1" and u["sources"][0]["text"].startswith("Maya: I adopted")
    assert {(x["direction"], x["type"], x["unit_id"]) for x in u["links"]} == {
        ("out", "derived_from", ids["m1"])}
    assert u["entities"] == [{"id": ids["Maya"], "name": "Maya", "mention": "Maya"},
                             {"id": ids["Pixel"], "name": "Pixel", "mention": "Pixel"}]

    chunk = client.get(f"/v1/default/banks/{bank}/memories/{ids['m1']}").get_json()
    by_type = {(x["direction"], x["type"]): x for x in chunk["links"]}
    assert by_type[("in", "derived_from")]["unit_id"] == ids["fact"]
    assert by_type[("in", "derived_from")]["text"] == "Maya adopted a grey cat named Pixel."
    assert by_type[("in", "derived_from")]["live"] is True
    # the link stage linked the two chunks about Pixel; the entities stage linked them by
    # their shared entities
    semantic = {x["unit_id"]: x["weight"] for x in chunk["links"]
                if (x["direction"], x["type"]) == ("out", "semantic")}
    assert ids["m2"] in semantic and 0.6 <= semantic[ids["m2"]] <= 1.0
    assert ids["m2"] in {x["unit_id"] for x in chunk["links"] if x["type"] == "entity"}
    assert chunk["origin"] == "told" and chunk["sources"] == [] and chunk["document_id"] == "m1"


def test_unknown_and_malformed_unit_ids(client, services):
    bank = "mem-detail-err"
    ids = _setup(client, services, bank)
    r = client.get(f"/v1/default/banks/{bank}/memories/{uuid4()}")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "unit_not_found"
    r = client.get(f"/v1/default/banks/{bank}/memories/12345")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_unit_id"
    r = client.get(f"/v1/default/banks/mem-detail/memories/{ids['fact']}")  # another bank's unit
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "unit_not_found"
    r = client.get(f"/v1/default/banks/no-such-bank/memories/{ids['fact']}")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"


def test_recall_results_carry_their_entities(client, services):
    bank = "mem-recall-ents"
    ids = _setup(client, services, bank)
    res = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "what is the name of Maya's cat?"}).get_json()["results"]
    by_id = {x["id"]: x for x in res}
    assert by_id[ids["m1"]]["entity_refs"] == [{"id": ids["Maya"], "name": "Maya"},
                                            {"id": ids["Pixel"], "name": "Pixel"}]
    assert by_id[ids["fact"]]["entity_refs"] == [{"id": ids["Maya"], "name": "Maya"},
                                              {"id": ids["Pixel"], "name": "Pixel"}]
    # "Pixel" opens m2's sentence after the speaker prefix: a lone sentence-initial word is
    # not taken as a name by the deterministic extractor
    assert by_id[ids["m2"]]["entity_refs"] == [{"id": ids["Maya"], "name": "Maya"}]
    assert by_id[ids["m3"]]["entity_refs"] == []
    # Hindsight's field beside it: the names (its client's RecallResult.entities is list[str])
    assert by_id[ids["m1"]]["entities"] == ["Maya", "Pixel"]
    assert by_id[ids["m3"]]["entities"] == []
