"""Issue 25 item 2: Hindsight 1.1's non-LLM families on RCLL — documents (chunks, history,
PATCH, reprocess, one chunk), memories (history, PATCH as ``correct``, revision-checked),
operations (retry, cancel, delete) and the audit log — through the real stack
(PostgreSQL, Redis, the Celery worker) and, where the package has the method, through the
real ``hindsight-client`` 1.1.0 over HTTP, each answer parsed by the model the client
declares. A member who may not see a unit gets 404, never the unit; bad input is a 4xx; a
retried failed job really runs again on the worker; a cancelled job really stops."""

from __future__ import annotations

import dataclasses
import io
import time

import pytest

from tests.access.conftest import (  # noqa: F401  (fixtures)
    ADMIN,
    auth_app,
    auth_services,
    auth_settings,
    bearer,
    enqueued,
    make_member,
)
from tests.conftest import serving, wait_job

hindsight_client = pytest.importorskip("hindsight_client")
from hindsight_client import Hindsight  # noqa: E402
from hindsight_client.hindsight_client import _run_async  # noqa: E402
from hindsight_client_api import models as M  # noqa: E402
from hindsight_client_api.exceptions import ApiException  # noqa: E402

B = "/v1/default/banks/{}"


def paragraphs(tag: str, n: int = 3, words: int = 130) -> str:
    """``n`` paragraphs of distinct words, each about as long as one chunk."""
    out = []
    for p in range(n):
        out.append(" ".join(f"{tag}{p}w{i}" if i % 7 else f"Station {tag} logs wind {p}.{i}."
                            for i in range(words)))
    return "\n\n".join(out)


@pytest.fixture(scope="module")
def hs(app):
    """The real Hindsight client against the suite's app, served over HTTP."""
    with serving(app, "hs-families") as url:
        yield Hindsight(base_url=url, timeout=60)


