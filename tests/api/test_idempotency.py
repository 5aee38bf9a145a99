"""Re-retaining the same documents writes nothing twice."""

from tests.conftest import db_counts, wait_job

ITEMS = [{"content": f"Turn {i}: the quarterly report mentions item {i}.",
          "document_id": f"doc-{i}"} for i in range(12)]


def test_re_retain_same_documents_changes_nothing(client, worker, services):
    bank = "idem-bank"
    first = client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS}).get_json()
    assert wait_job(client, bank, first["operation_id"])["counts"]["units_created"] == 12
    before = db_counts(services, bank)
    second = client.post(f"/v1/default/banks/{bank}/memories", json={"items": ITEMS}).get_json()
    op = wait_job(client, bank, second["operation_id"])
    assert op["state"] == "succeeded"
    assert op["counts"]["units_created"] == 0
    assert op["counts"]["units_skipped"] == 12
    after = db_counts(services, bank)
    assert (after["units"], after["embeddings"], after["documents"]) == (12, 12, 12)
    assert after["jobs"] == before["jobs"] + 1


def test_items_without_document_id_dedupe_on_content(client, worker, services):
    bank = "idem-nodoc"
    items = [{"content": "Bob: the staging database password rotates monthly."}]
    for _ in range(2):
        client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert db_counts(services, bank)["units"] == 1


def test_idempotency_key_returns_the_first_job(client, worker, services):
    bank = "idem-key"
    a = client.post(f"/v1/default/banks/{bank}/memories",
                    json={"items": ITEMS[:2]}, headers={"Idempotency-Key": "k-1"}).get_json()
    b = client.post(f"/v1/default/banks/{bank}/memories",
                    json={"items": ITEMS[:2]}, headers={"Idempotency-Key": "k-1"}).get_json()
    assert a["operation_id"] == b["operation_id"]
    wait_job(client, bank, a["operation_id"])
    assert db_counts(services, bank)["jobs"] == 1


def test_changed_document_invalidates_old_units_and_keeps_them(client, worker, services):
    bank = "idem-update"
    client.post(f"/v1/default/banks/{bank}/memories",
                json={"items": [{"content": "The API rate limit is 100 requests per minute.",
                                 "document_id": "limits"}], "async": False})
    client.post(f"/v1/default/banks/{bank}/memories",
                json={"items": [{"content": "The API rate limit is 500 requests per minute.",
                                 "document_id": "limits"}], "async": False})
    assert db_counts(services, bank)["units"] == 2  # history kept
    res = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "API rate limit"}).get_json()
    assert [r["text"] for r in res["results"]] == ["The API rate limit is 500 requests per minute."]


def test_idempotency_key_is_one_check_with_one_code(client, services):
    bank = "idem-one-check"
    url = f"/v1/default/banks/{bank}/memories"
    body = {"items": [{"content": "Kim: the lab opens at eight."}]}
    for payload, headers in [({**body, "idempotency_key": "k\u0000"}, {}),
                             ({**body, "idempotency_key": ""}, {}),
                             (body, {"Idempotency-Key": "k" * 201}),
                             ({**body, "idempotency_key": "a"}, {"Idempotency-Key": "b"}),
                             ({**body, "idempotency_key": 7}, {})]:
        r = client.post(url, json=payload, headers=headers)
        assert r.status_code == 400, (payload, headers)
        assert r.get_json()["error"]["code"] == "invalid_idempotency_key"
    assert db_counts(services, bank)["jobs"] == 0
    a = client.post(url, json={**body, "idempotency_key": "same", "async": False}).get_json()
    b = client.post(url, json={**body, "async": False}, headers={"Idempotency-Key": "same"})
    assert b.get_json()["operation_id"] == a["operation_id"]


def test_reused_key_with_a_different_body_is_409_and_stores_nothing(client, worker, services):
    """Break-it finding: the same Idempotency-Key with another body answered 202 with the
    first job, and the new content was silently dropped."""
    bank = "idem-reuse"
    url = f"/v1/default/banks/{bank}/memories"
    first = {"items": [{"content": "idempotent item", "document_id": "d1"}], "async": False}
    r1 = client.post(url, json=first, headers={"Idempotency-Key": "key-1"})
    assert r1.status_code == 200
    again = client.post(url, json=first, headers={"Idempotency-Key": "key-1"})
    assert again.status_code == 200 and again.get_json()["operation_id"] == r1.get_json()["operation_id"]
    other = {"items": [{"content": "DIFFERENT body", "document_id": "d1"}], "async": False}
    r2 = client.post(url, json=other, headers={"Idempotency-Key": "key-1"})
    assert r2.status_code == 409, r2.get_json()
    err = r2.get_json()["error"]
    assert err["code"] == "idempotency_key_reused"
    assert err["details"]["operation_id"] == r1.get_json()["operation_id"]
    with services.pool.connection() as conn:
        texts = [r["text"] for r in conn.execute(
            "SELECT text FROM memory_units WHERE bank_id = %s", (bank,)).fetchall()]
    assert texts == ["idempotent item"]
    assert db_counts(services, bank)["jobs"] == 1


def test_async_answer_is_the_job_as_committed_even_when_a_worker_is_faster(services):
    """The answer to an async retain says the job was accepted (``queued``) even when the
    worker has already run it to the end before the answer is written: here the enqueuer
    runs every stage in-process before it returns."""
    from api.app import create_app
    from rcll.retain import stages

    ran = []

    def instant(task: str, job_id: str) -> None:
        stages.run_sync(services.retain_context(), job_id)
        ran.append(job_id)

    c = create_app(services=services, enqueue=instant).test_client()
    bank = "idem-fast-worker"
    r = c.post(f"/v1/default/banks/{bank}/memories",
               json={"items": [{"content": "The fast worker finished first."}]})
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert ran == [body["operation_id"]]
    assert body["state"] == "queued" and body["async"] is True
    got = c.get(f"/v1/default/banks/{bank}/operations/{body['operation_id']}").get_json()
    assert got["state"] == "succeeded"
