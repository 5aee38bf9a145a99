"""Memory Worth feedback: ``POST …/memories/{unit_id}/feedback`` counts outcomes atomically;
bad input is a 4xx JSON error; nothing is lost or counted twice."""

import threading
from uuid import uuid4

BASE = "/v1/default/banks/{bank}/memories/{uid}/feedback"


def _units(client, services, bank: str, texts: list[str]) -> list[str]:
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": t, "document_id": f"d{i}"} for i, t in enumerate(texts)], "async": False})
    assert r.get_json()["state"] == "succeeded", r.get_json()
    with services.pool.connection() as conn:
        rows = conn.execute("""SELECT u.id::text AS id, d.document_id FROM memory_units u
                               JOIN documents d ON d.id = u.document_id WHERE u.bank_id = %s
                               ORDER BY d.document_id""", (bank,)).fetchall()
    return [r["id"] for r in rows]


def _post(client, bank, uid, body):
    return client.post(BASE.format(bank=bank, uid=uid), json=body)


def test_outcomes_are_counted_and_worth_is_the_success_ratio(client, services):
    bank = "fb-count"
    uid, other = _units(client, services, bank, ["Ana: the VPN config lives in the wiki.",
                                                 "Ben: standup moved to 9:30."])
    r = _post(client, bank, uid, {"outcome": "success"})
    assert r.status_code == 200, r.get_json()
    assert r.get_json() == {"unit_id": uid, "success": 1, "failure": 0, "worth": 1.0}
    for _ in range(3):
        r = _post(client, bank, uid, {"outcome": "failure"})
    assert r.get_json() == {"unit_id": uid, "success": 1, "failure": 3, "worth": 0.25}
    # an upper-case id is the same unit
    r = _post(client, bank, uid.upper(), {"outcome": "success"})
    assert r.get_json() == {"unit_id": uid, "success": 2, "failure": 3, "worth": 0.4}
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT unit_id::text AS u, bank_id, success, failure "
                            "FROM unit_feedback WHERE bank_id = %s", (bank,)).fetchall()
    assert rows == [{"u": uid, "bank_id": bank, "success": 2, "failure": 3}]  # other: no row


def test_concurrent_outcomes_are_neither_lost_nor_doubled(app, client, services):
    bank = "fb-race"
    (uid,) = _units(client, services, bank, ["Cy: the release train leaves on Thursdays."])
    statuses: list[int] = []

    def hit(outcome):
        c = app.test_client()
        for _ in range(5):
            statuses.append(_post(c, bank, uid, {"outcome": outcome}).status_code)

    threads = [threading.Thread(target=hit, args=("success" if i % 2 else "failure",))
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 30
    last = _post(client, bank, uid, {"outcome": "success"}).get_json()
    assert (last["success"], last["failure"]) == (16, 15)


def test_bad_input_and_unknown_units_are_4xx(client, services):
    bank = "fb-errors"
    (uid,) = _units(client, services, bank, ["Dee: the office closes at 6pm on Fridays."])
    (foreign,) = _units(client, services, "fb-errors-other", ["Eve: parking is on level 2."])

    def err(resp, status, code):
        assert resp.status_code == status, resp.get_json()
        assert resp.get_json()["error"]["code"] == code, resp.get_json()
        return resp.get_json()["error"]

    err(_post(client, bank, uid, {"outcome": "maybe"}), 400, "invalid_outcome")
    err(_post(client, bank, uid, {"outcome": 1}), 400, "invalid_outcome")
    err(_post(client, bank, uid, {}), 400, "invalid_outcome")
    e = err(_post(client, bank, uid, {"outcome": "success", "weight": 2}), 400, "invalid_request")
    assert e["details"]["fields"] == ["weight"]
    err(client.post(BASE.format(bank=bank, uid=uid), data="{not json",
                    content_type="application/json"), 400, "malformed_json")
    err(_post(client, bank, "not-a-uuid", {"outcome": "success"}), 400, "invalid_unit_id")
    err(_post(client, "bad%01bank", uid, {"outcome": "success"}), 400, "invalid_bank_id")
    err(_post(client, bank, str(uuid4()), {"outcome": "success"}), 404, "unit_not_found")
    err(_post(client, "fb-no-such-bank", uid, {"outcome": "success"}), 404, "bank_not_found")
    # a unit of another bank is not found in this one, and nothing is stored for it
    err(_post(client, bank, foreign, {"outcome": "success"}), 404, "unit_not_found")
    with services.pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM unit_feedback WHERE bank_id LIKE 'fb-errors%%'"
                         ).fetchone()["n"]
    assert n == 0


def test_feedback_goes_with_its_bank(client, services):
    bank = "fb-delete"
    (uid,) = _units(client, services, bank, ["Fin: the coffee machine is descaled monthly."])
    assert _post(client, bank, uid, {"outcome": "failure"}).status_code == 200
    assert client.delete(f"/v1/default/banks/{bank}").status_code == 200
    with services.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM unit_feedback WHERE unit_id = %s",
                            (uid,)).fetchone()["n"] == 0


def test_feedback_racing_a_bank_delete_is_a_404_not_a_500(client, services, settings):
    """The delete holds the unit rows; the feedback waits for it, then finds no unit."""
    import psycopg

    bank = "fb-race"
    uid = _units(client, services, bank, ["Ana: the printer is on floor 3."])[0]
    result = {}
    with psycopg.connect(settings.db_url) as conn:
        conn.execute("DELETE FROM memory_banks WHERE id = %s", (bank,))  # not committed yet
        t = threading.Thread(target=lambda: result.update(
            r=_post(client, bank, uid, {"outcome": "failure"})))
        t.start()
        t.join(1.0)
        assert t.is_alive()  # waiting on the unit row the delete holds
        conn.commit()
    t.join(30)
    assert result["r"].status_code == 404, result["r"].get_json()
    assert result["r"].get_json()["error"]["code"] in ("unit_not_found", "bank_not_found")
