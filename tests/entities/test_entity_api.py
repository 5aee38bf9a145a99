"""Entity routes: list, detail, proposals, explicit merge and split with history; bad input."""

import pytest

BANK = "entities-api"
URL = f"/v1/default/banks/{BANK}/entities"


def _retain(client, items):
    resp = client.post(f"/v1/default/banks/{BANK}/memories",
                       json={"items": items, "async": False})
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json()["state"] == "succeeded", resp.get_json()


def _by_name(client, **params):
    body = client.get(URL, query_string={"limit": 100, **params}).get_json()
    return {e["normalized"]: e for e in body["entities"]}, body


@pytest.fixture(scope="module")
def bank(app):
    client = app.test_client()
    _retain(client, [
        {"content": "Caroline: Dana Lee booked Room 101 for Friday.", "document_id": "a"},
        {"content": "Melanie: Caroline Smith called about Room 102.", "document_id": "b"},
        {"content": "Caroline: Dana Lee and @dlee met again.", "document_id": "c"},
    ])
    return BANK


def test_list_detail_and_proposals(client, bank):
    ents, body = _by_name(client)
    assert body["total"] == 7
    assert [e["normalized"] for e in body["entities"][:2]] == ["caroline", "dana lee"]
    assert ents["caroline"]["mention_count"] == 2
    assert set(_by_name(client, q="ROOM")[0]) == {"room 101", "room 102"}
    page = client.get(URL, query_string={"limit": 2, "offset": 2}).get_json()
    assert len(page["entities"]) == 2 and page["total"] == 7

    detail = client.get(f"{URL}/{ents['caroline']['id']}").get_json()
    assert detail["mentions"]["total"] == 2
    assert {m["mention"] for m in detail["mentions"]["items"]} == {"Caroline"}
    linked = {le["name"]: le["shared_units"] for le in detail["linked_entities"]}
    assert linked["Dana Lee"] == 2 and linked["Room 101"] == 1

    props = client.get(f"{URL}/merge-proposals", query_string={"state": "open"}).get_json()
    assert props["total"] == 1
    pair = {props["proposals"][0]["entity_a"]["name"], props["proposals"][0]["entity_b"]["name"]}
    assert pair == {"Caroline", "Caroline Smith"}


def test_merge_by_proposal_then_split_by_alias_keeps_history(client, bank):
    ents, _ = _by_name(client)
    pid = client.get(f"{URL}/merge-proposals").get_json()["proposals"][0]["id"]
    resp = client.post(f"{URL}/merge", json={"proposal_id": pid, "actor": "reviewer"})
    assert resp.status_code == 200, resp.get_json()
    kept = resp.get_json()["entity"]
    assert kept["id"] == ents["caroline"]["id"]  # more mentions: kept
    assert kept["aliases"] == ["caroline smith"] and kept["mention_count"] == 3
    after, body = _by_name(client)
    assert "caroline smith" not in after and body["total"] == 6
    gone = client.get(f"{URL}/{ents['caroline smith']['id']}").get_json()
    assert gone["merged_into_id"] == kept["id"] and gone["mention_count"] == 0
    assert gone["history"][0]["action"] == "merged_into"
    prop = client.get(f"{URL}/merge-proposals").get_json()["proposals"][0]
    assert prop["state"] == "merged" and prop["decided_by"] == "reviewer"
    # deciding twice is a conflict; merging a merged-away entity too
    assert client.post(f"{URL}/merge", json={"proposal_id": pid}).status_code == 409
    resp = client.post(f"{URL}/merge", json={"entity_ids": [kept["id"], gone["id"]]})
    assert resp.status_code == 409 and resp.get_json()["error"]["code"] == "entity_already_merged"

    # a new mention of the alias resolves to the kept entity
    _retain(client, [{"content": "Caroline Smith: thanks for the call.", "document_id": "d"}])
    assert _by_name(client)[0]["caroline"]["mention_count"] == 4

    resp = client.post(f"{URL}/{kept['id']}/split", json={"aliases": ["Caroline Smith"]})
    assert resp.status_code == 201, resp.get_json()
    new = resp.get_json()["entity"]
    assert new["name"] == "Caroline Smith" and new["mention_count"] == 2
    old = client.get(f"{URL}/{kept['id']}").get_json()
    assert old["mention_count"] == 2 and old["aliases"] == []
    assert [h["action"] for h in old["history"]] == ["merged", "split"]
    assert sorted(old["history"][1]["detail"]["unit_ids"]) == sorted(
        m["unit_id"] for m in client.get(f"{URL}/{new['id']}").get_json()["mentions"]["items"])


def test_split_by_unit_ids_and_merge_by_ids(client, bank):
    ents, _ = _by_name(client)
    dana = client.get(f"{URL}/{ents['dana lee']['id']}").get_json()
    unit = dana["mentions"]["items"][0]["unit_id"]
    resp = client.post(f"{URL}/{dana['id']}/split", json={"unit_ids": [unit], "name": "Dana Lee (ops)"})
    assert resp.status_code == 201
    new = resp.get_json()["entity"]
    assert new["mention_count"] == 1 and new["normalized"] == "dana lee ops"
    resp = client.post(f"{URL}/merge", json={"entity_ids": [dana["id"], new["id"]]})
    assert resp.status_code == 200 and resp.get_json()["entity"]["mention_count"] == 2


