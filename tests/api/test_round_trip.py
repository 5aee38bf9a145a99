"""Retain → Celery worker → PostgreSQL → recall, through the Flask API."""

from tests.conftest import db_counts, wait_job

ITEMS = [
    {"content": "Melanie: I ran a charity race for mental health last Saturday.",
     "timestamp": "2023-05-20T13:00:00", "document_id": "conv/D1:1", "metadata": {"dia_id": "D1:1"}},
    {"content": "Caroline: I went to the LGBTQ support group yesterday and it was powerful.",
     "timestamp": "2023-05-08T13:56:00", "document_id": "conv/D1:2", "metadata": {"dia_id": "D1:2"}},
    {"content": "Melanie: Never deploy the website on a Friday, the pipeline breaks.",
     "document_id": "conv/D1:3", "room": "deployment", "layer": 1},
]


def test_retain_then_recall_through_worker(client, worker, services):
    bank = "rt-bank"
    resp = client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS})
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["state"] in ("queued", "running") and body["items_count"] == 3
    op = wait_job(client, bank, body["operation_id"])
    assert op["state"] == "succeeded", op
    assert op["counts"]["units_created"] == 3
    assert op["counts"]["units_embedded"] == 3
    assert db_counts(services, bank)["embeddings"] == 3

    res = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "When did Caroline go to the support group?", "trace": True})
    assert res.status_code == 200
    out = res.get_json()
    top = out["results"][0]
    assert top["document_id"] == "conv/D1:2"
    assert top["metadata"] == {"dia_id": "D1:2"}
    assert top["mentioned_at"].startswith("2023-05-08T13:56")
    assert top["ranks"]["dense"] == 1 and top["ranks"]["lexical"] == 1
    assert out["dense_available"] is True and out["mode"] == "C" and out["recipe"] == "full"
    assert set(out["timings_ms"]) >= {"embed_query", "dense", "lexical", "total"}
    assert out["tokens_used"] == sum(r["tokens"] for r in out["results"])
    # counts stored at retain are the tokenizer's counts of the unit text
    assert [r["tokens"] for r in out["results"]] == services.tokens.count_many(
        [r["text"] for r in out["results"]])

    # explicit room/layer win over the classifier; filters narrow the result
    res = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "deploy website", "room": "deployment", "max_layer": 1})
    rows = res.get_json()["results"]
    assert [r["document_id"] for r in rows] == ["conv/D1:3"]
    assert rows[0]["layer"] == 1 and rows[0]["hall"] == "warning"


def test_seed_get_recall_route(client, worker, services):
    bank = "rt-get"
    body = client.post(f"/banks/{bank}/retain", json={"items": ITEMS[:2], "async": False}).get_json()
    assert body["state"] == "succeeded"
    res = client.get(f"/banks/{bank}/recall?query=charity%20race&limit=1")
    assert res.status_code == 200
    assert [r["document_id"] for r in res.get_json()["results"]] == ["conv/D1:1"]


def test_budget_cut_counts_real_tokens(client, worker, services):
    bank = "rt-budget"
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS, "async": False})
    full = client.post(f"/v1/default/banks/{bank}/memories/recall",
                       json={"query": "Melanie Caroline race group deploy"}).get_json()
    assert len(full["results"]) == 3
    first = full["results"][0]["tokens"]
    cut = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "Melanie Caroline race group deploy",
                            "max_tokens": first}).get_json()
    assert cut["tokens_used"] <= first
    assert cut["results"][0]["id"] == full["results"][0]["id"]
    assert len(cut["results"]) < 3
