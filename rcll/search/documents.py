"""Documents ranked as well as chunks: a document's score from its best chunks, and the rule
that tells a bank of documents from a bank of conversation.

**Aggregation** (step ``documents``): a long document is stored as several chunks, and a
channel ranks chunks. Each channel's chunk ranking is turned into a document ranking — a
document scored by its best chunk (``maxp``: Dai & Callan 2019, "Deeper Text Understanding
for IR with Contextual Neural Language Modeling") or by the sum of its ``top`` best chunks'
scores (``sum``) — and the document rankings are fused by the recipe's weighted RRF, as the
chunk rankings were. The unit ranking is then rewritten document by document: the units of
the best document first (best unit first), then the next document's. Units with no document
count as a document of their own. The response names the aggregation that ran and lists
the documents of its results (:class:`rcll.search.models.RecallResult`).

**Bank kind** (:func:`bank_kind`): when a recall names no recipe, the bank's units decide
which one it gets (:data:`rcll.search.recipes.RECIPE_BY_KIND`): a sample of its live units
is read and each classified as a conversation turn (its text opens with a speaker label,
:func:`rcll.search.speaker.unit_speaker` — the chunker keeps the label on every part of a
split turn) or a document chunk (a ``chunk`` unit without one, of at least
:data:`DOCUMENT_MIN_TOKENS` tokens — a short note, "I hiked in the Alps with friends.",
is neither); a bank whose document
chunks outnumber its turns and make at least :data:`DOCUMENT_SHARE` of the sample is a
``documents`` bank, every other bank (turns, facts, notes, empty) ``conversation``.
"""

from __future__ import annotations

import time

from psycopg import Connection

from rcll.search.fusion import rrf
from rcll.search.models import Candidate
from rcll.search.speaker import unit_speaker
from rcll.search.state import RecallState

AGGREGATIONS = ("maxp", "sum")
# Units read to classify a bank (the first by sample_key: a uniform sample, from the
# memory_units_bank_live index) and the least share of document chunks among them.
KIND_SAMPLE = 200
DOCUMENT_SHARE = 0.5
# A document chunk is at least this long (tokens; characters / 4 when the count is not
# stored): twice CONTEXT_MAX_AVGDL, the length under which units borrow their neighbours'
# words — notes and chat turns are shorter (LoCoMo turns 14.8 tokens on average), CISI's
# abstracts longer (140.9 on average, benchmarks/results/cisi.json).
DOCUMENT_MIN_TOKENS = 48
# How long one process trusts a bank's kind (seconds): a bank seldom changes kind, and the
# sample costs a read per recall otherwise.
KIND_TTL_S = 300.0


def classify(units: list[tuple[str, str, int]]) -> dict:
    """``{"kind": "documents" | "conversation", "turns", "document_chunks", "sampled"}`` of
    a sample of units given as ``(text head, unit kind, tokens)``."""
    turns = sum(1 for text, _, _ in units if unit_speaker(text) is not None)
    chunks = sum(1 for text, kind, tokens in units
                 if kind == "chunk" and tokens >= DOCUMENT_MIN_TOKENS
                 and unit_speaker(text) is None)
    n = len(units)
    kind = "documents" if n and chunks > turns and chunks >= DOCUMENT_SHARE * n else \
        "conversation"
    return {"kind": kind, "turns": turns, "document_chunks": chunks, "sampled": n}


