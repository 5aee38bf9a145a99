"""The revision race (issue 9 tests): two ``correct``s of one unit at the same revision,
sent at the same instant from two threads through HTTP → exactly one 200 and one 409
``revision_conflict`` carrying the current revision. Ten rounds."""

import threading


def test_two_concurrent_corrects_one_wins(lc_app, services):
    bank = "lc-race"
    api = lc_app.test_client()
    r = api.post(f"/banks/{bank}/units", json={"text": "The build server is build-01."})
    assert r.status_code == 201
    uid = r.get_json()["id"]
    for rnd in range(10):
        rev = rnd + 1
        barrier = threading.Barrier(2)
        answers: list = [None, None]

        def go(i: int, barrier=barrier, answers=answers, rev=rev, rnd=rnd) -> None:
            client = lc_app.test_client()
            barrier.wait()
            answers[i] = client.patch(f"/banks/{bank}/units/{uid}", json={
                "revision": rev, "text": f"The build server is build-{rnd:02d}{i}."})

        threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        codes = sorted(a.status_code for a in answers)
        assert codes == [200, 409], [a.get_json() for a in answers]
        win = next(a for a in answers if a.status_code == 200).get_json()
        lose = next(a for a in answers if a.status_code == 409).get_json()["error"]
        assert win["revision"] == rev + 1
        assert lose["code"] == "revision_conflict"
        assert lose["details"] == {"unit_id": uid, "revision": rev, "current_revision": rev + 1}
    with services.pool.connection() as conn:
        unit = conn.execute("SELECT revision, text FROM memory_units WHERE id = %s",
                            (uid,)).fetchone()
        hist = conn.execute("SELECT count(*) AS n FROM memory_unit_revisions WHERE unit_id = %s",
                            (uid,)).fetchone()["n"]
        audits = conn.execute("SELECT count(*) AS n FROM audit_log WHERE unit_id = %s "
                              "AND action = 'unit.correct'", (uid,)).fetchone()["n"]
        vectors = conn.execute("SELECT count(*) AS n FROM memory_embeddings WHERE unit_id = %s",
                               (uid,)).fetchone()["n"]
    assert unit["revision"] == 11 and hist == 10 and audits == 10 and vectors == 1
