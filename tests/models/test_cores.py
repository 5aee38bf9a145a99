"""Core leases (rcll.models.cores): one token per core shared by a worker's pool processes,
a pass of the ONNX embedder on the cores no other process holds, and a real Celery worker
whose tasks hold their token."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from rcll.models.cores import IDLE_S, CoreLeases
from rcll.models.onnx_runtime import OnnxEmbedder

MODEL = "all-MiniLM-L6-v2"
TEXTS = [f"turn {i}: we talked about the trip to Lisbon and the {i} photos " * (1 + i % 5)
         for i in range(40)]


def test_a_token_is_held_by_one_process_at_a_time(tmp_path):
    # two instances open their own descriptors: their flocks conflict as two processes' do
    a, b = CoreLeases(tmp_path, 2), CoreLeases(tmp_path, 2)
    ta = a.acquire()
    tb = b.acquire()
    assert len(ta) == len(tb) == 1 and ta != tb
    with a.spare(1) as extra:
        assert extra == 0  # both cores are held by running tasks
    b.release(tb)
    with a.spare(1) as extra:
        assert extra == 0  # b's task just ended: b may be about to start its next one
    time.sleep(IDLE_S + 0.05)
    with a.spare(1) as extra:
        assert extra == 1  # b has had nothing to do for IDLE_S: a's pass borrows its core
        assert b.acquire() == []  # while it is borrowed a task starting in b has none
    assert len(b.acquire()) == 1  # given back after the pass
    assert a.acquire() == []  # a already holds one, the other is b's: nothing left


def test_spare_never_takes_more_than_asked_and_a_lease_never_blocks(tmp_path):
    leases = CoreLeases(tmp_path, 4)
    with leases.hold() as own:
        assert own == 1
        with leases.spare(2, idle_s=0) as extra:
            assert extra == 2
            with CoreLeases(tmp_path, 4).spare(5, idle_s=0) as rest:
                assert rest == 1  # the fourth core only, at once
    with CoreLeases(tmp_path, 4).spare(4, idle_s=0) as all_free:
        assert all_free == 4


def test_a_dead_holder_leaks_no_token(tmp_path):
    pid = os.fork()
    if pid == 0:  # child: take every token, then die without giving them back
        CoreLeases(tmp_path, 2).spare(2, idle_s=0).__enter__()
        os._exit(0)
    os.waitpid(pid, 0)
    with CoreLeases(tmp_path, 2).spare(2, idle_s=0) as extra:
        assert extra == 2


def test_a_forked_child_does_not_share_its_parents_tokens(tmp_path):
    leases = CoreLeases(tmp_path, 1)
    assert leases.acquire() == [0]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reopens its files: the parent's lock is not its own
        os.write(write, b"%d" % len(leases.acquire()))
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 8) == b"0"


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cores-state")


def test_an_embedding_pass_runs_wide_on_idle_cores_and_gives_the_same_vectors(state, tmp_path):
    plain = OnnxEmbedder(MODEL, state, "fp32", threads=1, batch_size=8)
    leases = CoreLeases(tmp_path / "cores", 2)
    wide = OnnxEmbedder(MODEL, state, "fp32", threads=1, batch_size=8, cores=leases)
    ref = plain.embed(TEXTS)
    time.sleep(IDLE_S)  # the token files were just made: their "last task" is their creation
    before = wide.wide_passes
    with leases.hold():
        got = wide.embed(TEXTS)
    # 40 texts, 8 per pass: 5 passes, two at a time while the 2nd core idles, so passes 2
    # and 4 ran on it and the 5th alone on this process's own core
    assert wide.wide_passes - before == 2
    cos = (ref * got).sum(axis=1)
    assert cos.min() > 0.99999
    np.testing.assert_allclose(got, ref, atol=1e-5)  # each row where it belongs

    other = CoreLeases(tmp_path / "cores", 2)
    taken = other.acquire()  # another pool process runs a task: its core is not lent
    assert taken
    with leases.hold():
        again = wide.embed(TEXTS)
    assert wide.wide_passes - before == 2
    np.testing.assert_allclose(again, ref, atol=1e-5)
    other.release(taken)


def test_a_failing_pass_on_a_borrowed_core_fails_the_call_and_gives_the_core_back(state,
                                                                                  tmp_path):
    """A pass that raises on its helper thread is the call's error (not a row of zeros),
    raised after the other pass ends, and the borrowed token is free again."""
    leases = CoreLeases(tmp_path / "cores", 2)
    wide = OnnxEmbedder(MODEL, state, "fp32", threads=1, batch_size=8, cores=leases)
    time.sleep(IDLE_S)
    real, calls = wide._run, []

    def flaky(encodings):
        calls.append(len(encodings))
        if len(calls) == 2:  # one of the first group's two passes (run at once)
            raise RuntimeError("pass failed")
        return real(encodings)

    wide._run = flaky
    with leases.hold(), pytest.raises(RuntimeError, match="pass failed"):
        wide.embed(TEXTS)
    assert len(calls) == 2  # the group's other pass ran to its end; no further group began
    with CoreLeases(tmp_path / "cores", 2).spare(2, idle_s=0) as free:
        assert free == 2  # the call's borrowed token and this test's own are both back


def test_the_workers_tasks_hold_their_core_and_give_it_back(client, settings, worker):
    """A real worker: its pool processes take their core tokens under the run folder while
    a retain job runs, and give every one back when the job's tasks end."""
    import socket

    from tests.conftest import wait_job

    resp = client.post("/v1/default/banks/cores-worker/memories", json={"async": True, "items": [
        {"content": f"Ines moved the lamp to pier {i} before the storm."} for i in range(6)]})
    assert resp.status_code in (200, 202), resp.get_json()
    op = wait_job(client, "cores-worker", resp.get_json()["operation_id"])
    assert op["state"] == "succeeded", op
    folder = settings.run_dir / f"cores-{socket.gethostname()}"
    cores = os.cpu_count() or 1
    assert sorted(p.name for p in folder.iterdir()) == [f"core-{i}.lock" for i in range(cores)]
    # The last task's postrun runs after the job row says succeeded, and the shared worker
    # may still run another test's follow-up tasks (consolidation): every token must come
    # back within a bounded wait, not at one instant.
    leases, deadline = CoreLeases(folder, cores), time.monotonic() + 30
    while True:
        with leases.spare(cores, idle_s=0) as free:
            pass
        if free == cores or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert free == cores  # none kept by an ended task