def retain(client, bank: str, items: list[dict]) -> dict:
    r = client.post(B.format(bank) + "/memories", json={"items": items, "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()
    return r.get_json()


def live_units(client, bank: str, document_id: str) -> list[dict]:
    r = client.get(B.format(bank) + f"/memories/list?document_id={document_id}&limit=1000")
    assert r.status_code == 200, r.get_json()
    return r.get_json()["items"]


def wait_state(services, job_id: str, states: tuple[str, ...], timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with services.pool.connection() as conn:
            row = conn.execute("SELECT state, stage, attempts, lease_owner, counts, error "
                               "FROM jobs WHERE id = %s", (job_id,)).fetchone()
        if row is not None and row["state"] in states:
            return row
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} not in {states}: {row}")


# -- documents -----------------------------------------------------------------------------

def test_document_chunks_history_tags_and_reprocess(client, services, worker, hs):
    bank = "hs-fam-docs"
    client.delete(B.format(bank))
    first = paragraphs("k")
    retain(client, bank, [{"content": first, "document_id": "manual", "tags": ["draft"],
                           "metadata": {"source": "wiki"}}])
    doc = client.get(B.format(bank) + "/documents/manual").get_json()

    chunks = _run_async(hs.documents.list_document_chunks(bank, "manual"))
    assert isinstance(chunks, M.ListChunksResponse) and chunks.total >= 2
    assert [c.chunk_index for c in chunks.items] == list(range(chunks.total))
    assert "\n\n".join(c.chunk_text for c in chunks.items) == doc["original_text"]
    assert {c.document_id for c in chunks.items} == {"manual"}
    page = client.get(B.format(bank) + "/documents/manual/chunks?limit=1&offset=1").get_json()
    assert page["total"] == chunks.total and [c["chunk_id"] for c in page["items"]] == \
        [chunks.items[1].chunk_id]
    one = _run_async(hs.documents.get_chunk(chunks.items[0].chunk_id))
    assert isinstance(one, M.ChunkResponse)
    assert (one.bank_id, one.document_id, one.chunk_index) == (bank, "manual", 0)
    assert one.chunk_text == chunks.items[0].chunk_text

    # a second version: the history has both, newest first, with what each did
    second = first.split("\n\n")[0] + "\n\n" + paragraphs("z", n=1)
    retain(client, bank, [{"content": second, "document_id": "manual", "tags": ["draft"]}])
    h = _run_async(hs.documents.get_document_history(bank, "manual"))
    assert isinstance(h, M.DocumentHistoryResponse) and h.total == 2
    assert [e.kind.value for e in h.items] == ["retain", "retain"]
    raw = client.get(B.format(bank) + "/documents/manual/history").get_json()
    assert [e["revision"] for e in raw["items"]] == [2, 1] and raw["revision"] == 2
    now = client.get(B.format(bank) + "/documents/manual/chunks").get_json()["items"]
    kept = {c.chunk_text for c in chunks.items} & {c["chunk_text"] for c in now}
    assert kept and len(kept) < chunks.total  # the first paragraph's chunks stayed
    assert raw["items"][1]["facts_added"] == chunks.total
    assert raw["items"][0]["facts_removed"] == chunks.total - len(kept)
    assert raw["items"][0]["facts_added"] == len(now) - len(kept)
    assert h.items[0].operation_id and h.items[0].created_at is not None
    old_chunk = chunks.items[-1].chunk_id  # of version 1 only: still readable by id (history)
    assert client.get(f"/v1/default/chunks/{old_chunk}").status_code == 200
    assert old_chunk not in {c["chunk_id"] for c in client.get(
        B.format(bank) + "/documents/manual/chunks").get_json()["items"]}

    # PATCH: the tags replace the document's and its units'
    up = _run_async(hs.documents.update_document(
        bank, "manual", M.UpdateDocumentRequest(tags=["ops", "v2"])))
    assert isinstance(up, M.UpdateDocumentResponse) and up.success is True
    units = live_units(client, bank, "manual")
    assert units and all(u["tags"] == ["ops", "v2"] for u in units)
    assert client.get(B.format(bank) + "/documents/manual").get_json()["tags"] == ["ops", "v2"]
    rec = client.post(B.format(bank) + "/memories/recall",
                      json={"query": "Station z logs wind", "tags": ["draft"],
                            "tags_match": "any_strict"}).get_json()
    assert rec["results"] == []
    rec = client.post(B.format(bank) + "/memories/recall",
                      json={"query": "Station z logs wind", "tags": ["v2"],
                            "tags_match": "any_strict"}).get_json()
    assert rec["results"] and all(r["tags"] == ["ops", "v2"] for r in rec["results"])
    retag = client.get(B.format(bank) + "/documents/manual/history").get_json()["items"][0]
    assert retag["kind"] == "retag" and retag["revision"] == 2
    cleared = client.patch(B.format(bank) + "/documents/manual", json={"tags": []})
    assert cleared.status_code == 200 and cleared.get_json()["tags"] == []
    assert all(u["tags"] == [] for u in live_units(client, bank, "manual"))

    # reprocess: a new operation on the worker makes revision 3 from the stored text
    before = sorted(u["text"] for u in live_units(client, bank, "manual"))
    text = client.get(B.format(bank) + "/documents/manual").get_json()["original_text"]
    rp = _run_async(hs.documents.reprocess_document(bank, "manual"))
    assert isinstance(rp, M.ReprocessDocumentResponse) and rp.success and rp.items_count == 1
    op = wait_job(client, bank, rp.operation_id)
    assert op["state"] == "succeeded" and op["counts"]["reprocess"] == "manual", op
    after = client.get(B.format(bank) + "/documents/manual").get_json()
    assert after["revision"] == 3 and after["original_text"] == text
    assert sorted(u["text"] for u in live_units(client, bank, "manual")) == before
    top = client.get(B.format(bank) + "/documents/manual/history").get_json()["items"][0]
    assert (top["kind"], top["revision"], top["operation_id"]) == ("reprocess", 3,
                                                                   rp.operation_id)
    audit = client.get(f"/banks/{bank}/audit?action=document.reprocess").get_json()
    assert audit["entries"][0]["details"]["operation_id"] == rp.operation_id


def test_document_routes_refuse_bad_input(client, hs):
    bank = "hs-fam-docs-bad"
    retain(client, bank, [{"content": "The ferry leaves at noon.", "document_id": "ferry"}])
    P = B.format(bank) + "/documents/ferry"
    for body, code in (({}, "invalid_request"), ({"tags": "ops"}, "invalid_request"),
                       ({"tags": [""]}, "invalid_request"), ({"tagz": ["x"]}, "invalid_request"),
                       ({"observation_scopes": "shared"}, "unsupported_hindsight_value")):
        r = client.patch(P, json=body)
        assert (r.status_code, r.get_json()["error"]["code"]) == (400, code), body
    assert client.patch(P, data="{", content_type="application/json").status_code == 400
    for path in ("/documents/nope/chunks", "/documents/nope/history"):
        r = client.get(B.format(bank) + path)
        assert (r.status_code, r.get_json()["error"]["code"]) == (404, "document_not_found")
    r = client.patch(B.format(bank) + "/documents/nope", json={"tags": ["x"]})
    assert r.status_code == 404
    r = client.post(B.format(bank) + "/documents/nope/reprocess")
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "document_not_found")
    assert client.get(P + "/chunks?limit=0").get_json()["error"]["code"] == "invalid_paging"
    for cid in ("not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        r = client.get(f"/v1/default/chunks/{cid}")
        assert (r.status_code, r.get_json()["error"]["code"]) == (404, "chunk_not_found")
    with pytest.raises(ApiException) as exc:
        _run_async(hs.documents.get_chunk("00000000-0000-0000-0000-000000000000"))
    assert exc.value.status == 404


# -- memories ------------------------------------------------------------------------------

def test_memory_patch_is_correct_with_revision_check_and_history(client, hs):
    bank = "hs-fam-mem"
    client.delete(B.format(bank))
    made = client.post(B.format(bank) + "/units", json={"text": "Iris sails on Tuesdays."})
    assert made.status_code == 201
    uid = made.get_json()["id"]
    got = client.get(B.format(bank) + f"/memories/{uid}")
    assert got.headers["ETag"] == '"1"'

    out = _run_async(hs.memory.update_memory(bank, uid, M.UpdateMemoryRequest(
        text="Iris sails on Thursdays.", fact_type="world", entities=["Iris"],
        context="club notes")))
    assert out["text"] == "Iris sails on Thursdays." and out["revision"] == 2
    assert out["context"] == "club notes" and out["success"] is True
    assert out["ignored_fields"] == ["entities", "fact_type", "resolve_entities"]
    P = B.format(bank) + f"/memories/{uid}"
    stale = client.patch(P, json={"text": "Iris sails daily."}, headers={"If-Match": '"1"'})
    assert stale.status_code == 409
    assert stale.get_json()["error"]["code"] == "revision_conflict"
    assert stale.get_json()["error"]["details"]["current_revision"] == 2
    ok = client.patch(P, json={"text": "Iris sails daily.", "fact_type": "decision"},
                      headers={"If-Match": 'W/"2"'})
    assert ok.status_code == 200 and ok.headers["ETag"] == '"3"'
    assert ok.get_json()["kind"] == "decision"
    assert client.patch(P, json={"text": "x", "revision": 2}).status_code == 409
    for body, headers, code in (
            ({"text": "y"}, {"If-Match": "three"}, "invalid_request"),
            ({"text": "y", "revision": 2}, {"If-Match": '"3"'}, "invalid_request"),
            ({"state": "invalidated"}, {}, "unsupported_hindsight_value"),
            ({"state": "gone"}, {}, "invalid_request"),
            ({"fact_type": "observation"}, {}, "unsupported_hindsight_value"),
            ({"txet": "typo"}, {}, "invalid_request"),
            ({}, {}, "invalid_request"),
            ({"text": 5}, {}, "invalid_request")):
        r = client.patch(P, json=body, headers=headers)
        assert (r.status_code, r.get_json()["error"]["code"]) == (400, code), body
    bad = client.patch(B.format(bank) + "/memories/not-a-uuid", json={"text": "z"})
    assert bad.get_json()["error"]["code"] == "invalid_unit_id"

    new = client.post(f"/banks/{bank}/units/{uid}/supersede",
                      json={"revision": 3, "text": "Iris stopped sailing."})
    assert new.status_code == 201
    nid = new.get_json()["unit"]["id"]
    h = _run_async(hs.memory.get_observation_history(bank, uid))  # GET …/memories/{id}/history
    assert h["state"] == "superseded" and h["superseded_by"]["id"] == nid
    assert [r["revision"] for r in h["revisions"]] == [3, 2, 1]
    assert [r["text"] for r in h["revisions"]] == ["Iris sails daily.", "Iris sails on Thursdays.",
                                                   "Iris sails on Tuesdays."]
    h2 = client.get(B.format(bank) + f"/memories/{nid}/history").get_json()
    assert h2["state"] == "valid" and [s["id"] for s in h2["supersedes"]] == [uid]
    assert h2["revisions"] == [] and h2["memory_id"] == nid
    r = client.get(B.format(bank) + "/memories/00000000-0000-0000-0000-000000000000/history")
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "unit_not_found")


# -- operations ----------------------------------------------------------------------------

def test_retry_reruns_a_failed_job_on_the_worker(app, client, services, worker, hs):
    from api.app import create_app

    bank = "hs-fam-retry"
    client.delete(B.format(bank))

    def broker_down(task, job_id):
        raise ConnectionError("broker down")

    down = create_app(services=services, enqueue=broker_down).test_client()
    r = down.post(B.format(bank) + "/memories", json={"async": True, "items": [
        {"content": "Juno repairs the lighthouse lamp.", "document_id": "juno"}]})
    assert r.status_code == 503 and r.get_json()["error"]["code"] == "queue_unavailable"
    op_id = r.get_json()["error"]["details"]["operation_id"]
    failed = client.get(B.format(bank) + f"/operations/{op_id}").get_json()
    assert failed["state"] == "failed" and failed["error"].startswith("enqueue failed")
    assert live_units(client, bank, "juno") == []

    re = _run_async(hs.operations.retry_operation(bank, op_id))
    assert isinstance(re, M.RetryOperationResponse) and re.success and re.operation_id == op_id
    done = wait_job(client, bank, op_id)
    assert done["state"] == "succeeded" and done["error"] is None, done
    assert done["counts"]["retries"] == 1 and done["attempts"] == 1
    assert [u["text"] for u in live_units(client, bank, "juno")] == \
        ["Juno repairs the lighthouse lamp."]
    again = client.post(B.format(bank) + f"/operations/{op_id}/retry")
    assert (again.status_code, again.get_json()["error"]["code"]) == (409,
                                                                      "operation_not_retryable")
    audit = client.get(f"/banks/{bank}/audit?action=operation.retry").get_json()["entries"]
    assert [a["details"]["operation_id"] for a in audit] == [op_id]

    # a file that cannot be converted fails again when retried: it really ran again
    up = client.post(B.format(bank) + "/files/retain", content_type="multipart/form-data",
                     data={"files": [(io.BytesIO(b"%PDF-1.4 not really"), "broken.pdf")]})
    fid = up.get_json()["operation_ids"][0]
    first = wait_job(client, bank, fid)
    assert first["state"] == "failed" and first["attempts"] == 1
    assert client.post(B.format(bank) + f"/operations/{fid}/retry").status_code == 200
    second = wait_job(client, bank, fid)
    assert second["state"] == "failed" and second["attempts"] == 2
    assert second["error"] == first["error"] and second["counts"]["retries"] == 1
    assert second["finished_at"] > first["finished_at"]

    for op, code in (("00000000-0000-0000-0000-000000000000", 404), ("nope", 404)):
        r = client.post(B.format(bank) + f"/operations/{op}/retry")
        assert (r.status_code, r.get_json()["error"]["code"]) == (code, "operation_not_found")


def test_cancel_a_queued_job_it_never_runs(app, client, services, worker, hs):
    from api.app import create_app

    bank = "hs-fam-cancel-queued"
    client.delete(B.format(bank))
    held: list[str] = []
    holding = create_app(services=services, enqueue=lambda task, job: held.append(job))
    r = holding.test_client().post(B.format(bank) + "/memories", json={"async": True, "items": [
        {"content": "Kai paints the boathouse red.", "document_id": "kai"}]})
    op_id = r.get_json()["operation_id"]
    assert held == [op_id]

    out = _run_async(hs.operations.cancel_operation(bank, op_id))
    assert isinstance(out, M.CancelOperationResponse) and out.success
    st = _run_async(hs.operations.get_operation_status(bank, op_id))
    assert st.status == "cancelled"
    # its message reaches the real worker after all: nothing runs
    app.extensions["rcll_enqueue"]("retain.chunk", op_id)
    later = client.post(B.format(bank) + "/memories", json={"async": True, "items": [
        {"content": "Lia mends nets.", "document_id": "lia"}]}).get_json()["operation_id"]
    assert wait_job(client, bank, later)["state"] == "succeeded"
    time.sleep(1)
    op = client.get(B.format(bank) + f"/operations/{op_id}").get_json()
    assert (op["state"], op["status"], op["attempts"]) == ("cancelled", "cancelled", 0)
    assert live_units(client, bank, "kai") == []
    assert client.get(B.format(bank) + "/operations?status=cancelled").get_json()["total"] == 1
    for job in (op_id, later):  # ended: Hindsight's 409
        r = client.delete(B.format(bank) + f"/operations/{job}")
        assert (r.status_code, r.get_json()["error"]["code"]) == (409, "operation_finished")
    r = client.post(B.format(bank) + f"/operations/{op_id}/retry")
    assert r.status_code == 409


def test_cancel_stops_a_running_job_at_its_next_item(services):
    """The chunk stage as the worker runs it (stages.run_sync: the same stage functions
    under the job's lease), cancelled while it works on its third item."""
    from rcll.access.principal import Principal
    from rcll.retain import stages
    from rcll.retain.models import RetainItem

    bank = "hs-fam-cancel-run"
    items = [RetainItem(content=f"Item {i}: the tide table for pier {i} is posted.",
                        document_id=f"tide-{i}") for i in range(6)]
    job, _ = services.retain_service(lambda *_: None).retain(bank, items, async_=True)
    job_id = str(job["id"])
    ctx = services.retain_context()
    seen = []

    class CancelOnThird:
        def classify(self, text, room, hall):
            seen.append(text)
            if len(seen) == 3:
                services.operations.cancel(Principal.unrestricted(), bank, job_id)
            return ctx.classifier.classify(text, room, hall)

    stages.run_sync(dataclasses.replace(ctx, classifier=CancelOnThird()), job_id)
    with services.pool.connection() as conn:
        row = conn.execute("SELECT state, error, payload FROM jobs WHERE id = %s",
                           (job_id,)).fetchone()
        texts = [r["text"] for r in conn.execute(
            "SELECT text FROM memory_units WHERE job_id = %s ORDER BY text", (job_id,))]
        vectors = conn.execute("SELECT count(*) AS n FROM memory_embeddings e JOIN memory_units "
                               "u ON u.id = e.unit_id WHERE u.job_id = %s",
                               (job_id,)).fetchone()["n"]
    assert row["state"] == "cancelled" and row["error"] == "cancelled by request"
    assert row["payload"] is None
    assert len(seen) == 3  # it stopped at the item it was on: no fourth item was read
    assert texts == [items[0].content, items[1].content]  # stored before the cancel
    assert vectors == 0  # no later stage ran


def test_cancel_stops_a_running_job_on_the_worker(client, services, worker):
    bank = "hs-fam-cancel-worker"
    client.delete(B.format(bank))
    items = [{"content": paragraphs(f"w{n}x", n=4, words=100), "document_id": f"big-{n}"}
             for n in range(40)]
    r = client.post(B.format(bank) + "/memories", json={"async": True, "items": items})
    assert r.status_code == 200, r.get_json()
    op_id = r.get_json()["operation_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # cancel once it has stored some of its items
        with services.pool.connection() as conn:
            if conn.execute("SELECT count(*) AS n FROM memory_units WHERE job_id = %s",
                            (op_id,)).fetchone()["n"]:
                break
        time.sleep(0.02)
    c = client.delete(B.format(bank) + f"/operations/{op_id}")
    assert c.status_code == 200, c.get_json()
    at_cancel = c.get_json()["operation"]
    assert at_cancel["state"] == "cancelled" and at_cancel["status"] == "cancelled"

    def written():
        with services.pool.connection() as conn:
            return conn.execute(
                """SELECT (SELECT count(*) FROM memory_units WHERE job_id = %(j)s) AS units,
                          (SELECT count(*) FROM memory_embeddings e JOIN memory_units u
                             ON u.id = e.unit_id WHERE u.job_id = %(j)s) AS vectors,
                          (SELECT lease_owner FROM jobs WHERE id = %(j)s) AS owner""",
                {"j": op_id}).fetchone()

    deadline = time.monotonic() + 30
    while written()["owner"] is not None and time.monotonic() < deadline:
        time.sleep(0.1)  # the worker's stage returns and releases its lease
    stopped = written()
    assert stopped["owner"] is None
    time.sleep(2)
    assert written() == stopped  # nothing more is written for it
    row = wait_state(services, op_id, ("cancelled",))
    assert row["state"] == "cancelled"  # its worker did not end it otherwise
    with services.pool.connection() as conn:
        docs = conn.execute("SELECT count(DISTINCT document_id) AS n FROM memory_units "
                            "WHERE job_id = %s", (op_id,)).fetchone()["n"]
    print("cancelled at", at_cancel["stage"], dict(stopped), docs)
    assert stopped["units"] > 0  # it had stored some before the cancel
    assert docs < len(items) or stopped["vectors"] < stopped["units"]  # it did not finish
    if at_cancel["stage"] == "chunk":
        assert stopped["vectors"] == 0


def test_delete_an_operation_record(app, client, services, worker, hs):
    from api.app import create_app

    bank = "hs-fam-delete-op"
    client.delete(B.format(bank))
    done = retain(client, bank, [{"content": "Mira keeps the harbour log.",
                                  "document_id": "mira"}])
    out = _run_async(hs.operations.delete_operation(bank, done["operation_id"]))
    assert isinstance(out, M.DeleteOperationResponse) and out.success
    r = client.get(B.format(bank) + f"/operations/{done['operation_id']}")
    assert r.status_code == 404
    assert [u["text"] for u in live_units(client, bank, "mira")] == \
        ["Mira keeps the harbour log."]  # the units it stored stay
    assert client.get(B.format(bank) + "/documents/mira/history").get_json()["total"] == 1

    held: list[str] = []
    holding = create_app(services=services, enqueue=lambda task, job: held.append(job))
    q = holding.test_client().post(B.format(bank) + "/memories", json={"async": True, "items": [
        {"content": "Nils rows at dawn.", "document_id": "nils"}]}).get_json()["operation_id"]
    gone = client.delete(B.format(bank) + f"/operations/{q}/delete").get_json()
    assert gone["cancelled"] is True and gone["state"] == "queued"
    app.extensions["rcll_enqueue"]("retain.chunk", q)
    later = client.post(B.format(bank) + "/memories", json={"async": True, "items": [
        {"content": "Oda sings.", "document_id": "oda"}]}).get_json()["operation_id"]
    assert wait_job(client, bank, later)["state"] == "succeeded"
    time.sleep(1)
    assert live_units(client, bank, "nils") == []
    r = client.delete(B.format(bank) + f"/operations/{q}/delete")
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "operation_not_found")
    actions = [a["action"] for a in client.get(f"/banks/{bank}/audit").get_json()["entries"]]
    assert actions.count("operation.delete") == 2


# -- audit logs ----------------------------------------------------------------------------

def test_audit_logs_list_stats_and_entry(client, hs):
    bank = "hs-fam-audit"
    client.delete(B.format(bank))
    retain(client, bank, [{"content": "Pia counts gulls.", "document_id": "pia"}])
    uid = client.post(B.format(bank) + "/units", json={"text": "Quin feeds gulls."}).get_json()["id"]
    client.patch(B.format(bank) + f"/memories/{uid}", json={"text": "Quin feeds terns."})
    ours = client.get(f"/banks/{bank}/audit").get_json()["entries"]

    page = _run_async(hs.audit.list_audit_logs(bank))
    assert isinstance(page, M.AuditLogListResponse) and page.total == len(ours)
    assert [i.action for i in page.items] == [e["action"] for e in ours]
    assert [i.id for i in page.items] == [str(e["id"]) for e in ours]
    assert "unit.correct" in [i.action for i in page.items]
    only = _run_async(hs.audit.list_audit_logs(bank, action="unit.correct", limit=5))
    assert [i.metadata["unit_id"] for i in only.items] == [uid]
    future = _run_async(hs.audit.list_audit_logs(bank, start_date="2999-01-01T00:00:00Z"))
    assert future.total == 0 and future.items == []
    past = _run_async(hs.audit.list_audit_logs(bank, end_date="2000-01-01T00:00:00"))
    assert past.total == 0

    entry = _run_async(hs.audit.get_audit_log(bank, only.items[0].id))
    assert isinstance(entry, M.AuditLogEntry) and entry.action == "unit.correct"
    assert entry.request["from_revision"] == 1 and entry.request["to_revision"] == 2
    stats = _run_async(hs.audit.audit_log_stats(bank, period="1d"))
    assert isinstance(stats, M.AuditLogStatsResponse) and stats.trunc == "hour"
    assert sum(b.total for b in stats.buckets) == len(ours)
    assert sum(b.actions.get("unit.correct", 0) for b in stats.buckets) == 1
    assert client.get(B.format(bank) + "/audit-logs/stats").get_json()["period"] == "7d"
    one = client.get(B.format(bank) + "/audit-logs/stats?action=unit.correct&period=30d")
    assert [b["total"] for b in one.get_json()["buckets"]] == [1]

    for query, code in (("?period=2d", "invalid_request"), ("?transport=http",
                                                             "unsupported_hindsight_value"),
                        ("?start_date=yesterday", "invalid_request"),
                        ("?limit=501", "invalid_paging"), ("?offset=-1", "invalid_paging")):
        path = "/audit-logs/stats" if "period" in query else "/audit-logs"
        r = client.get(B.format(bank) + path + query)
        assert (r.status_code, r.get_json()["error"]["code"]) == (400, code), query
    r = client.get(B.format(bank) + "/audit-logs/abc")
    assert (r.status_code, r.get_json()["error"]["code"]) == (400, "invalid_request")
    r = client.get(B.format(bank) + "/audit-logs/999999999999")
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "audit_entry_not_found")
    other = client.get(B.format("hs-fam-docs-bad") + f"/audit-logs/{entry.id}")
    assert other.status_code == 404  # an entry of another bank


