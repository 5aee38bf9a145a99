"""The extract stage and closets in a real Celery worker in ``litellm`` mode, the LLM replaced
only at the litellm boundary by the replay stand-in (``rcll-replay``, scripted by file).

The module swaps the session's chunk-mode worker for one started with the LLM settings (same
PostgreSQL and Redis), and puts the chunk-mode worker back at the end.
"""

import json
import time

import pytest

from rcll.dev import processes, stack
from tests.conftest import wait_job

TS = "2023-05-08T13:56:00+00:00"


def facts_reply(*facts):
    return {"json": {"facts": list(facts)}}


SCRIPTS = [
    {"match": "MARK-VALID", "replies": [facts_reply(
        {"text": "Alice moved to Lisbon in 2021.", "kind": "event", "entities": ["Alice", "Lisbon"],
         "occurred_start": "2021-06-01"},
        {"text": "Alice likes the trams of Lisbon.", "kind": "preference",
         "entities": ["Alice", "Lisbon"], "occurred_start": "1999-01-01", "caused_by": [0]},
        {"text": "Bob helped Alice move yesterday.", "kind": "event", "entities": ["Bob", "Alice"],
         "occurred_start": "2023-05-07"})]},
    {"match": "MARK-JSON-ONCE", "replies": [{"content": '{"facts": [{"text": "broken'},
                                            facts_reply({"text": "Fact after a bad reply."})]},
    {"match": "MARK-TIMEOUT-ONCE", "replies": [{"error": "timeout"},
                                               facts_reply({"text": "Fact after a timeout."})]},
    {"match": "MARK-RATE-ONCE", "replies": [{"error": "rate_limit"},
                                            facts_reply({"text": "Fact after a rate limit."})]},
    {"match": "MARK-ALWAYS-BAD", "replies": [{"content": "Sure! Here are the facts: none"}]},
    {"match": "MARK-EMPTY", "replies": [{"content": ""}]},
    {"match": "MARK-OLD", "replies": [facts_reply({"text": "Dana works at Acme.",
                                                   "entities": ["Dana", "Acme"]})]},
    {"match": "MARK-NEW", "replies": [facts_reply({"text": "Dana now works at Globex.",
                                                   "entities": ["Dana", "Globex"],
                                                   "supersedes": ["E1"]})]},
    {"match": "MARK-DOWN", "replies": [{"error": "unavailable"}]},
    {"match": "MARK-SLOW", "replies": [{"delay_s": 0.6, "json": {"facts": [
        {"text": "Slow fact one."}, {"text": "Slow fact two."}]}}]},
]


@pytest.fixture(scope="module")
def llm_settings(settings, tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "replay.json"
    path.write_text(json.dumps({"scripts": SCRIPTS, "default": "echo"}))
    return settings.model_copy(update={
        "llm_provider": "litellm", "llm_model": "rcll-replay/test", "llm_replay_path": path,
        "llm_backoff_s": 0.01, "llm_max_retries": 2, "llm_input_cost_per_token": 1e-6,
        "llm_output_cost_per_token": 2e-6, "llm_health_ttl_s": 0, "closet_max_units": 10,
        "closet_min_units": 10**9, "closet_check_interval_s": 3600})  # beat checks: no-ops


@pytest.fixture(scope="module")
def llm_worker(worker, settings, llm_settings):
    run_dir = settings.run_dir.resolve()
    processes.stop(run_dir, "worker")  # chunk-mode worker: must not take these jobs
    stack.start_worker(llm_settings, name="worker-llm", log=lambda *_: None)
    yield llm_settings
    processes.stop(run_dir, "worker-llm")
    stack.start_worker(settings, name="worker", log=lambda *_: None)


@pytest.fixture(scope="module")
def llm_svc(llm_settings):
    from rcll.bootstrap import bootstrap

    svc = bootstrap(llm_settings)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def llm_client(llm_svc, llm_worker):
    from api.app import create_app

    llm_svc.embedder.get()
    return create_app(services=llm_svc).test_client()


def retain(client, bank, items):
    resp = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items})
    assert resp.status_code == 200, resp.get_json()
    return wait_job(client, bank, resp.get_json()["operation_id"], timeout_s=120)


def q(svc, sql, *params):
    with svc.pool.connection() as conn:
        return conn.execute(sql, params).fetchall()


