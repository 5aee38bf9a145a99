"""Backpressure (issue 23 item 4; rcll.admission): past ``RCLL_RECALL_MAX_IN_FLIGHT``
concurrent recalls a request waits at most ``RCLL_RECALL_QUEUE_WAIT_MS`` for a slot and is
then answered 503 ``overloaded`` with ``Retry-After: 1``; a freed slot serves the next."""

import threading

import pytest

from rcll.admission import Gate
from rcll.errors import Overloaded


def test_gate_refuses_after_its_bounded_wait_and_admits_when_a_slot_frees():
    gate = Gate(2, wait_s=0.05)
    entered, release = threading.Barrier(3), threading.Event()

    def hold():
        with gate.slot():
            entered.wait()
            release.wait()

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for t in holders:
        t.start()
    entered.wait()  # both slots taken
    with pytest.raises(Overloaded) as err:
        with gate.slot():
            pass
    assert err.value.status == 503 and err.value.code == "overloaded"
    assert err.value.details["in_flight"] == 2 and err.value.retry_after_s == 1
    assert gate.refused == 1
    release.set()
    for t in holders:
        t.join()
    with gate.slot():  # slots freed: the next recall enters
        pass
    assert gate.refused == 1


def test_limit_0_admits_everyone():
    gate = Gate(0, wait_s=0)
    with gate.slot(), gate.slot(), gate.slot():
        pass
    assert gate.refused == 0


def test_saturated_recall_answers_503_overloaded_with_retry_after(client, services):
    bank = "backpressure-bank"
    r = client.post(f"/v1/default/banks/{bank}/memories",
                    json={"items": [{"content": "The night train to Vienna leaves at ten."}],
                          "async": False})
    assert r.status_code == 200, r.get_json()
    cascade = services.cascade
    saved, cascade.gate = cascade.gate, Gate(1, wait_s=0.01)
    try:
        with cascade.gate.slot():  # the one slot is busy
            resp = client.post(f"/v1/default/banks/{bank}/memories/recall",
                               json={"query": "night train"})
            assert resp.status_code == 503
            assert resp.headers["Retry-After"] == "1"
            assert resp.get_json()["error"]["code"] == "overloaded"
        resp = client.post(f"/v1/default/banks/{bank}/memories/recall",
                           json={"query": "night train"})
        assert resp.status_code == 200
        assert "Vienna" in resp.get_json()["results"][0]["text"]
    finally:
        cascade.gate = saved
