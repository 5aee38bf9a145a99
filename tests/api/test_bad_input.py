"""Bad input gets a 4xx JSON error with a code, and nothing stored changes."""

import json

import pytest

from tests.conftest import db_counts

BANK = "bad-input"
RETAIN = f"/v1/default/banks/{BANK}/memories"
RECALL = f"/v1/default/banks/{BANK}/memories/recall"


@pytest.fixture(scope="module")
def seeded(app, services):
    c = app.test_client()
    r = c.post(RETAIN, json={"items": [{"content": "Alice: the build server is in Frankfurt.",
                                        "document_id": "a"}], "async": False})
    assert r.status_code == 200, r.get_json()
    return db_counts(services, BANK)


def _error(resp, status, code):
    assert resp.status_code == status, resp.get_json()
    err = resp.get_json()["error"]
    assert err["code"] == code
    assert err["message"]
    return err


@pytest.mark.parametrize("payload,status,code", [
    ({"items": [{"context": "no content"}]}, 400, "invalid_request"),
    ({"items": [{"content": "   "}]}, 400, "invalid_request"),
    ({"items": []}, 400, "invalid_request"),
    ({"items": [{"content": "x", "layer": 7}]}, 400, "invalid_request"),
    ({"items": [{"content": "x", "room": "kitchen"}]}, 400, "invalid_request"),
    ({"items": [{"content": "x", "timestamp": "not a date"}]}, 400, "invalid_request"),
    ({"items": [{"content": "x" * 5_001}]}, 413, "item_too_large"),
    ({"items": [{"content": f"item {i}"} for i in range(51)]}, 413, "too_many_items"),
    ({"items": "nope"}, 400, "invalid_request"),
    ({"items": [{"content": "nul\u0000byte"}]}, 400, "invalid_request"),
    ({"items": [{"content": "x", "metadata": {"k\u0000": 1}}]}, 400, "invalid_request"),
    ({"items": [{"content": "x", "tags": ["ok", "t\u0000"]}]}, 400, "invalid_request"),
    ({"items": [{"content": "x", "timestamp": "9999-12-31T23:59:59-14:00"}]}, 400,
     "invalid_request"),
    ({"items": [{"content": "x", "timestamp": "0001-01-01T00:00:00+14:00"}]}, 400,
     "invalid_request"),
    ({"items": [{"content": "x", "metadata": {"a": float("nan")}}]}, 400, "invalid_request"),
    ({"items": [{"content": "x", "idempotency_key": "k\u0000"}], }, 400, "invalid_request"),
    (["not", "an", "object"], 400, "invalid_request"),
])
def test_bad_retain(client, services, seeded, payload, status, code):
    _error(client.post(RETAIN, json=payload), status, code)
    assert db_counts(services, BANK) == seeded


def test_malformed_json(client, services, seeded):
    resp = client.post(RETAIN, data='{"items": [', content_type="application/json")
    _error(resp, 400, "malformed_json")
    _error(client.post(RECALL, data="{oops", content_type="application/json"), 400,
           "malformed_json")
    assert db_counts(services, BANK) == seeded


def test_invalid_bank_id(client, services, seeded):
    # any text Hindsight takes is a bank id (rcll.banks.ids); a control character is not
    _error(client.post("/v1/default/banks/bad%01id/memories", json={"items": [{"content": "x"}]}),
           400, "invalid_bank_id")
    _error(client.post("/v1/default/banks/nl%0A/memories", json={"items": [{"content": "x"}]}),
           400, "invalid_bank_id")
    _error(client.get("/jobs?bank_id=%00"), 400, "invalid_bank_id")


def test_deep_json_and_bad_header(client, services, seeded):
    deep = '{"items":[{"content":"x","metadata":' + "[" * 5000 + "]" * 5000 + "}]}"
    _error(client.post(RETAIN, data=deep, content_type="application/json"), 400,
           "malformed_json")
    deep_meta: list = [1]
    for _ in range(20):
        deep_meta = [deep_meta]
    nested = {"items": [{"content": "x", "metadata": {"a": deep_meta}}]}
    _error(client.post(RETAIN, json=nested), 400, "invalid_request")
    _error(client.post(RETAIN, json={"items": [{"content": "x"}]},
                       headers={"Idempotency-Key": "k" * 6000}), 400, "invalid_idempotency_key")
    assert db_counts(services, BANK) == seeded


