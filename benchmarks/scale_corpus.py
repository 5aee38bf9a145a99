"""Synthetic corpus for benchmarks/scale.py: real sentences, vectors derived from real embeddings.

Texts: the sentences of the LoCoMo turns and LongMemEval_S dev60 turns in
``shared/data`` (split at sentence ends, 20–400 characters, deduplicated; ~80k distinct).
They are read from the shared folder, never copied into the repository.

Vectors: ``K`` (default 4,000) of those sentences are embedded once with the project's
embedder (all-MiniLM-L6-v2) and cached in the bench state folder. Unit ``i`` of a bank gets
sentence ``j`` as its text; its vector is ``normalize(V[e] + 0.3·V[f] + n)`` where ``e = j``
when sentence ``j`` was embedded (else a random embedded sentence), ``f`` is another random
embedded sentence and ``n`` is Gaussian noise of norm ≈ 0.3 (σ = 0.3/√384). So every vector
lies in the real embedding geometry (clusters of real topics), none is a duplicate, and the
nearest-neighbour structure is as hard as real data's or harder. A bank's content is a
function of its name alone (seeded generator), so the 500-unit bank ``s0000`` is identical
in every database the benchmark builds.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import uuid
from pathlib import Path

import numpy as np

DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data").resolve()
_SENT = re.compile(r"(?<=[.!?])\s+")
NOISE_NORM = 0.3
MIX = 0.3


def sentences() -> list[str]:
    """Distinct real sentences of both sets, in a fixed shuffled order (so any prefix mixes them)."""
    out: dict[str, None] = {}
    with open(DATA / "locomo" / "locomo10_memories.jsonl") as fh:
        for line in fh:
            r = json.loads(line)
            for s in _SENT.split(f"{r['speaker']}: {r['text']}"):
                if 20 <= len(s) <= 400:
                    out.setdefault(s.strip())
    with gzip.open(DATA / "longmemeval" / "longmemeval_s_dev60.json.gz") as fh:
        for rec in json.load(fh):
            for sess in rec["haystack_sessions"]:
                for turn in sess:
                    for s in _SENT.split(turn["content"]):
                        s = " ".join(s.split())
                        if 20 <= len(s) <= 400:
                            out.setdefault(s)
    texts = list(out)
    order = np.random.default_rng(20261130).permutation(len(texts))
    return [texts[i] for i in order]


def queries(n: int) -> list[str]:
    """``n`` real LoCoMo questions (every ~n-th of those used for retrieval evaluation)."""
    qs = []
    with open(DATA / "locomo" / "locomo10_queries.jsonl") as fh:
        for line in fh:
            r = json.loads(line)
            if r["use_for_retrieval_eval"]:
                qs.append(r["question"])
    step = max(1, len(qs) // n)
    return qs[::step][:n]


def layout(units: int) -> list[tuple[str, int]]:
    """Banks ``(name, size)`` summing to ``units``: 30% one bank ("big", 300k at 1M), 10% a
    second ("second"), mid banks of 2k–18k while they fit in another 30%, the rest in banks
    of 500 (``s0000``…). ``units == 500`` is the empty-database case: ``s0000`` alone."""
    if units <= 500:
        return [("s0000", units)]
    big, second = int(units * 0.3), int(units * 0.1)
    mids, room = [], int(units * 0.3)
    for m in (18_000, 6_000, 10_000, 4_000, 2_000):
        if m <= room:
            mids.append((f"mid{m // 1000}k", m))
            room -= m
    rest = units - big - second - sum(m for _, m in mids)
    smalls = [(f"s{i:04d}", 500) for i in range(rest // 500)]
    if rest % 500:
        smalls.append((f"s{len(smalls):04d}", rest % 500))
    return [("big", big), ("second", second), *mids, *smalls]


def _seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def bank_rows(name: str, size: int, n_sentences: int, base: np.ndarray):
    """``(ids, sentence_idx, vectors)`` for one bank; deterministic in ``name``.

    ``base``: (K, dim) unit-norm real embeddings of sentences 0..K-1.
    """
    rng = np.random.default_rng(_seed(name))
    k, dim = base.shape
    j = rng.integers(n_sentences, size=size)
    e = np.where(j < k, j, rng.integers(k, size=size))
    f = rng.integers(k, size=size)
    v = base[e] + MIX * base[f] + rng.normal(0, NOISE_NORM / np.sqrt(dim), size=(size, dim))
    v = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    ids = [uuid.UUID(bytes=rng.bytes(16), version=4) for _ in range(size)]
    return ids, j, v


def base_vectors(cache: Path, texts: list[str], k: int, embed) -> np.ndarray:
    """The real embeddings of ``texts[:k]``, computed once with ``embed`` and cached."""
    if cache.exists():
        v = np.load(cache)
        if len(v) == k:
            return v
    v = embed(texts[:k])
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, v)
    return v
