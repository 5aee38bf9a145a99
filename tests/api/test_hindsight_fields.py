"""The Hindsight field rule (api/hindsight.py): Hindsight's fields (and explicit nulls) are
accepted on its routes, mapped or ignored and named back; a typo in an RCLL field is still a
400; reflect answers 400 without an LLM and, with the scripted stand-in at the litellm
boundary, from recall's results."""

from __future__ import annotations

import json

import pytest

from tests.conftest import wait_job

B = "/v1/default/banks/{}"


def test_hindsight_nulls_and_fields_accepted_typos_refused(client):
    bank = "hs-fields"
    item = {"content": "Erin keeps bees on the roof.", "timestamp": "unset", "context": None,
            "metadata": None, "tags": None, "entities": [{"text": "Erin"}],
            "resolve_entities": True, "observation_scopes": None, "strategy": None,
            "update_mode": None, "document_id": "bees"}
    r = client.post(B.format(bank) + "/memories",
                    json={"items": [item], "async": False, "document_tags": ["farm"]})
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert body["ignored_fields"] == ["items.entities", "items.resolve_entities"]
    assert body["state"] == "succeeded" and body["status"] == "completed"

    # a typo in an RCLL field (and a name neither knows) stays a 400, nothing stored
    for bad in ({"contnet": "x"}, {"content": "x", "rooom": "work"}):
        r = client.post(B.format(bank) + "/memories", json={"items": [bad], "async": False})
        assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_request"
    r = client.post(B.format(bank) + "/memories",
                    json={"items": [{"content": "x", "update_mode": "append"}], "async": False})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unsupported_hindsight_value"
    # RCLL's own route stays strict about Hindsight's fields
    r = client.post(f"/banks/{bank}/retain",
                    json={"items": [{"content": "y", "entities": []}], "async": False})
    assert r.status_code == 400

    rec = client.post(B.format(bank) + "/memories/recall", json={
        "query": "who keeps bees?", "types": None, "budget": "mid", "tags": ["farm"],
        "tags_match": "all_strict", "include": {"entities": None, "chunks": None},
        "query_timestamp": None, "trace": False, "min_scores": None, "temporal_window": None,
        "tag_groups": None, "prefer_observations": None, "max_tokens": 4096})
    assert rec.status_code == 200, rec.get_json()
    res = rec.get_json()
    assert [x["text"] for x in res["results"]] == ["Erin keeps bees on the roof."]
    assert res["results"][0]["tags"] == ["farm"] and res["ignored_fields"] == []
    assert res["results"][0]["type"] == "world"
    typo = client.post(B.format(bank) + "/memories/recall", json={"query": "x", "max_tokns": 5})
    assert typo.status_code == 400 and typo.get_json()["error"]["code"] == "invalid_request"
    groups = client.post(B.format(bank) + "/memories/recall",
                         json={"query": "x", "tag_groups": [{"tags": ["a"]}]})
    assert groups.get_json()["error"]["code"] == "unsupported_hindsight_value"
    ignored = client.post(B.format(bank) + "/memories/recall",
                          json={"query": "bees", "temporal_window": {"start": "2024-01-01",
                                                                      "end": "2024-02-01"}})
    assert ignored.get_json()["ignored_fields"] == ["temporal_window"]


def test_operation_status_names_beside_states(client, worker):
    bank = "hs-ops"
    r = client.post(B.format(bank) + "/memories", json={"items": [{"content": "one"}],
                                                        "async": True})
    assert r.status_code == 200 and r.get_json()["status"] in ("pending", "processing")
    op = wait_job(client, bank, r.get_json()["operation_id"])
    assert (op["state"], op["status"], op["task_type"], op["items_count"]) == (
        "succeeded", "completed", "retain", 1)
    page = client.get(B.format(bank) + "/operations?status=completed").get_json()
    assert page["total"] == 1 and page["bank_id"] == bank
    assert client.get(B.format(bank) + "/operations?status=pending").get_json()["total"] == 0
    assert client.post(f"/banks/{bank}/retain",
                       json={"items": [{"content": "two"}]}).status_code == 202


def test_reflect_without_llm_is_a_clear_400(client):
    client.post(B.format("hs-noreflect") + "/memories",
                json={"items": [{"content": "z"}], "async": False})
    r = client.post(B.format("hs-noreflect") + "/reflect", json={"query": "what?"})
    assert r.status_code == 400
    err = r.get_json()["error"]
    assert err["code"] == "llm_not_configured" and "RCLL_LLM_PROVIDER" in err["message"]


@pytest.fixture()
def llm_app(settings, services, tmp_path):
    """An app whose services call the scripted stand-in (``rcll-replay``) through litellm."""
    from api.app import create_app
    from rcll.bootstrap import bootstrap

    path = tmp_path / "replay.json"
    path.write_text(json.dumps({"scripts": [
        {"match": "Question: Where does Frank live?",
         "replies": [{"json": {"answer": "Frank lives in Oslo.", "used": [1, 7]}}]}],
        "default": "empty"}))
    s = settings.model_copy(update={"llm_provider": "litellm", "llm_model": "rcll-replay/t",
                                    "llm_replay_path": path, "llm_backoff_s": 0.01,
                                    "llm_max_retries": 1})
    svc = bootstrap(s)
    yield create_app(settings=s, services=svc, enqueue=lambda *_: None)
    svc.close()


def test_reflect_answers_from_recall_through_litellm(llm_app):
    c = llm_app.test_client()
    bank = "hs-reflect"
    r = c.put(B.format(bank), json={"name": "R", "mission": "Know where people live"})
    assert r.status_code == 200 and r.get_json()["created"] is True
    r = c.post(f"/banks/{bank}/retain", json={"async": False, "items": [
        {"content": "Frank lives in Oslo near the harbour.", "document_id": "f"}]})
    assert r.status_code == 200, r.get_json()
    out = c.post(B.format(bank) + "/reflect",
                 json={"query": "Where does Frank live?", "include": {"facts": {}},
                       "budget": "low", "context": None})
    assert out.status_code == 200, out.get_json()
    body = out.get_json()
    assert body["text"] == "Frank lives in Oslo." and body["recalled"] >= 1
    # "used": [1, 7]: memory 1 is the Oslo unit; 7 does not exist and is dropped
    assert [m["text"] for m in body["based_on"]["memories"]] == [
        "Frank lives in Oslo near the harbour."]
    assert body["usage"]["input_tokens"] > 0 and body["model"] == "rcll-replay/t"
    bad = c.post(B.format(bank) + "/reflect", json={"query": "x", "response_schema": {"a": 1}})
    assert bad.get_json()["error"]["code"] == "unsupported_hindsight_value"