@pytest.mark.parametrize("method, path, body, status, code", [
    ("get", URL + "/00000000-0000-0000-0000-000000000000", None, 404, "entity_not_found"),
    ("get", URL + "/not-a-uuid", None, 400, "invalid_entity_id"),
    ("post", URL + "/merge", {"proposal_id": "x"}, 400, "invalid_proposal_id"),
    ("get", "/v1/default/banks/no-such-bank/entities", None, 404, "bank_not_found"),
    ("get", URL + "/merge-proposals?state=maybe", None, 400, "invalid_request"),
    ("get", URL + "?limit=0", None, 400, "invalid_paging"),
    ("post", URL + "/merge", {"entity_ids": ["00000000-0000-0000-0000-000000000000"]}, 400,
     "invalid_request"),
    ("post", URL + "/merge", {"entity_ids": "x"}, 400, "invalid_request"),
    ("post", URL + "/merge", {"entity_ids": ["a", "b"], "proposal_id": "x"}, 400, "invalid_request"),
    ("post", URL + "/merge", {"entity_ids": ["a", "b"], "keep": 1}, 400, "invalid_request"),
    ("post", URL + "/merge", {"proposal_id": "x", "decision": "reject", "keep_id": "y"}, 400,
     "invalid_request"),
    ("post", URL + "/00000000-0000-0000-0000-000000000000/split", {"aliases": ["x"], "nme": "y"},
     400, "invalid_request"),
    ("post", URL + "/merge", {"proposal_id": "00000000-0000-0000-0000-000000000000"}, 404,
     "proposal_not_found"),
    ("post", URL + "/00000000-0000-0000-0000-000000000000/split", {"aliases": ["x"]}, 404,
     "entity_not_found"),
    ("post", URL + "/00000000-0000-0000-0000-000000000000/split", {}, 400, "invalid_request"),
])
def test_bad_input(client, bank, method, path, body, status, code):
    resp = getattr(client, method)(path, json=body) if body is not None else getattr(client, method)(path)
    assert resp.status_code == status, resp.get_json()
    assert resp.get_json()["error"]["code"] == code


def test_split_with_nothing_matching_is_400(client, bank):
    ents, _ = _by_name(client)
    resp = client.post(f"{URL}/{ents['room 101']['id']}/split", json={"aliases": ["Room 999"]})
    assert resp.status_code == 400 and resp.get_json()["error"]["code"] == "nothing_to_split"


def test_merge_chains_repoint_and_carry_proposals_and_split_refuses_clashes(client, services):
    """Break-it findings: a second merge left the first merged entity pointing at a merged-away
    one; open proposals naming a merged-away entity went stale; a split could take another
    entity's name or every mention."""
    bank = "entities-chain"
    url = f"/v1/default/banks/{bank}/entities"
    resp = client.post(f"/v1/default/banks/{bank}/memories", json={"async": False, "items": [
        {"content": "Nia: Quentin Marlowe and Rosalind Okafor met Thaddeus Brightwater.",
         "document_id": "a"},
        {"content": "Nia: Ursula Vance joined later.", "document_id": "b"}]})
    assert resp.get_json()["state"] == "succeeded"
    ids = {e["normalized"]: e["id"] for e in client.get(url, query_string={"limit": 100})
           .get_json()["entities"]}
    q, r, t, u = (ids[n] for n in ("quentin marlowe", "rosalind okafor", "thaddeus brightwater",
                                   "ursula vance"))
    with services.pool.connection() as conn:  # an open proposal between R and T
        conn.execute("""INSERT INTO entity_merge_proposals (bank_id, entity_a, entity_b, score,
                            reason) VALUES (%s, LEAST(%s::uuid, %s::uuid),
                            GREATEST(%s::uuid, %s::uuid), 0.5, 'test')""", (bank, r, t, r, t))
    assert client.post(f"{url}/merge", json={"entity_ids": [q, r]}).status_code == 200
    props = client.get(f"{url}/merge-proposals").get_json()["proposals"]
    open_pairs = [{p["entity_a"]["id"], p["entity_b"]["id"]} for p in props if p["state"] == "open"]
    assert open_pairs == [{q, t}]  # carried over to the kept entity; the R–T one is closed
    assert client.post(f"{url}/merge", json={"entity_ids": [t, q]}).status_code == 200
    assert client.get(f"{url}/{r}").get_json()["merged_into_id"] == t  # re-pointed, no chain
    assert client.get(f"{url}/{q}").get_json()["merged_into_id"] == t
    assert not [p for p in client.get(f"{url}/merge-proposals").get_json()["proposals"]
                if p["state"] == "open"]

    resp = client.post(f"{url}/{t}/split", json={"aliases": ["Quentin Marlowe"],
                                                 "name": "Ursula Vance"})
    assert resp.status_code == 409 and resp.get_json()["error"]["code"] == "entity_name_taken"
    units = [m["unit_id"] for m in client.get(f"{url}/{u}").get_json()["mentions"]["items"]]
    resp = client.post(f"{url}/{u}/split", json={"unit_ids": units})
    assert resp.status_code == 409
    assert resp.get_json()["error"]["code"] == "split_takes_everything"
    resp = client.post(f"{url}/{t}/split", json={"aliases": ["Quentin Marlowe"], "name": "Q. M."})
    assert resp.status_code == 201, resp.get_json()
    new = resp.get_json()["entity"]
    assert (new["name"], new["normalized"]) == ("Q. M.", "q m")
    assert "quentin marlowe" in new["aliases"]