# -- who may see what ----------------------------------------------------------------------

def test_a_member_who_may_not_see_a_unit_gets_404_on_every_family(auth_app):  # noqa: F811
    api = auth_app.test_client()
    bank = "hs-fam-vis"
    tag = str(time.monotonic_ns())[-6:]
    a, b, c = f"fa{tag}", f"fb{tag}", f"fc{tag}"
    ka = make_member(api, a, bank, "write", purposes=["assist", "operate", "audit", "personal"])
    kb = make_member(api, b, bank, "write", purposes=["assist", "operate", "audit", "personal"])
    kc = make_member(api, c)  # no grant on the bank
    A, Bh, C = bearer(ka), bearer(kb), bearer(kc)
    r = api.post(B.format(bank) + "/memories", headers=A, json={"async": False, "items": [
        {"content": "Alder's private note: the safe code is 4412.", "document_id": "secret",
         "audience": a},
        {"content": "The harbour opens at six.", "document_id": "public"}]})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()
    job = r.get_json()["operation_id"]
    private = api.get(B.format(bank) + "/memories/list?document_id=secret",
                      headers=A).get_json()["items"][0]
    chunk = api.get(B.format(bank) + "/documents/secret/chunks", headers=A).get_json()
    assert chunk["total"] == 1 and "4412" in chunk["items"][0]["chunk_text"]
    chunk_id = chunk["items"][0]["chunk_id"]
    assert api.get(f"/v1/default/chunks/{chunk_id}", headers=A).status_code == 200
    assert api.get(B.format(bank) + f"/memories/{private['id']}/history",
                   headers=A).status_code == 200

    D = B.format(bank) + "/documents/secret"
    for method, path, body, code in (
            ("GET", D + "/chunks", None, "document_not_found"),
            ("GET", D + "/history", None, "document_not_found"),
            ("PATCH", D, {"tags": ["leak"]}, "document_not_found"),
            ("POST", D + "/reprocess", None, "document_not_found"),
            ("GET", f"/v1/default/chunks/{chunk_id}", None, "chunk_not_found"),
            ("GET", B.format(bank) + f"/memories/{private['id']}/history", None, "unit_not_found"),
            ("PATCH", B.format(bank) + f"/memories/{private['id']}", {"text": "x"},
             "unit_not_found")):
        for who in (Bh, C):
            resp = api.open(path, method=method, json=body, headers=who)
            if who is C and path.startswith(B.format(bank)):
                assert resp.status_code == 403  # no grant on the bank at all
                continue
            assert (resp.status_code, resp.get_json()["error"]["code"]) == (404, code), \
                (method, path)
            assert "4412" not in resp.get_data(as_text=True)
    # nothing changed for the owner
    assert api.get(D, headers=A).get_json()["tags"] == []
    assert api.get(B.format(bank) + f"/memories/{private['id']}",
                   headers=A).get_json()["revision"] == 1
    # the public document is Bob's to read and retag
    assert api.get(B.format(bank) + "/documents/public/chunks", headers=Bh).get_json()["total"] == 1
    assert api.patch(B.format(bank) + "/documents/public", json={"tags": ["b"]},
                     headers=Bh).status_code == 200
    # the job holding Alder's private item: Bob sees it redacted, and may not change it
    assert api.get(B.format(bank) + f"/operations/{job}", headers=Bh).get_json()["redacted"]
    for method, path in (("DELETE", f"/operations/{job}"), ("DELETE", f"/operations/{job}/delete"),
                         ("POST", f"/operations/{job}/retry")):
        resp = api.open(B.format(bank) + path, method=method, headers=Bh)
        assert (resp.status_code, resp.get_json()["error"]["code"]) == (403, "forbidden")
    # the audit log is a bank admin's
    for path in ("/audit-logs", "/audit-logs/stats", "/audit-logs/1"):
        resp = api.get(B.format(bank) + path, headers=A)
        assert (resp.status_code, resp.get_json()["error"]["code"]) == (403, "forbidden")
    logs = api.get(B.format(bank) + "/audit-logs", headers=ADMIN).get_json()
    assert "document.retag" in [i["action"] for i in logs["items"]]