def bank_kind(conn: Connection, bank_id: str, cache: dict | None = None,
              ttl_s: float = KIND_TTL_S) -> dict:
    """:func:`classify` of ``bank_id``'s first :data:`KIND_SAMPLE` live units by
    ``sample_key``; ``cache`` (``{bank_id: (time, answer)}``) keeps the answer ``ttl_s`` —
    only an answer from a full sample: a bank of fewer units is still being filled (a
    recall on a new bank must not fix it as ``conversation`` while its documents arrive),
    and reading all of them is one short index scan."""
    now = time.monotonic()
    if cache is not None and bank_id in cache and now - cache[bank_id][0] < ttl_s:
        return cache[bank_id][1]
    rows = conn.execute(
        """SELECT left(u.text, 80) AS head, u.kind,
                  coalesce(u.token_count, length(u.text) / 4) AS tokens FROM memory_units u
           WHERE u.bank_id = %s AND u.superseded_by_id IS NULL
             AND u.invalidated_reason IS NULL
           ORDER BY u.sample_key LIMIT %s""", (bank_id, KIND_SAMPLE)).fetchall()
    answer = classify([(r["head"], r["kind"], int(r["tokens"])) for r in rows])
    if cache is not None and answer["sampled"] >= KIND_SAMPLE:
        cache[bank_id] = (now, answer)
    return answer


def document_scores(lists: dict[str, list[Candidate]], doc_of: dict[str, str],
                    aggregation: str = "maxp", top: int = 2) -> dict[str, list[Candidate]]:
    """Each chunk ranking of ``lists`` as a document ranking: ``{name: [Candidate(doc, rank,
    score)]}``, a document's score its best chunk's (``maxp``) or the sum of its ``top``
    best chunks' (``sum``). ``doc_of`` maps a unit to its document (a unit missing from it
    is a document of its own). Ties keep the order of each document's best chunk."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, not {aggregation!r}")
    out = {}
    for name, cands in lists.items():
        per: dict[str, list[float]] = {}
        for c in cands:  # best first: per[doc] is in descending order
            per.setdefault(doc_of.get(c.unit_id, c.unit_id), []).append(c.score)
        scored = [(d, s[0] if aggregation == "maxp" else sum(s[:top]))
                  for d, s in per.items()]
        scored.sort(key=lambda p: -p[1])  # stable: ties keep first appearance
        out[name] = [Candidate(d, i, s) for i, (d, s) in enumerate(scored, 1)]
    return out


def documents_step(state: RecallState, aggregation: str = "maxp", top: int = 2) -> None:
    """Rank documents from their chunks in every channel (``aggregation`` over each
    channel's ranking, see :func:`document_scores`), fuse the document rankings with the
    recipe's weights and rewrite ``state.ranked`` document by document (each unit scored
    its document's fused score; within a document, the previous order). Records
    ``state.aggregation`` and ``state.document_scores`` (``{document id: score}``, a unit
    without a document under its own id)."""
    lists = {name: out.candidates for name, out in state.outputs.items()}
    lists.update({f"{name}_{key}": cands for name, out in state.outputs.items()
                  for key, cands in out.extra.items()})
    ids = list(dict.fromkeys([uid for uid, _ in state.ranked]
                             + [c.unit_id for cands in lists.values() for c in cands]))
    doc_of = {}
    if ids:
        # keyed by the caller's document id (unique in a bank), as results show it
        doc_of = {r["id"]: r["doc"] for r in state.conn.execute(
            """SELECT u.id::text AS id, d.document_id AS doc FROM memory_units u
               JOIN documents d ON d.id = u.document_id
               WHERE u.id = ANY(%s::uuid[])""",
            ("{" + ",".join(ids) + "}",)).fetchall()}
    fused = dict(rrf(document_scores(lists, doc_of, aggregation, top), k=state.ctx.rrf_k,
                     weights=state.recipe.weights))
    groups: dict[str, list[str]] = {}
    for uid, _ in state.ranked:
        groups.setdefault(doc_of.get(uid, uid), []).append(uid)
    order = sorted(groups, key=lambda d: -fused.get(d, 0.0))  # stable
    state.ranked = [(uid, fused.get(d, 0.0)) for d in order for uid in groups[d]]
    for uid, score in state.ranked:
        state.note(uid, "document", score)
    state.aggregation = aggregation if aggregation == "maxp" else f"sum_top{top}"
    state.document_scores = {d: fused.get(d, 0.0) for d in order}
    state.counts["documents"] = len(order)
