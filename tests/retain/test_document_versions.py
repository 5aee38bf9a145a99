"""Issue 5 faults 1-3: every sequence of versions of a document leaves exactly the latest
version live, with the latest metadata, at one revision, whatever the interleaving."""

import random
import threading

import pytest

from rcll.retain import stages
from rcll.retain.chunking import chunk_text
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain

PARA = {k: " ".join(f"The {k} section sentence {i} describes topic {k}{i} in some detail."
                    for i in range(16)) for k in "ABCDE"}
# one-chunk versions are a single paragraph; two-chunk versions are two paragraphs
VERSIONS = {"A": PARA["A"], "B": PARA["B"], "C": PARA["C"],
            "AB": PARA["A"] + "\n\n" + PARA["B"], "AC": PARA["A"] + "\n\n" + PARA["C"],
            "DB": PARA["D"] + "\n\n" + PARA["B"], "Q": "A short note."}


def _retain(client, bank, content, doc="doc", **extra):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": content, "document_id": doc, **extra}], "async": False})
    assert r.status_code == 200, r.get_json()
    op = r.get_json()["operation"]
    assert op["state"] == "succeeded", op
    return op


def _live(services, bank, doc="doc"):
    with services.pool.connection() as conn:
        return conn.execute(
            """SELECT u.text, u.metadata, u.tags, u.context, u.mentioned_at,
                      (to_jsonb(u)->>'document_revision')::int AS document_revision,
                      (to_jsonb(d)->>'revision')::int AS revision,
                      d.metadata AS doc_metadata, to_jsonb(d)->'tags' AS doc_tags
               FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s AND d.document_id = %s AND u.invalidated_reason IS NULL
               ORDER BY u.text""", (bank, doc)).fetchall()


def _chunks(services, content):
    limit = getattr(services, "chunk_tokens", services.settings.chunk_max_tokens)
    return sorted(chunk_text(content, limit, services.tokens.count_many))


def test_revert_to_earlier_version_is_live(client, services):
    bank = "versions-revert"
    for v in ("A", "B", "A"):
        _retain(client, bank, VERSIONS[v])
    assert [r["text"] for r in _live(services, bank)] == [VERSIONS["A"]]
    res = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "topic A3 section"}).get_json()
    assert res["results"] and res["results"][0]["text"] == VERSIONS["A"]


@pytest.mark.parametrize("sequence", [
    ["A", "B", "A"], ["A", "AB"], ["AB", "A"], ["A", "B", "C", "B"], ["A", "A"],
    ["AB", "AC", "AB"], ["AB", "DB", "AB", "AC"], ["Q", "AB", "Q"], ["AB", "AB", "A", "AB"],
])
def test_every_version_sequence_leaves_the_latest_live(client, services, sequence):
    bank = "versions-" + "-".join(sequence).lower()
    for v in sequence:
        _retain(client, bank, VERSIONS[v])
    live = _live(services, bank)
    assert [r["text"] for r in live] == _chunks(services, VERSIONS[sequence[-1]])
    assert {r["document_revision"] for r in live} == {live[0]["revision"]}


def test_two_paragraph_versions_are_two_chunks(services):
    assert [len(_chunks(services, VERSIONS[v])) for v in ("A", "AB", "AC", "DB")] == [1, 2, 2, 2]


def test_re_retain_refreshes_metadata_tags_and_times(client, services):
    bank = "versions-metadata"
    _retain(client, bank, VERSIONS["AB"], metadata={"v": 1, "old": True}, tags=["one"],
            timestamp="2026-01-01T00:00:00Z", context="first")
    _retain(client, bank, VERSIONS["AB"], metadata={"v": 2}, tags=["two", "three"],
            timestamp="2026-02-02T00:00:00Z", context="second")
    live = _live(services, bank)
    assert len(live) == 2
    for r in live:
        assert r["metadata"] == {"v": 2} and r["tags"] == ["two", "three"]
        assert r["context"] == "second" and r["mentioned_at"].isoformat().startswith("2026-02-02")
        assert r["doc_metadata"] == {"v": 2} and r["doc_tags"] == ["two", "three"]
        assert r["document_revision"] == r["revision"] == 2