# -- migration 0026 ------------------------------------------------------------------------

def test_migration_0026_backfills_history_and_allows_cancelled(settings):
    import psycopg
    from alembic import command

    from rcll.dev import postgres
    from rcll.store import migrate

    db = "rcll_mig26"
    postgres.create_database(settings, db, drop=True)
    url = f"postgresql://rcll@127.0.0.1:{settings.pg_port}/{db}"
    migrate.upgrade(settings, url, "0025")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('m', 'm')")
        doc = conn.execute("INSERT INTO documents (bank_id, document_id, content_hash, revision) "
                           "VALUES ('m', 'd', 'h', 4) RETURNING id").fetchone()[0]
        for t, reason in (("live", None), ("old", "document_replaced")):
            conn.execute("INSERT INTO memory_units (bank_id, document_id, text, "
                         "invalidated_reason) VALUES ('m', %s, %s, %s)", (doc, t, reason))
        job = conn.execute("INSERT INTO jobs (bank_id, kind) VALUES ('m', 'retain') "
                           "RETURNING id").fetchone()[0]
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", (job,))
    migrate.upgrade(settings, url, "0026")
    with psycopg.connect(url, autocommit=True) as conn:
        events = conn.execute("SELECT kind, revision, units_added, operation_id "
                              "FROM document_events WHERE document_id = %s", (doc,)).fetchall()
        conn.execute("UPDATE jobs SET state = 'cancelled' WHERE id = %s", (job,))
    assert events == [("retain", 4, 1, None)]
    command.downgrade(migrate.alembic_config(url), "0025")
    with psycopg.connect(url, autocommit=True) as conn:
        state = conn.execute("SELECT state FROM jobs WHERE id = %s", (job,)).fetchone()[0]
        table = conn.execute("SELECT to_regclass('document_events')").fetchone()[0]
    assert (state, table) == ("failed", None)