@pytest.mark.parametrize("payload", [
    {"query": ""},
    {"query": "   "},
    {"query": "x" * 2_001},
    {"query": "ok", "max_tokens": 0},
    {"query": "ok", "max_tokens": 1_000_001},
    {"query": "ok", "limit": 0},
    {"query": "ok", "channels": 3},
    {"query": "ok", "max_layer": 4},
    {"query": "ok", "unknown_field": 1},
    {"query": "gym\u0000time"},
    {"query": "ok", "max_tokens": True},
    {},
])
def test_bad_recall(client, services, seeded, payload):
    err = _error(client.post(RECALL, json=payload), 400, "invalid_request")
    assert err["details"]["errors"]
    assert db_counts(services, BANK) == seeded


def test_recall_unknown_recipe(client, services, seeded):
    for body in ({"query": "ok", "channels": "graph"}, {"query": "ok", "recipe": "fastest"}):
        err = _error(client.post(RECALL, json=body), 400, "unknown_recipe")
        assert err["details"]["known"] == ["cold", "dense", "document", "document_dense",
                                          "document_lexical", "full", "hybrid", "lexical"]
    assert db_counts(services, BANK) == seeded


def test_recall_unknown_bank(client, seeded):
    _error(client.post("/v1/default/banks/no-such-bank/memories/recall", json={"query": "x"}),
           404, "bank_not_found")
    _error(client.get("/banks/no-such-bank/recall?query=x"), 404, "bank_not_found")


def test_unknown_operation(client, seeded):
    _error(client.get(f"/v1/default/banks/{BANK}/operations/not-a-uuid"), 404,
           "operation_not_found")
    _error(client.get(f"/v1/default/banks/{BANK}/operations/00000000-0000-0000-0000-000000000000"),
           404, "operation_not_found")
    _error(client.get(f"/v1/default/banks/{BANK}/operations/"
                      "urn:uuid:00000000-0000-0000-0000-000000000000"), 404, "operation_not_found")


def test_unknown_route_and_method(client):
    _error(client.get("/v1/nothing-here"), 404, "not_found")
    _error(client.get(RETAIN), 405, "method_not_allowed")


def test_get_recall_bad_integer(client, seeded):
    _error(client.get(f"/banks/{BANK}/recall?query=x&limit=ten"), 400, "invalid_request")


@pytest.mark.parametrize("invisible", ["\u200b\u200b", "\ufeff", "\u2060 \u200d", "\u00a0\u3000"])
def test_invisible_only_content_and_query_are_blank(client, services, invisible):
    """Break-it finding: content of only zero-width characters or a byte-order mark was
    stored (empty or one-symbol tsv) and a BOM query matched it."""
    r = client.post("/v1/default/banks/invisible/memories",
                    json={"items": [{"content": invisible}], "async": False})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_request"
    assert "blank" in json.dumps(r.get_json())
    q = client.post("/v1/default/banks/invisible/memories/recall", json={"query": invisible})
    assert q.status_code == 400 and q.get_json()["error"]["code"] == "invalid_request"
    assert db_counts(services, "invisible")["units"] == 0


@pytest.mark.parametrize("payload", [
    {"query": "last May", "query_timestamp": 253402300800},  # epoch s: not ISO 8601
    {"query": "last May", "query_timestamp": 1.5},
    {"query": "last May", "query_timestamp": "1683676800"},
    {"query": "last May", "query_timestamp": True},
    {"query": "last May", "query_timestamp": "2023-02-30"},
    {"query": "ok", "recipe": "cold\u0000"},
    {"query": "ok", "recipe": "cold\ud83d"},
    {"query": "ok", "recipe": "a" * 100_000},
    {"query": "ok", "recipe": 3},
])
def test_bad_recall_fields_of_issue_7(client, services, seeded, payload):
    err = _error(client.post(RECALL, json=payload), 400, "invalid_request")
    assert len(str(err)) < 5_000  # the bad value is not echoed back whole
    assert db_counts(services, BANK) == seeded


@pytest.mark.parametrize("qs", [
    "query=x&trace=banana", "query=x&include_archive=maybe", "query=x&include_superseded=on",
    "query=x&trace=", "query=x&limit=1_0", "query=x&limit=%EF%BC%91", "query=x&max_layer=+1",
    "query=a&query=b", "query=x&recipe=cold&recipe=full",
])
def test_bad_recall_query_strings(client, seeded, qs):
    _error(client.get(f"/banks/{BANK}/recall?{qs}"), 400, "invalid_request")


def test_good_recall_query_strings(client, seeded):
    for qs in ("query=x&trace=true&include_archive=0&limit=5", "query=x&include_superseded=no",
               "query=x&recipe=lexical&max_layer=2"):
        r = client.get(f"/banks/{BANK}/recall?{qs}")
        assert r.status_code == 200, (qs, r.get_json())
