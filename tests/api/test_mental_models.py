"""Hindsight 1.1's mental models on RCLL (``…/mental-models``): CRUD without an LLM (refresh
then answers 400 ``llm_not_configured``), refresh through litellm with the scripted stand-in
(``rcll-replay``) at the LLM boundary, through the real ``hindsight-client`` 1.1.0 over HTTP
(each answer parsed by the model it declares) and the rows in PostgreSQL; a member who may
not see a unit never reads it through a model's content; bad input is a 4xx."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.access.conftest import (  # noqa: F401  (fixtures)
    ADMIN,
    auth_services,
    auth_settings,
    bearer,
    make_member,
    share_models,
)
from tests.conftest import serving

pytest.importorskip("hindsight_client")
from hindsight_client import Hindsight  # noqa: E402
from hindsight_client_api.exceptions import ApiException  # noqa: E402

B = "/v1/default/banks/{}"
SCRIPTS = [
    {"match": "Question: Where does Frank live?",
     "replies": [{"json": {"answer": "Frank lives in Oslo.", "used": [1]}}]},
    {"match": "Question: What did Quentin say?",
     "replies": [{"json": {"answer": "Quentin said: " + "; ".join(
         ["the vault code is 4417", "he met Oren at the tea shop"]), "used": [1, 2]}}]},
    {"match": "Question: What did Zed say?",
     "replies": [{"json": {"answer": "Nothing is known of Zed.", "used": []}}]},
]


def _llm_settings(s, tmp_path):
    path = tmp_path / "replay.json"
    path.write_text(json.dumps({"scripts": SCRIPTS, "default": "empty"}))
    return s.model_copy(update={"llm_provider": "litellm", "llm_model": "rcll-replay/t",
                                "llm_replay_path": path, "llm_backoff_s": 0.01,
                                "llm_max_retries": 1})


@pytest.fixture()
def llm_app(settings, services, tmp_path):
    from api.app import create_app
    from rcll.bootstrap import Services

    s = _llm_settings(settings, tmp_path)
    svc = share_models(Services(s), services)
    yield create_app(settings=s, services=svc, enqueue=lambda *_: None)
    svc.close()


@pytest.fixture()
def auth_llm_app(auth_settings, services, tmp_path):  # noqa: F811
    from api.app import create_app
    from rcll.bootstrap import Services

    s = _llm_settings(auth_settings, tmp_path)
    svc = share_models(Services(s), services)
    yield create_app(settings=s, services=svc, enqueue=lambda *_: None)
    svc.close()


def _history(services, bank: str, model_id: str) -> list[tuple]:
    with services.pool.connection() as conn:
        return [(r["action"], r["content"]) for r in conn.execute(
            "SELECT action, content FROM mental_model_history WHERE bank_id = %s AND "
            "mental_model_id = %s ORDER BY seq", (bank, model_id)).fetchall()]


def _audit(services, bank: str) -> list[str]:
    with services.pool.connection() as conn:
        return [r["action"] for r in conn.execute(
            "SELECT action FROM audit_log WHERE bank_id = %s AND action LIKE 'mental_model.%%' "
            "ORDER BY id", (bank,)).fetchall()]


def test_crud_without_an_llm_through_hindsight_client(app, services):
    bank = f"mm-{uuid.uuid4().hex[:6]}"
    r = app.test_client().post(B.format(bank) + "/memories", json={
        "items": [{"content": "Frank lives in Oslo near the harbour."}], "async": False})
    assert r.status_code == 200, r.get_json()
    with serving(app, "hs-mm") as url:
        hs = Hindsight(base_url=url, timeout=60)
        made = hs.create_mental_model(bank, name="Where Frank lives",
                                      source_query="Where does Frank live?", tags=["people"],
                                      id="frank-home")
        assert made.mental_model_id == "frank-home" and made.operation_id
        listed = hs.list_mental_models(bank)
        assert listed.total == 1 and [m.id for m in listed.items] == ["frank-home"]
        assert listed.items[0].content is None and listed.items[0].tags == ["people"]
        assert hs.list_mental_models(bank, tags=["other"]).total == 0
        got = hs.get_mental_model(bank, "frank-home")
        assert (got.name, got.source_query, got.content, got.max_tokens) == (
            "Where Frank lives", "Where does Frank live?", None, 2048)
        upd = hs.update_mental_model(bank, "frank-home", name="Frank's home", max_tokens=512)
        assert (upd.name, upd.max_tokens) == ("Frank's home", 512)
        with pytest.raises(ApiException) as exc:
            hs.refresh_mental_model(bank, "frank-home")
        assert exc.value.status == 400 and "llm_not_configured" in exc.value.body
        cleared = hs.clear_mental_model(bank, "frank-home")
        assert cleared.content is None
        hist = hs.get_mental_model_history(bank, "frank-home")
        assert [h["action"] for h in hist["items"]] == ["clear"]
        hs.delete_mental_model(bank, "frank-home")
        with pytest.raises(ApiException) as exc:
            hs.get_mental_model(bank, "frank-home")
        assert exc.value.status == 404 and "mental_model_not_found" in exc.value.body
    assert _audit(services, bank) == ["mental_model.create", "mental_model.update",
                                      "mental_model.clear", "mental_model.delete"]
    assert _history(services, bank, "frank-home") == []  # deleted with the model


def test_refresh_runs_reflect_through_litellm(llm_app):
    svc = llm_app.extensions["rcll"]
    c = llm_app.test_client()
    bank = f"mm-llm-{uuid.uuid4().hex[:6]}"
    r = c.post(f"/banks/{bank}/retain", json={"async": False, "items": [
        {"content": "Frank lives in Oslo near the harbour.", "document_id": "f"}]})
    assert r.status_code == 200, r.get_json()
    with serving(llm_app, "hs-mm") as url:
        hs = Hindsight(base_url=url, timeout=60)
        made = hs.create_mental_model(bank, name="Frank", source_query="Where does Frank live?")
        mid = made.mental_model_id
        got = hs.get_mental_model(bank, mid)
        assert got.content == "Frank lives in Oslo." and got.last_refreshed_at
        assert got.reflect_response["model"] == "rcll-replay/t"
        assert got.reflect_response["recalled"] >= 1 and len(got.reflect_response["based_on"]) == 1
        op = hs.refresh_mental_model(bank, mid)
        assert op.status == "completed" and op.operation_id
        assert hs.get_mental_model(bank, mid, detail="metadata").content is None  # not asked
        hs.clear_mental_model(bank, mid)
        assert hs.get_mental_model(bank, mid).content is None
        hist = hs.get_mental_model_history(bank, mid)["items"]
        assert [(h["action"], h["content"]) for h in hist] == [
            ("clear", None), ("refresh", "Frank lives in Oslo."),
            ("refresh", "Frank lives in Oslo.")]
        assert hist[0]["previous_content"] == "Frank lives in Oslo."
    assert _history(svc, bank, mid) == [("refresh", "Frank lives in Oslo."),
                                        ("refresh", "Frank lives in Oslo."), ("clear", None)]
    assert _audit(svc, bank) == ["mental_model.create", "mental_model.refresh",
                                 "mental_model.refresh", "mental_model.clear"]


def test_a_member_who_may_not_see_a_unit_never_reads_it_in_a_model(auth_llm_app):
    api = auth_llm_app.test_client()
    bank = f"mm-vis-{uuid.uuid4().hex[:6]}"
    a, b, c = (f"{p}{uuid.uuid4().hex[:6]}" for p in ("al", "bo", "cy"))
    ka = make_member(api, a, bank, "write")
    kb = make_member(api, b, bank, "read")
    kc = make_member(api, c, bank, "write")
    for text, aud in (("Quentin Marsh met Oren Vale at the tea shop.", None),
                      ("Quentin Marsh said the vault code is 4417.", a)):
        r = api.post(f"/banks/{bank}/units", json={"text": text} | (
            {"audience": aud} if aud else {}), headers=bearer(ka))
        assert r.status_code == 201, r.get_json()
    r = api.post(B.format(bank) + "/mental-models", headers=bearer(ka), json={
        "id": "quentin", "name": "Quentin", "source_query": "What did Quentin say?"})
    assert r.status_code == 200, r.get_json()
    assert "4417" in r.get_json()["mental_model"]["content"]  # refreshed as a: a sees both
    one = B.format(bank) + "/mental-models/quentin"
    theirs = api.get(one, headers=bearer(kb)).get_json()
    assert theirs["content"] is None and theirs["content_withheld"] is True
    assert theirs["reflect_response"] is None
    listed = api.get(B.format(bank) + "/mental-models?detail=full", headers=bearer(kb))
    hist = api.get(one + "/history", headers=bearer(kb))
    for answer in (listed, hist):
        assert answer.status_code == 200 and "4417" not in json.dumps(answer.get_json())
    assert api.get(one, headers=bearer(ka)).get_json()["content_withheld"] is False
    # a refresh runs as its caller: c sees only the public unit, so b may read the result
    r = api.post(one + "/refresh", headers=bearer(kc))
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["mental_model"]["reflect_response"]["recalled"] == 1
    seen = api.get(one, headers=bearer(kb)).get_json()
    assert seen["content_withheld"] is False and seen["content"]
    # a reader may not refresh, create or clear
    for method, path in (("post", one + "/refresh"), ("post", one + "/clear"),
                         ("delete", one)):
        assert getattr(api, method)(path, headers=bearer(kb)).status_code == 403


BAD = [
    ("post", "", {"source_query": "q"}, 400, "invalid_request"),
    ("post", "", {"name": "n", "source_query": "q", "max_tokens": 10}, 400, "invalid_request"),
    ("post", "", {"name": "n", "source_query": "q", "bogus": 1}, 400, "invalid_request"),
    ("post", "", {"name": "n", "source_query": "q", "trigger": {"refresh_cron": "* * * * *"}},
     400, "unsupported_hindsight_value"),
    ("post", "", {"name": "n", "source_query": "q", "trigger": {"mode": "delta"}},
     400, "unsupported_hindsight_value"),
    ("post", "", {"id": "a b", "name": "n", "source_query": "q"}, 400,
     "invalid_mental_model_id"),
    ("post", "", {"id": "taken", "name": "n", "source_query": "q"}, 409, "mental_model_exists"),
    ("get", "?detail=everything", None, 400, "invalid_request"),
    ("get", "?tags_match=some", None, 400, "invalid_request"),
    ("get", "?limit=0", None, 400, "invalid_paging"),
    ("get", "/nobody", None, 404, "mental_model_not_found"),
    ("patch", "/taken", {"max_tokens": 99999}, 400, "invalid_request"),
    ("patch", "/nobody", {"name": "x"}, 404, "mental_model_not_found"),
    ("post", "/taken/refresh", {"mode": "delta"}, 400, "invalid_request"),
    ("post", "/taken/refresh", None, 400, "llm_not_configured"),
    ("delete", "/nobody", None, 404, "mental_model_not_found"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), BAD)
def test_bad_input_is_4xx(client, method, path, body, status, code):
    bank = "mm-bad"
    base = B.format(bank) + "/mental-models"
    client.post(B.format(bank) + "/memories", json={"items": [{"content": "x"}],
                                                   "async": False})
    client.post(base, json={"id": "taken", "name": "n", "source_query": "q"})
    kw = {} if body is None else {"json": body}
    r = getattr(client, method)(base + path, **kw)
    assert r.status_code == status, r.get_json()
    assert r.get_json()["error"]["code"] == code


def test_unknown_bank_is_404(client):
    r = client.get(B.format("mm-nobody") + "/mental-models")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"


def _frank_model(c, hs, bank: str) -> tuple[str, str]:
    """A bank with Frank's unit and a refreshed model written from it: ``(model, unit)``."""
    r = c.post(f"/banks/{bank}/retain", json={"async": False, "items": [
        {"content": "Frank lives in Oslo near the harbour.", "document_id": "frank"}]})
    assert r.status_code == 200, r.get_json()
    mid = hs.create_mental_model(bank, name="Frank",
                                 source_query="Where does Frank live?").mental_model_id
    got = hs.get_mental_model(bank, mid)
    assert got.content == "Frank lives in Oslo."
    [unit] = got.reflect_response["based_on"]
    return mid, unit