def test_facts_stored_with_links_dates_version_and_usage(llm_client, llm_svc):
    op = retain(llm_client, "llm-valid", [{"content": "Alice: I moved to Lisbon in 2021 and I love "
                                           "the trams. Bob helped me yesterday. MARK-VALID",
                                           "timestamp": TS, "document_id": "d1"}])
    assert op["state"] == "succeeded", op
    assert op["counts"]["facts_created"] == 3 and op["counts"]["chunks_extracted"] == 1
    rows = q(llm_svc, """SELECT id, text, kind, origin, extraction_version, entity_names,
                                occurred_start, mentioned_at, chunk_hash FROM memory_units
                         WHERE bank_id = 'llm-valid' AND origin = 'derived' ORDER BY text""")
    by_text = {r["text"]: r for r in rows}
    assert set(by_text) == {"Alice moved to Lisbon in 2021.", "Alice likes the trams of Lisbon.",
                            "Bob helped Alice move yesterday."}
    assert {r["extraction_version"] for r in rows} == {"extract_facts/1"}
    moved, likes, bob = (by_text["Alice moved to Lisbon in 2021."],
                         by_text["Alice likes the trams of Lisbon."],
                         by_text["Bob helped Alice move yesterday."])
    assert (moved["kind"], likes["kind"]) == ("event", "preference")
    assert moved["entity_names"] == ["Alice", "Lisbon"]
    assert moved["occurred_start"].isoformat().startswith("2021-06-01")  # year in the text
    assert likes["occurred_start"] is None  # 1999 is nowhere in the text or the item's time
    assert bob["occurred_start"].isoformat().startswith("2023-05-07")  # "yesterday"
    assert {r["mentioned_at"].isoformat() for r in rows} == {TS}
    chunk = q(llm_svc, "SELECT id FROM memory_units WHERE bank_id = 'llm-valid' AND kind = 'chunk'")
    assert len(chunk) == 1  # the chunk unit stays
    links = q(llm_svc, "SELECT from_unit, to_unit, type FROM memory_links WHERE bank_id = 'llm-valid'")
    derived = {(r["from_unit"], r["to_unit"]) for r in links if r["type"] == "derived_from"}
    assert derived == {(r["id"], chunk[0]["id"]) for r in rows}
    assert [(r["from_unit"], r["to_unit"]) for r in links if r["type"] == "causal"] == [
        (moved["id"], likes["id"])]
    emb = q(llm_svc, "SELECT count(*) AS n FROM memory_embeddings WHERE bank_id = 'llm-valid'")
    assert emb[0]["n"] == 4  # facts are embedded like chunks
    usage = op["llm_usage"]
    assert usage["calls"] == 1 and usage["retries"] == 0 and usage["prompt_tokens"] > 100
    assert usage["cost_usd"] == pytest.approx(
        usage["prompt_tokens"] * 1e-6 + usage["completion_tokens"] * 2e-6, rel=1e-6)


@pytest.mark.parametrize("marker,fact", [("MARK-JSON-ONCE", "Fact after a bad reply."),
                                         ("MARK-TIMEOUT-ONCE", "Fact after a timeout."),
                                         ("MARK-RATE-ONCE", "Fact after a rate limit.")])
def test_a_bad_first_reply_is_retried(llm_client, llm_svc, marker, fact):
    bank = f"llm-{marker.lower()}"
    op = retain(llm_client, bank, [{"content": f"Carol: note {marker}", "timestamp": TS}])
    assert op["state"] == "succeeded", op
    assert op["llm_usage"]["calls"] == 2 and op["llm_usage"]["retries"] == 1
    texts = [r["text"] for r in q(llm_svc, "SELECT text FROM memory_units WHERE bank_id = %s "
                                  "AND origin = 'derived'", bank)]
    assert texts == [fact]


def test_invalid_reply_is_an_item_error_with_raw_reply_and_a_partial_job(llm_client, llm_svc):
    op = retain(llm_client, "llm-partial", [
        {"content": "Erin: first MARK-ALWAYS-BAD", "document_id": "bad"},
        {"content": "Erin: I adopted a cat named Miso.", "document_id": "good"}])
    assert op["state"] == "partial", op
    assert "LLMReplyInvalid" in op["error"] and "Sure! Here are the facts" in op["error"]
    assert op["counts"]["chunks_failed"] == 1 and op["counts"]["chunks_extracted"] == 1
    assert op["item_errors_total"] == 1
    err = op["item_errors"][0]
    assert err["stage"] == "extract" and err["item_index"] == 0
    assert err["raw_reply"] == "Sure! Here are the facts: none"
    assert op["llm_usage"]["calls"] == 4  # 3 attempts for the bad chunk, 1 for the good one
    good = q(llm_svc, "SELECT text FROM memory_units WHERE bank_id = 'llm-partial' AND "
             "origin = 'derived'")
    assert [r["text"] for r in good] == ["Erin said: I adopted a cat named Miso."]  # echo


@pytest.mark.parametrize("marker,needle", [("MARK-ALWAYS-BAD", "Sure! Here are"),
                                           ("MARK-EMPTY", "empty reply")])
