"""Batching for the embedder: write-path texts grouped by token count
(:func:`token_batches`), and concurrent one-text embeddings (recall queries) micro-batched
into one forward pass (:class:`QueryBatcher`).

A forward pass costs about its padded size (texts x the longest text's tokens), so the write
path sorts a call's texts longest first and cuts batches where the padded size would pass
a token budget: long chunks go in small batches, short ones in full batches, and no short
text is padded to a long one's length.

A process serving recalls on several threads embeds one query per request; the embedder
runs one forward pass at a time, so concurrent queries queue behind each other. With
:class:`QueryBatcher` the first query to arrive waits ``wait_s`` for others, then embeds all
that queued (up to ``max_batch``) in one pass and hands each its row; queries that arrive
meanwhile form the next batch, led by the first of them. A leader waits only when the
previous batch had company (more than one query): a lone client, whose batches are all of
one, never pays the wait, and the first burst of concurrency turns it on. Calls with
several texts (the write path) go straight to the embedder. Results are identical to single calls up to float
rounding (the same model on the same texts).
"""

from __future__ import annotations

import threading
import time

import numpy as np


def token_batches(lengths: list[int], max_tokens: int, max_batch: int) -> list[list[int]]:
    """Indices into ``lengths`` (tokens per text) grouped for forward passes: longest first
    (ties keep input order); each batch has at most ``max_batch`` texts and a padded size
    (texts x its longest text) of at most ``max_tokens``; a text longer than ``max_tokens``
    goes alone. Every index appears exactly once. ``max_tokens`` <= 0: no token bound."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        longest = lengths[cur[0]] if cur else lengths[i]  # sorted: the first is the longest
        if cur and (len(cur) >= max_batch
                    or (max_tokens > 0 and (len(cur) + 1) * max(longest, 1) > max_tokens)):
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


class _Slot:
    __slots__ = ("text", "done", "lead", "vector", "error")

    def __init__(self, text: str):
        self.text = text
        self.done = threading.Event()
        self.lead = False
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None


class QueryBatcher:
    """Wraps an embedder (``embed(list[str]) -> float32 (n, dim)``, ``model_name``, ``stamp``,
    ``dim``)
    with the same interface. ``wait_s``: how long a batch's leader waits for company (only
    when the previous batch had more than one text); ``max_batch``: most texts per pass.
    ``batches``/``texts`` count what was embedded, ``waits`` how often a leader waited.
    Raises what the wrapped embedder raises, in every caller of the failed batch."""

    def __init__(self, inner, wait_s: float = 0.002, max_batch: int = 32):
        self.inner = inner
        self.model_name = inner.model_name
        self.stamp = getattr(inner, "stamp", inner.model_name)
        self.runtime = getattr(inner, "runtime", None)
        self.dim = inner.dim
        self.wait_s = wait_s
        self.max_batch = max_batch
        self._queue: list[_Slot] = []
        self._leading = False
        self._last_size = 0  # texts in the previous batch: > 1 means callers overlap
        self._lock = threading.Lock()
        self.batches = self.texts = self.waits = 0

    def embed(self, texts: list[str],
              token_counts: list[int | None] | None = None) -> np.ndarray:
        if len(texts) != 1:
            if token_counts is None:
                return self.inner.embed(texts)
            return self.inner.embed(texts, token_counts=token_counts)
        slot = _Slot(texts[0])
        with self._lock:
            self._queue.append(slot)
            if not self._leading:
                self._leading = slot.lead = True
        if not slot.lead:
            slot.done.wait()
            if not slot.lead:  # served by a leader (else promoted: lead the next batch)
                return self._result(slot)
        with self._lock:
            wait = self._last_size > 1
            if wait:
                self.waits += 1
        if wait:
            time.sleep(self.wait_s)
        self._run_batch()
        return self._result(slot)

    def _run_batch(self) -> None:
        with self._lock:
            batch, self._queue = self._queue[:self.max_batch], self._queue[self.max_batch:]
        try:
            vectors = self.inner.embed([s.text for s in batch])
            for s, v in zip(batch, vectors, strict=True):
                s.vector = v
        except BaseException as exc:  # every caller of this batch sees the failure
            for s in batch:
                s.error = exc
        self.batches += 1
        self.texts += len(batch)
        with self._lock:  # hand the lead to the first one waiting, or give it up
            self._last_size = len(batch)
            nxt = self._queue[0] if self._queue else None
            if nxt is None:
                self._leading = False
            else:
                nxt.lead = True
        for s in batch:
            s.done.set()
        if nxt is not None:
            nxt.done.set()

    @staticmethod
    def _result(slot: _Slot) -> np.ndarray:
        if slot.error is not None:
            raise slot.error
        return slot.vector[None, :]