@pytest.mark.parametrize("erase", ["forget", "document", "clear"])
def test_an_erased_unit_leaves_the_models_written_from_it(llm_app, erase):
    """Forgetting a unit, deleting its document or clearing the bank's memories erases the
    content of every model refreshed from it — current and in history — in the same
    transaction, with a history row ``forget`` and the models named in the audit entry."""
    svc = llm_app.extensions["rcll"]
    c = llm_app.test_client()
    bank = f"mm-erase-{erase}-{uuid.uuid4().hex[:6]}"
    with serving(llm_app, "hs-mm-erase") as url:
        hs = Hindsight(base_url=url, timeout=60)
        mid, unit = _frank_model(c, hs, bank)
        # a model not written from the unit (its tag matches no unit) keeps its content
        other = hs.create_mental_model(bank, name="Zed", source_query="What did Zed say?",
                                       tags=["zed"])
        assert hs.get_mental_model(bank, other.mental_model_id).content
        if erase == "forget":
            r = c.delete(f"/v1/default/banks/{bank}/units/{unit}")
            action = "unit.forget"
        elif erase == "document":
            r = c.delete(f"/v1/default/banks/{bank}/documents/frank")
            action = "document.delete"
        else:
            r = c.delete(f"/v1/default/banks/{bank}/memories")
            action = "bank.clear"
        assert r.status_code == 200, r.get_json()
        got = hs.get_mental_model(bank, mid)
        assert got.content is None and got.reflect_response is None
        raw = c.get(f"/v1/default/banks/{bank}/mental-models/{mid}").get_json()
        assert raw["content"] is None and raw["content_withheld"] is False
        hist = hs.get_mental_model_history(bank, mid)["items"]
        assert [h["action"] for h in hist] == ["forget", "refresh"]
        assert all(h["content"] is None and h["previous_content"] is None for h in hist)
        assert hs.get_mental_model(bank, other.mental_model_id).content is not None
    with svc.pool.connection() as conn:
        left = conn.execute("SELECT count(*) AS n FROM mental_model_history WHERE bank_id = %s "
                            "AND mental_model_id = %s AND (content LIKE '%%Oslo%%' OR "
                            "previous_content LIKE '%%Oslo%%')", (bank, mid)).fetchone()["n"]
        entry = conn.execute("SELECT details FROM audit_log WHERE bank_id = %s AND action = %s",
                             (bank, action)).fetchone()
    assert left == 0
    assert entry["details"]["mental_models"] == [f"{bank}/{mid}"]