def test_changed_chunk_leaves_all_live_chunks_at_one_revision(client, services):
    bank = "versions-one-revision"
    _retain(client, bank, VERSIONS["AB"], metadata={"v": 1})
    _retain(client, bank, VERSIONS["AC"], metadata={"v": 2})  # chunk A unchanged, B → C
    live = _live(services, bank)
    assert [r["text"] for r in live] == _chunks(services, VERSIONS["AC"])
    assert [(r["document_revision"], r["metadata"]) for r in live] == [(2, {"v": 2})] * 2


def _race(services, bank, order):
    """Four jobs (versions A, B, C, AB of one new document, submitted in this order) run
    at once from four threads, started in ``order``; the live texts and the newest job's
    content."""
    ctx = services.retain_context()
    contents = [VERSIONS[v] for v in ("A", "B", "C", "AB")]
    with services.pool.connection() as conn:
        job_ids = [str(submit_retain(conn, bank, [RetainItem(content=c, document_id="doc")])[0]["id"])
                   for c in contents]
    barrier = threading.Barrier(4)
    errors = []

    def run(i):
        try:
            barrier.wait()
            stages.run_sync(ctx, job_ids[i])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    return [r["text"] for r in _live(services, bank)], contents[-1]


def test_racing_versions_of_a_new_document_leave_one_live(services):
    rnd = random.Random(3)
    for trial in range(20):
        order = rnd.sample(range(4), 4)
        live, newest = _race(services, f"versions-race-{trial}", order)
        assert live == _chunks(services, newest), (trial, order)


def test_older_job_finishing_last_does_not_overwrite_newer(services):
    ctx = services.retain_context()
    bank = "versions-older-last"
    with services.pool.connection() as conn:
        old, _ = submit_retain(conn, bank, [RetainItem(content=VERSIONS["A"], document_id="doc")])
        new, _ = submit_retain(conn, bank, [RetainItem(content=VERSIONS["B"], document_id="doc")])
    stages.run_sync(ctx, str(new["id"]))
    stages.run_sync(ctx, str(old["id"]))  # submitted first, runs last
    assert [r["text"] for r in _live(services, bank)] == [VERSIONS["B"]]
    with services.pool.connection() as conn:
        counts = conn.execute("SELECT counts FROM jobs WHERE id = %s", (old["id"],)).fetchone()
    assert counts["counts"]["items_superseded"] == 1


def test_racing_sync_requests_leave_one_live(app, services):
    """Four parallel ``async: false`` requests over HTTP (the API's threads)."""
    for trial in range(5):
        bank = f"versions-http-race-{trial}"
        barrier = threading.Barrier(4)
        ops = {}

        def post(v, bank=bank, barrier=barrier, ops=ops):
            c = app.test_client()
            barrier.wait()
            ops[v] = c.post(f"/v1/default/banks/{bank}/memories", json={"items": [
                {"content": VERSIONS[v], "document_id": "doc"}], "async": False}).get_json()

        threads = [threading.Thread(target=post, args=(v,)) for v in ("A", "B", "C", "AB")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        by_job = {o["operation_id"]: v for v, o in ops.items()}
        with services.pool.connection() as conn:
            newest = conn.execute("SELECT id FROM jobs WHERE bank_id = %s "
                                  "ORDER BY seq DESC LIMIT 1", (bank,)).fetchone()
        live = [r["text"] for r in _live(services, bank)]
        assert live == _chunks(services, VERSIONS[by_job[str(newest["id"])]]), trial


@pytest.mark.slow
def test_racing_versions_on_a_worker_with_concurrency_leave_one_live(app, services, settings,
                                                                     worker):
    """Four async jobs of one new document on workers running four tasks at once."""
    from rcll.dev import processes, stack
    from tests.conftest import wait_job

    wide = settings.model_copy(update={"worker_concurrency": 4})
    stack.start_worker(wide, name="worker-wide", log=lambda *_: None)
    try:
        c = app.test_client()
        for trial in range(8):
            bank = f"versions-worker-race-{trial}"
            ops = {v: c.post(f"/v1/default/banks/{bank}/memories", json={"items": [
                {"content": VERSIONS[v], "document_id": "doc"}]}).get_json()["operation_id"]
                for v in ("A", "B", "C", "AB")}
            for op in ops.values():
                assert wait_job(c, bank, op)["state"] == "succeeded"
            live = [r["text"] for r in _live(services, bank)]
            assert live == _chunks(services, VERSIONS["AB"]), trial  # the newest job wins
    finally:
        processes.stop(settings.run_dir.resolve(), "worker-wide")
