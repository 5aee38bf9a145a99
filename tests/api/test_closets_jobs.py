"""``POST …/closets`` through the one job protocol (:func:`rcll.retain.submit.submit_job`):
the job row and its audit entry commit together, the job is enqueued after the commit, and a
refused enqueue fails the job and answers 503. No worker: the enqueuer is a stand-in."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def llm_services(settings, tmp_path_factory):
    from rcll.bootstrap import bootstrap

    path = tmp_path_factory.mktemp("replay") / "replay.json"
    path.write_text(json.dumps({"scripts": [], "default": "echo"}))
    svc = bootstrap(settings.model_copy(update={
        "llm_provider": "litellm", "llm_model": "rcll-replay/test", "llm_replay_path": path}))
    yield svc
    svc.close()


def _client(svc, enqueue):
    from api.app import create_app

    return create_app(services=svc, enqueue=enqueue).test_client()


def _audit(svc, op_id: str) -> list[dict]:
    with svc.pool.connection() as conn:
        return conn.execute("SELECT actor, action, bank_id, details FROM audit_log "
                            "WHERE details->>'operation_id' = %s", (op_id,)).fetchall()


def test_closets_job_is_audited_and_enqueued_after_commit(llm_services):
    sent = []
    c = _client(llm_services, lambda task, job_id: sent.append((task, job_id)))
    assert c.put("/v1/default/banks/closet-jobs", json={}).status_code == 200
    r = c.post("/v1/default/banks/closet-jobs/closets", json={"room": "work"})
    assert r.status_code == 202, r.get_json()
    body = r.get_json()
    assert list(body) == ["operation_id", "status", "operation"]
    assert body["status"] == "queued" and body["operation"]["kind"] == "closets"
    assert sent == [("consolidate.closets", body["operation_id"])]
    [entry] = _audit(llm_services, body["operation_id"])
    assert entry["action"] == "closets.create" and entry["bank_id"] == "closet-jobs"
    assert entry["details"] == {"operation_id": body["operation_id"], "room": "work",
                                "hall": None}


def test_refused_enqueue_fails_the_job_with_503(llm_services):
    def broken(*_):
        raise ConnectionError("broker down")

    c = _client(llm_services, broken)
    assert c.put("/v1/default/banks/closet-jobs-down", json={}).status_code == 200
    r = c.post("/v1/default/banks/closet-jobs-down/closets")
    assert r.status_code == 503
    err = r.get_json()["error"]
    assert err["code"] == "queue_unavailable"
    assert err["message"] == "could not enqueue the job; retry later"
    op = c.get(f"/v1/default/banks/closet-jobs-down/operations/{err['details']['operation_id']}")
    assert op.get_json()["state"] == "failed"
    assert op.get_json()["error"].startswith("enqueue failed")


def test_missing_bank_and_chunk_mode_enqueue_nothing(llm_services, services):
    sent = []
    r = _client(llm_services, lambda *a: sent.append(a)).post(
        "/v1/default/banks/closet-jobs-none/closets")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"
    r = _client(services, lambda *a: sent.append(a)).post("/v1/default/banks/closet-jobs/closets")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "llm_not_configured"
    assert sent == []
