"""The query micro-batcher: concurrent single-text calls share forward passes and each
caller gets its own text's vector; failures reach every caller of the batch."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rcll.models.batching import QueryBatcher


class SlowEmbedder:
    """A stand-in with a real cost per pass: vector = [len(text), hash bucket], 30 ms."""

    model_name = "fake"
    dim = 2

    def __init__(self, fail: str | None = None):
        self.calls: list[list[str]] = []
        self.fail = fail
        self._lock = threading.Lock()

    def embed(self, texts):
        with self._lock:
            self.calls.append(list(texts))
            time.sleep(0.03)
            if self.fail and self.fail in texts:
                raise ValueError("bad text")
            return np.array([[len(t), sum(map(ord, t)) % 97] for t in texts], np.float32)


def _run_concurrently(batcher, texts):
    out, errors = {}, {}

    def call(t):
        try:
            out[t] = batcher.embed([t])
        except Exception as exc:
            errors[t] = exc

    threads = [threading.Thread(target=call, args=(t,)) for t in texts]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    return out, errors


def test_concurrent_queries_share_passes_and_get_their_own_vectors():
    inner = SlowEmbedder()
    b = QueryBatcher(inner, wait_s=0.01, max_batch=8)
    texts = [f"query number {i}" + "x" * i for i in range(20)]
    out, errors = _run_concurrently(b, texts)
    assert not errors
    assert sorted(out) == sorted(texts)
    for t, v in out.items():
        assert v.shape == (1, 2)
        assert v[0, 0] == len(t) and v[0, 1] == sum(map(ord, t)) % 97
    assert b.texts == 20
    assert len(inner.calls) == b.batches < 20  # fewer passes than queries
    assert max(len(c) for c in inner.calls) <= 8
    assert sorted(t for c in inner.calls for t in c) == sorted(texts)  # each embedded once


def test_lists_pass_through_and_a_lone_query_is_served():
    inner = SlowEmbedder()
    b = QueryBatcher(inner, wait_s=0.001)
    assert b.embed(["a", "bb"]).shape == (2, 2)
    assert b.embed(["ccc"])[0, 0] == 3
    assert inner.calls == [["a", "bb"], ["ccc"]]


def test_a_failing_batch_raises_in_its_callers_and_the_next_batch_works():
    inner = SlowEmbedder(fail="boom")
    b = QueryBatcher(inner, wait_s=0.02)
    out, errors = _run_concurrently(b, ["boom", "fine one", "fine two"])
    assert "boom" in errors and isinstance(errors["boom"], ValueError)
    for t in ("fine one", "fine two"):  # served in the same failed batch, or a later one
        assert (t in errors) != (t in out)
    assert b.embed(["after"])[0, 0] == 5
    with pytest.raises(ValueError):
        b.embed(["boom"])


def test_a_lone_client_never_waits_and_concurrency_turns_the_wait_on():
    inner = SlowEmbedder()
    b = QueryBatcher(inner, wait_s=0.05, max_batch=8)
    for i in range(5):  # one client, one query at a time: every batch is of one
        assert b.embed([f"alone {i}"])[0, 0] == len(f"alone {i}")
    assert b.waits == 0 and b.batches == 5
    texts = [f"together {i}" for i in range(12)]
    out, errors = _run_concurrently(b, texts)
    assert not errors and sorted(out) == sorted(texts)
    assert b.waits >= 1  # batches with company made later leaders wait for more
    assert max(len(c) for c in inner.calls) > 1