def test_all_chunks_failing_fails_the_job_with_the_reason(llm_client, llm_svc, marker, needle):
    bank = f"llm-fail-{marker.lower()}"
    op = retain(llm_client, bank, [{"content": f"Finn: {marker}"}])
    assert op["state"] == "failed", op  # never an empty success
    assert needle in op["error"]
    assert op["counts"]["facts_created"] == 0
    assert op["item_errors"][0]["error"].startswith("LLMReplyInvalid")


def test_provider_down_stops_the_stage_and_fails_the_job(llm_client, llm_svc):
    items = [{"content": f"Hal: note {i} MARK-DOWN", "document_id": f"down{i}"} for i in range(5)]
    op = retain(llm_client, "llm-down", items)
    assert op["state"] == "failed", op
    assert "LLMUnavailable" in op["error"] and "2 chunks not extracted" in op["error"]
    assert op["counts"]["chunks_failed"] == 3 and op["counts"]["chunks_not_extracted"] == 2
    assert op["llm_usage"]["calls"] == 9  # 3 chunks x (1 + 2 retries), then it stopped


def test_supersedes_keeps_the_old_fact(llm_client, llm_svc):
    assert retain(llm_client, "llm-sup", [{"content": "Dana: MARK-OLD"}])["state"] == "succeeded"
    assert retain(llm_client, "llm-sup", [{"content": "Dana: MARK-NEW"}])["state"] == "succeeded"
    rows = {r["text"]: r for r in q(llm_svc, """SELECT id, text, superseded_by_id,
            invalidated_reason FROM memory_units WHERE bank_id = 'llm-sup' AND origin = 'derived'""")}
    old, new = rows["Dana works at Acme."], rows["Dana now works at Globex."]
    assert old["superseded_by_id"] == new["id"] and old["invalidated_reason"] is None
    links = q(llm_svc, "SELECT from_unit, to_unit FROM memory_links WHERE type = 'supersedes' "
              "AND bank_id = 'llm-sup'")
    assert [(r["from_unit"], r["to_unit"]) for r in links] == [(new["id"], old["id"])]


def test_retaining_the_same_document_again_keeps_its_facts_live(llm_client, llm_svc):
    item = {"content": "Gina: I planted tomatoes. They grew fast.", "document_id": "g1"}
    first = retain(llm_client, "llm-again", [item])
    second = retain(llm_client, "llm-again", [item])
    assert first["counts"]["facts_created"] == 2 and second["state"] == "succeeded"
    live = q(llm_svc, "SELECT count(*) AS n FROM memory_units WHERE bank_id = 'llm-again' AND "
             "origin = 'derived' AND invalidated_reason IS NULL")
    assert live[0]["n"] == 2


def test_readyz_reports_the_llm(llm_client, client):
    llm = llm_client.get("/readyz").get_json()["checks"]["llm"]
    assert llm == {"provider": "litellm", "model": "rcll-replay/test", "ok": True}
    assert client.get("/readyz").get_json()["checks"]["llm"] == {"provider": "none", "ok": True}


def test_closets_made_on_request_stored_embedded_and_recalled(llm_client, llm_svc):
    items = [{"content": f"Hana: sprint {i} of the billing service shipped the invoice export.",
              "document_id": f"h{i}", "timestamp": TS} for i in range(6)]
    assert retain(llm_client, "llm-closet", items)["state"] == "succeeded"
    resp = llm_client.post("/v1/default/banks/llm-closet/closets", json={})
    assert resp.status_code == 202, resp.get_json()
    op = wait_job(llm_client, "llm-closet", resp.get_json()["operation_id"])
    assert op["state"] == "succeeded", op
    assert op["kind"] == "closets" and op["counts"]["closets_created"] >= 1
    listed = llm_client.get("/v1/default/banks/llm-closet/closets").get_json()
    assert listed["total"] == op["counts"]["closets_created"]
    closet = listed["closets"][0]
    assert closet["embedded"] is True and closet["prompt_version"] == "summarize_closet/1"
    assert closet["model"] == "rcll-replay/test"
    assert 1 <= len(closet["source_unit_ids"]) <= 10  # closet_max_units
    unit = q(llm_svc, "SELECT kind, origin, text FROM memory_units WHERE id = %s",
             closet["unit_id"])[0]
    assert (unit["kind"], unit["origin"]) == ("summary", "derived")
    assert unit["text"] == closet["summary"]
    sources = q(llm_svc, "SELECT to_unit::text AS u FROM memory_links WHERE from_unit = %s AND "
                "type = 'derived_from'", closet["unit_id"])
    assert {r["u"] for r in sources} == set(closet["source_unit_ids"])
    recall = llm_client.post("/v1/default/banks/llm-closet/memories/recall",
                             json={"query": closet["summary"][:80], "limit": 50}).get_json()
    # returned itself, or folded into a near-identical source turn it summarises (cosine >
    # 0.88: post-processing collapses duplicates within a result and lists them)
    assert any(r["id"] == closet["unit_id"] or closet["unit_id"] in r["collapsed"]
               for r in recall["results"])


