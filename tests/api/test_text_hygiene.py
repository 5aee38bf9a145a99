"""Fault 6: every text field of every request refuses lone surrogates and NUL with a 400 and a
code; nothing is stored, and no PostgreSQL error text reaches the client."""

import json

import pytest

from tests.conftest import db_counts

BANK = "text-hygiene"
RETAIN = f"/v1/default/banks/{BANK}/memories"
RECALL = f"/v1/default/banks/{BANK}/memories/recall"

# half an emoji (high, low), a NUL, and a surrogate inside otherwise fine text
BAD = ["\ud83d", "\ude00", "a\u0000b", "ok \ud83d ok"]


def _item(**over):
    return {"items": [{"content": "Mia: the boiler is serviced in May.", **over}]}


RETAIN_FIELDS = {
    "content": lambda s: _item(content=s),
    "context": lambda s: _item(context=s),
    "document_id": lambda s: _item(document_id=s),
    "tag": lambda s: _item(tags=["fine", s]),
    "metadata_key": lambda s: _item(metadata={s: 1}),
    "metadata_value": lambda s: _item(metadata={"k": s}),
    "metadata_nested_value": lambda s: _item(metadata={"a": {"b": [1, {"c": s}]}}),
    "metadata_nested_key": lambda s: _item(metadata={"a": [{s: "v"}]}),
    "room": lambda s: _item(room=s),
    "hall": lambda s: _item(hall=s),
    "idempotency_key": lambda s: {**_item(), "idempotency_key": s},
}
RECALL_FIELDS = {
    "query": lambda s: {"query": s},
    "room": lambda s: {"query": "boiler", "room": s},
    "hall": lambda s: {"query": "boiler", "hall": s},
}


def _raw(body: dict) -> str:
    # ensure_ascii writes "\ud83d" escapes, as a client with a broken string would
    return json.dumps(body, ensure_ascii=True)


@pytest.fixture(scope="module")
def seeded(app, services):
    r = app.test_client().post(RETAIN, json=_item(document_id="seed") | {"async": False})
    assert r.status_code == 200, r.get_json()
    return db_counts(services, BANK)


def _total_rows(services) -> dict:
    """Jobs and banks anywhere (a request creates both; units come from jobs, and the worker
    may still be finishing other tests' jobs, so they are counted per bank instead)."""
    with services.pool.connection() as conn:
        return conn.execute("""SELECT (SELECT count(*) FROM jobs) AS jobs,
                                      (SELECT count(*) FROM memory_banks) AS banks""").fetchone()


def _assert_400(resp, code="invalid_request"):
    assert resp.status_code == 400, (resp.status_code, resp.get_data(as_text=True))
    err = resp.get_json()["error"]
    assert err["code"] == code and err["message"]
    text = resp.get_data(as_text=True)
    assert "psycopg" not in text and "PostgreSQL" not in text and "surrogates not allowed" not in text


@pytest.mark.parametrize("bad", BAD, ids=["high", "low", "nul", "inside"])
@pytest.mark.parametrize("field", sorted(RETAIN_FIELDS))
def test_lone_surrogate_in_retain_field_is_400(client, services, seeded, field, bad):
    before = _total_rows(services)
    for sync in (True, False):
        body = RETAIN_FIELDS[field](bad) | {"async": not sync}
        code = "invalid_idempotency_key" if field == "idempotency_key" else "invalid_request"
        _assert_400(client.post(RETAIN, data=_raw(body), content_type="application/json"), code)
    assert db_counts(services, BANK) == seeded
    assert _total_rows(services) == before


@pytest.mark.parametrize("bad", BAD, ids=["high", "low", "nul", "inside"])
@pytest.mark.parametrize("field", sorted(RECALL_FIELDS))
def test_lone_surrogate_in_recall_field_is_400(client, services, seeded, field, bad):
    _assert_400(client.post(RECALL, data=_raw(RECALL_FIELDS[field](bad)),
                            content_type="application/json"))
    assert db_counts(services, BANK) == seeded


def test_lone_surrogate_in_path_and_query_string_is_400(client, services, seeded):
    before = _total_rows(services)
    # %ED%A0%BD is U+D83D encoded as (invalid) UTF-8
    _assert_400(client.post("/v1/default/banks/b%ED%A0%BD/memories", data=_raw(_item()),
                            content_type="application/json"), "invalid_bank_id")
    # Werkzeug leaves an invalid escape in a query string as its literal text: "b%ED%A0%BD"
    # is then a bank id by Hindsight's rule (rcll.banks.ids), of a bank that does not exist
    r = client.get("/jobs?bank_id=b%ED%A0%BD")
    assert r.status_code == 200 and r.get_json()["total"] == 0, r.get_json()
    r = client.get(f"/banks/{BANK}/recall?query=%ED%A0%BD")
    assert r.status_code in (200, 400)  # decoded as U+FFFD by the server: valid text
    assert r.status_code == 200 or r.get_json()["error"]["code"] == "invalid_request"
    _assert_400(client.get(f"/v1/default/banks/{BANK}/operations?state=%ED%A0%BD"))
    assert _total_rows(services) == before


def test_text_check_is_central():
    from rcll.validation import clean_text

    for bad in BAD:
        with pytest.raises(ValueError):
            clean_text(bad)
    assert clean_text("emoji 😀 ok") == "emoji 😀 ok"


# Every route of the write pipeline's read side and decisions (break-it finding: these
# answered 500 with a NUL); the check is central (api/deps.json_body, a before_request hook
# for path and query), so a new route is covered without its own code.
_E = "00000000-0000-4000-8000-000000000001"
NEW_ROUTES = {
    "entities_q": ("GET", f"/v1/default/banks/{BANK}/entities?q={{s}}", None),
    "entity_merge_actor": ("POST", f"/v1/default/banks/{BANK}/entities/merge",
                           lambda s: {"entity_ids": [_E, _E[:-1] + "2"], "actor": s}),
    "entity_split_name": ("POST", f"/v1/default/banks/{BANK}/entities/{_E}/split",
                          lambda s: {"aliases": ["x"], "name": s}),
    "proposals_state": ("GET", f"/v1/default/banks/{BANK}/entities/merge-proposals?state={{s}}",
                        None),
    "dedup_decided_by": ("POST", f"/v1/default/banks/{BANK}/dedup-proposals/{_E}",
                         lambda s: {"action": "keep", "decided_by": s}),
    "closets_room": ("POST", f"/v1/default/banks/{BANK}/closets", lambda s: {"room": s}),
    "memory_path": ("GET", f"/v1/default/banks/{BANK}/memories/{{s}}", None),
}


CASES = [(route, bad) for route, (_, _, body) in sorted(NEW_ROUTES.items())
         # in a URL only NUL can be sent: a lone surrogate is not UTF-8, so it cannot be encoded
         for bad in (["a\u0000b", "\ud83d"] if body else ["a\u0000b"])]


@pytest.mark.parametrize("route, bad", CASES)
def test_nul_and_surrogates_on_pipeline_routes_are_400(client, services, seeded, route, bad):
    method, url, body = NEW_ROUTES[route]
    before = _total_rows(services)
    if body is None:
        resp = client.open(url.format(s="a%00b"), method=method)
    else:
        resp = client.open(url, method=method, data=_raw(body(bad)),
                           content_type="application/json")
    _assert_400(resp)
    assert db_counts(services, BANK) == seeded
    assert _total_rows(services) == before
