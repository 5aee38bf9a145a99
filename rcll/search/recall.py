"""Recall, cold tier: dense + lexical candidates → RRF → token-budget cut (spec §5).

Runs in one READ ONLY transaction on the read pool; never calls a language model.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from rcll.errors import BankNotFound
from rcll.models.embedder import EmbedderHandle
from rcll.models.tokenizer import TokenCounter
from rcll.search.budget import cut_to_budget
from rcll.search.dense import dense_candidates
from rcll.search.fusion import rrf
from rcll.search.lexical import lexical_candidates
from rcll.search.models import Candidate, RecallQuery, RecallResult
from rcll.search.strategies import STRATEGIES, Strategy

log = logging.getLogger(__name__)

UNIT_COLUMNS = """u.id, u.text, u.kind, u.room, u.hall, u.layer, u.context, u.occurred_start,
    u.occurred_end, u.mentioned_at, u.created_at, u.metadata, u.tags, u.chunk_id, u.token_count,
    d.document_id AS document_id"""


@dataclass
class RecallContext:
    """What recall needs: the read pool, the embedder, the tokenizer and the tuning values."""

    pool: ConnectionPool
    embedder: EmbedderHandle
    tokens: TokenCounter
    candidates_per_channel: int = 300
    dense_floor: float = 0.30
    rrf_k: int = 60
    lexical_df_cutoff: float = 0.15


def recall(ctx: RecallContext, bank_id: str, q: RecallQuery,
           strategies: dict[str, Strategy] = STRATEGIES) -> RecallResult:
    """Answer ``q`` against ``bank_id``. Raises :class:`BankNotFound`.

    The dense channel is skipped (``dense_available: false``, mode A) when the embedder or
    pgvector cannot serve; recall then answers lexically rather than refusing (spec §1.4).
    """
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    strategy = strategies[q.channels]
    degraded: list[str] = []

    qvec, model = None, None
    if "dense" in strategy.channels:
        emb = ctx.embedder.get()
        if emb is None:
            degraded.append(f"dense: embedder unavailable ({ctx.embedder.error})")
        else:
            try:
                qvec, model = emb.embed([q.query])[0], emb.model_name
            except Exception as exc:
                degraded.append(f"dense: query embedding failed ({exc})")
        timings["embed_query"] = _ms(t0)

    channels: dict[str, list[Candidate]] = {}
    lex_info: dict = {}
    with ctx.pool.connection() as conn:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            if conn.execute("SELECT 1 FROM memory_banks WHERE id = %s", (bank_id,)).fetchone() is None:
                raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})
            if qvec is not None:
                t = time.perf_counter()
                try:
                    with conn.transaction():  # savepoint: a failing channel must not sink the rest
                        channels["dense"] = dense_candidates(
                            conn, q, bank_id, qvec, model=model,
                            limit=ctx.candidates_per_channel, floor=ctx.dense_floor)
                except Exception as exc:
                    log.warning("dense channel failed: %s", exc)
                    degraded.append(f"dense: {type(exc).__name__}")
                timings["dense"] = _ms(t)
            if "lexical" in strategy.channels:
                t = time.perf_counter()
                channels["lexical"], lex_info = lexical_candidates(
                    conn, q, bank_id, limit=ctx.candidates_per_channel,
                    df_cutoff=ctx.lexical_df_cutoff)
                timings["lexical"] = _ms(t)

            t = time.perf_counter()
            fused = rrf(channels, k=ctx.rrf_k, weights=strategy.weights)
            timings["fuse"] = _ms(t)
            t = time.perf_counter()
            top = fused[: min(len(fused), max(q.limit * 2, q.limit + 20))]
            rows = _hydrate(conn, [uid for uid, _ in top])
        timings["hydrate"] = _ms(t)

    ranks = {name: {c.unit_id: c for c in cands} for name, cands in channels.items()}
    ordered = []
    for uid, score in top:
        row = rows.get(uid)
        if row is None:
            continue
        ordered.append(_render(row, uid, score, ranks))
    t = time.perf_counter()
    results, used = cut_to_budget(ordered, q.max_tokens, q.limit, ctx.tokens)
    timings["budget"] = _ms(t)
    timings["total"] = _ms(t0)

    dense_ok = "dense" in channels
    return RecallResult(
        results=results,
        mode="B" if dense_ok and "lexical" in channels else ("dense" if dense_ok else "A"),
        channels=sorted(channels),
        dense_available=(dense_ok if "dense" in strategy.channels
                         else ctx.embedder.get() is not None),
        reranked=False,
        tokens_used=used,
        counts={"dense": len(channels.get("dense", [])),
                "lexical": len(channels.get("lexical", [])), "fused": len(fused),
                "returned": len(results), "lexical_terms": lex_info.get("terms", []),
                "lexical_dropped_terms": lex_info.get("dropped_terms", [])},
        degraded=degraded,
        timings_ms=timings if q.trace else None,
    )


def _hydrate(conn, ids: list[str]) -> dict[str, dict]:
    if not ids:
        return {}
    rows = conn.execute(
        f"""SELECT {UNIT_COLUMNS} FROM memory_units u
            LEFT JOIN documents d ON d.id = u.document_id WHERE u.id = ANY(%s::uuid[])""",
        (ids,),
    ).fetchall()
    return {str(r["id"]): r for r in rows}


def _render(row: dict, uid: str, score: float, ranks: dict) -> dict:
    iso = lambda v: v.isoformat() if v is not None else None  # noqa: E731
    out = {
        "id": uid, "text": row["text"], "kind": row["kind"], "room": row["room"],
        "hall": row["hall"], "layer": row["layer"], "context": row["context"],
        "occurred_start": iso(row["occurred_start"]), "occurred_end": iso(row["occurred_end"]),
        "mentioned_at": iso(row["mentioned_at"]), "created_at": iso(row["created_at"]),
        "metadata": row["metadata"], "tags": row["tags"],
        "document_id": row["document_id"],
        "chunk_id": str(row["chunk_id"]) if row["chunk_id"] else None,
        "ranks": {}, "scores": {"rrf": round(score, 6)}, "tokens": row["token_count"],
    }
    for name, by_id in ranks.items():
        c = by_id.get(uid)
        out["ranks"][name] = c.rank if c else None
        out["scores"][name] = round(c.score, 6) if c else None
    return out


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)
