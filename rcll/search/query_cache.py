"""An in-process LRU of query embeddings: an agent fleet re-asks the same questions, and
embedding a query is the largest fixed cost of a recall on CPU. Keyed by (model name, query
text); the vector is the embedder's own output, so a
hit changes no result. Thread-safe."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np


class QueryVectorCache:
    """``get(model, text)`` → the cached unit-norm ``float32 (dim,)`` vector or None;
    ``put(model, text, vector)``. Holds at most ``capacity`` queries (least recently used
    evicted); ``capacity`` 0 disables it. ``hits``/``misses`` count lookups."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, model: str, text: str) -> np.ndarray | None:
        if self.capacity <= 0:
            return None
        with self._lock:
            v = self._items.get((model, text))
            if v is None:
                self.misses += 1
                return None
            self._items.move_to_end((model, text))
            self.hits += 1
            return v

    def put(self, model: str, text: str, vector: np.ndarray) -> None:
        if self.capacity <= 0:
            return
        vector = np.asarray(vector, dtype=np.float32)
        vector.setflags(write=False)
        with self._lock:
            self._items[(model, text)] = vector
            self._items.move_to_end((model, text))
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