def test_deleting_a_bank_erases_models_of_other_banks_that_saw_its_units(llm_app):
    """A refresh sees the units tunnels bring in from another bank; deleting that bank
    erases the models that saw them (audit ``bank.delete`` names them)."""
    svc = llm_app.extensions["rcll"]
    c = llm_app.test_client()
    a, b = (f"mm-tun-{x}-{uuid.uuid4().hex[:6]}" for x in "ab")
    for bank, text in ((a, "Frank lives in Oslo near the harbour."),
                       (b, "Frank's neighbour Greta grows tomatoes.")):
        r = c.post(f"/banks/{bank}/retain", json={"async": False, "items": [{"content": text}]})
        assert r.status_code == 200, r.get_json()
    with svc.pool.connection() as conn:
        ids = {r["bank_id"]: r["id"] for r in conn.execute(
            "SELECT bank_id, id::text AS id FROM memory_units WHERE bank_id = ANY(%s)",
            ([a, b],)).fetchall()}
    r = c.post("/tunnels", json={"source_unit_id": ids[b], "target_unit_id": ids[a]})
    assert r.status_code == 201, r.get_json()
    with serving(llm_app, "hs-mm-tunnel") as url:
        hs = Hindsight(base_url=url, timeout=60)
        mid = hs.create_mental_model(b, name="Frank",
                                     source_query="Where does Frank live?").mental_model_id
        assert hs.get_mental_model(b, mid).content == "Frank lives in Oslo."
        with svc.pool.connection() as conn:
            seen = conn.execute("SELECT seen_unit_ids::text[] AS s FROM mental_models "
                                "WHERE bank_id = %s AND id = %s", (b, mid)).fetchone()["s"]
        assert ids[a] in seen  # the tunnelled unit of bank a
        assert c.delete(f"/v1/default/banks/{a}").status_code == 200
        assert hs.get_mental_model(b, mid).content is None
        hist = hs.get_mental_model_history(b, mid)["items"]
        assert [(h["action"], h["content"]) for h in hist] == [("forget", None),
                                                               ("refresh", None)]
    with svc.pool.connection() as conn:
        entry = conn.execute("SELECT details FROM audit_log WHERE bank_id = %s AND "
                             "action = 'bank.delete'", (a,)).fetchone()
    assert entry["details"]["mental_models"] == [f"{b}/{mid}"]