def test_closet_check_enqueues_groups_past_the_threshold(llm_client, llm_svc, llm_worker):
    from rcll.consolidate import closets
    from workers.celery_app import make_celery
    from workers.queues import CLOSETS_TASK

    items = [{"content": f"Ines: deploy {i} of the payment gateway went out.", "document_id": f"i{i}"}
             for i in range(4)]
    assert retain(llm_client, "llm-beat", items)["state"] == "succeeded"
    celery = make_celery(llm_worker)
    sent: list[str] = []

    def send(job_id):
        sent.append(job_id)
        celery.send_task(CLOSETS_TASK, args=[job_id], queue="consolidate")

    assert closets.enqueue_due(llm_svc.pool, False, 1, send, bank_id="llm-beat") == []  # chunk mode
    assert closets.enqueue_due(llm_svc.pool, True, 100, send, bank_id="llm-beat") == []  # too few
    made = closets.enqueue_due(llm_svc.pool, True, 3, send, bank_id="llm-beat")
    assert len(made) == 1 and sent == made
    op = wait_job(llm_client, "llm-beat", made[0])
    assert op["state"] == "succeeded" and op["counts"]["closets_created"] == 1
    # the group's units are now older than its closet: nothing is due any more
    assert closets.enqueue_due(llm_svc.pool, True, 3, send, bank_id="llm-beat") == []


def test_a_lost_closets_job_is_resent_by_the_sweep(llm_client, llm_svc):
    """A closets job whose message never reached the broker is found by the recovery sweep
    (beat) by its stage name and sent to the closets task, not to the retain stages."""
    from rcll.consolidate import closets

    items = [{"content": f"Jo: backup {i} of the archive finished.", "document_id": f"j{i}"}
             for i in range(3)]
    assert retain(llm_client, "llm-lost", items)["state"] == "succeeded"
    with llm_svc.pool.connection() as conn, conn.transaction():
        job = closets.create_job(conn, "llm-lost", None, None)  # never sent
    op = wait_job(llm_client, "llm-lost", str(job["id"]), timeout_s=60)
    assert op["state"] == "succeeded" and op["kind"] == "closets", op
    assert op["counts"]["closets_created"] >= 1


def test_closets_in_chunk_mode_are_refused(client):
    client.post("/v1/default/banks/chunk-closet/memories",
                json={"items": [{"content": "x y z"}], "async": False})
    resp = client.post("/v1/default/banks/chunk-closet/closets", json={})
    assert resp.status_code == 400
    assert resp.get_json()["error"]["code"] == "llm_not_configured"


@pytest.mark.slow
def test_killed_worker_mid_extraction_duplicates_nothing(llm_client, llm_svc, llm_settings):
    bank = "llm-crash"
    items = [{"content": f"Ivan: step {i} of the move MARK-SLOW", "document_id": f"c{i}"}
             for i in range(12)]
    resp = llm_client.post(f"/v1/default/banks/{bank}/memories", json={"items": items})
    op_id = resp.get_json()["operation_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until extraction is under way
        n = q(llm_svc, "SELECT count(*) AS n FROM memory_units WHERE bank_id = %s AND "
              "origin = 'derived'", bank)[0]["n"]
        if n >= 4:
            break
        time.sleep(0.05)
    run_dir = llm_settings.run_dir.resolve()
    processes.kill(run_dir, "worker-llm")
    mid = llm_client.get(f"/v1/default/banks/{bank}/operations/{op_id}").get_json()
    assert mid["state"] == "running" and mid["stage"] == "extract"
    facts_at_kill = q(llm_svc, "SELECT count(*) AS n FROM memory_units WHERE bank_id = %s AND "
                      "origin = 'derived'", bank)[0]["n"]
    assert 4 <= facts_at_kill < 24
    stack.start_worker(llm_settings, name="worker-llm", log=lambda *_: None)
    final = wait_job(llm_client, bank, op_id, timeout_s=180)
    assert final["state"] == "succeeded", final
    assert final["lease_expiries"] >= 1 and final["counts"]["facts_created"] == 24
    rows = q(llm_svc, """SELECT count(*) AS units, count(DISTINCT (document_id, chunk_hash)) AS keys
                         FROM memory_units WHERE bank_id = %s AND origin = 'derived'""", bank)[0]
    assert rows["units"] == rows["keys"] == 24
    links = q(llm_svc, "SELECT count(*) AS n FROM memory_links WHERE bank_id = %s AND "
              "type = 'derived_from'", bank)[0]["n"]
    assert links == 24
    emb = q(llm_svc, "SELECT count(*) AS n FROM memory_embeddings WHERE bank_id = %s", bank)[0]["n"]
    assert emb == 36  # 12 chunks + 24 facts, each once
