"""Recall, cold tier: query preparation → the recipe's channels → weighted RRF → the
recipe's steps (rerank, adjustments, post-processing) → token-budget cut (spec §5).

Runs in one READ ONLY transaction on the read pool; never calls a language model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from psycopg import Connection
from psycopg_pool import ConnectionPool

from rcll.access.principal import DEFAULT_PURPOSES, Principal
from rcll.db import read_only
from rcll.errors import BankNotFound
from rcll.models.embedder import EmbedderHandle
from rcll.models.tokenizer import TokenCounter
from rcll.search.budget import cut_to_budget
from rcll.search.channels import CHANNELS, Channel, ChannelOutput, PreparedQuery, custom_plans
from rcll.search.documents import KIND_TTL_S, bank_kind
from rcll.search.fusion import rrf
from rcll.search.models import RecallQuery, RecallResult
from rcll.search.query_cache import QueryVectorCache
from rcll.search.query_prep import prepare_query
from rcll.search.recipes import DEFAULT_RECIPE, RECIPE_BY_KIND, RECIPES, Recipe
from rcll.search.scope import CallerScope
from rcll.search.state import RecallState
from rcll.search.steps import run_steps
from rcll.telemetry import metrics

log = logging.getLogger(__name__)


@dataclass
class RecallContext:
    """What recall needs: the read pool, the embedder, the tokenizer, the reranker handle
    (None: no reranker configured) and the tuning values."""

    pool: ConnectionPool
    embedder: EmbedderHandle
    tokens: TokenCounter
    candidates_per_channel: int = 300
    dense_floor: float = 0.30
    rrf_k: int = 60
    lexical_df_cutoff: float = 0.15
    default_recipe: str = DEFAULT_RECIPE
    reranker: object | None = None
    rerank_top_n: int = 10  # RCLL_RERANK_TOP_N (benchmarks/rerank_latency.py)
    rerank_batch_size: int = 16
    query_cache: QueryVectorCache | None = None
    # RCLL_PURPOSES (the closed set) and RCLL_DEFAULT_PURPOSE: what a recall may name
    purposes: tuple[str, ...] = DEFAULT_PURPOSES
    default_purpose: str = "assist"
    # bank id → (monotonic time, bank_kind answer): the per-bank recipe rule's cache
    bank_kinds: dict = field(default_factory=dict)

    def recipe_for(self, bank_id: str, named: str | None,
                   conn: Connection | None = None) -> tuple[str, dict | None]:
        """The recipe a recall runs: the one it names, else the one for the bank's kind
        (:data:`rcll.search.recipes.RECIPE_BY_KIND`; a conversation bank gets
        ``default_recipe``), with the :func:`~rcll.search.documents.bank_kind` answer that
        chose it (None when the request named one). ``conn``: read the bank's kind on it
        (a caller's open transaction) instead of a connection of its own; a kind cached in
        ``bank_kinds`` needs neither."""
        if named:
            return named, None
        hit = self.bank_kinds.get(bank_id)
        if conn is not None:
            kind = bank_kind(conn, bank_id, self.bank_kinds)
        elif hit is not None and time.monotonic() - hit[0] < KIND_TTL_S:
            kind = hit[1]  # cached: no connection, no round trip
        else:
            with self.pool.connection() as c:
                kind = bank_kind(c, bank_id, self.bank_kinds)
        return RECIPE_BY_KIND.get(kind["kind"]) or self.default_recipe, kind

    def scope(self, bank_id: str, q: RecallQuery, principal: Principal | None) -> CallerScope:
        """:meth:`CallerScope.for_query` with this deployment's purposes (raises its 400/403
        :class:`~rcll.errors.Rejected` and :class:`~rcll.errors.Forbidden`)."""
        return CallerScope.for_query(bank_id, q, principal, purposes=self.purposes,
                                     default_purpose=self.default_purpose)


def prepare(ctx: RecallContext, q: RecallQuery, needs_vector: bool) -> PreparedQuery:
    """Embed the query once when a channel needs it (from ``ctx.query_cache`` when it holds
    it); remember why not when it cannot."""
    pq = PreparedQuery(q)
    if not needs_vector:
        return pq
    emb = ctx.embedder.get()
    if emb is None:
        pq.vector_error = f"embedder unavailable ({ctx.embedder.error})"
        return pq
    cache = ctx.query_cache
    cached = cache.get(emb.stamp, q.query) if cache is not None else None
    if cached is not None:
        pq.vector, pq.model = cached, emb.stamp
        return pq
    try:
        pq.vector, pq.model = emb.embed([q.query])[0], emb.stamp
        if cache is not None:
            cache.put(emb.stamp, q.query, pq.vector)
    except Exception as exc:
        pq.vector_error = f"query embedding failed ({exc})"
    return pq


def recipe_needs_vector(recipe: Recipe, channels: dict[str, Channel] = CHANNELS) -> bool:
    """Whether one of ``recipe``'s channels or fallback channels cannot run without the
    query vector (so recall embeds the query)."""
    return any(channels[n].needs_vector for n in (*recipe.channels, *recipe.fallback))


@dataclass
class EarlyChannels:
    """What :func:`early_channels` ran while the query was being embedded: the ``recipe``
    it ran them for, their ``outputs`` (channels that failed are absent: recall runs them
    again in its own turn), ``timings`` (ms per channel) and the query's matched
    ``entities`` (None: not matched)."""

    recipe: str
    outputs: dict[str, ChannelOutput] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    entities: list[dict] | None = None


def early_channels(ctx: RecallContext, conn: Connection, bank_id: str, q: RecallQuery,
                   scope: CallerScope, match_entities: bool,
                   recipes: dict[str, Recipe] = RECIPES,
                   channels: dict[str, Channel] = CHANNELS) -> EarlyChannels:
    """Run, in ``conn``'s open READ ONLY transaction, the channels of the recipe
    :meth:`RecallContext.recipe_for` picks for ``q`` that do not read the query vector
    (``uses_vector`` false: lexical, graph), as :func:`recall` runs them (custom plans, one
    savepoint for the group): the work a caller does on this thread while another embeds the
    query (:mod:`rcll.cascade`),
    handed to :func:`recall` as ``early``. ``match_entities``: also match the query's
    entities (the graph channel's input, and tier 2's) when no channel here needs them.
    Raises what the database raises outside a channel (a lost connection)."""
    name, _kind = ctx.recipe_for(bank_id, q.recipe_name, conn)
    recipe = recipes[name]
    # a channel that does not say it does not read the vector is not run before it exists
    todo = [channels[n] for n in recipe.channels if not getattr(channels[n], "uses_vector", True)]
    pq = PreparedQuery(q)
    wanted = {c.name for c in todo}
    if todo or match_entities:
        prepare_query(conn, scope, pq, time_window="temporal" in wanted,
                      entities=match_entities or "graph" in wanted)
    out = EarlyChannels(name, entities=pq.entities if pq.entities_ready else None)
    if todo:
        with custom_plans(conn):
            _run_channels(conn, ctx, scope, pq, todo, out.outputs, [], out.timings,
                          recipe.params)
    return out


def recall(ctx: RecallContext, bank_id: str, q: RecallQuery,
           recipes: dict[str, Recipe] = RECIPES,
           channels: dict[str, Channel] = CHANNELS,
           embedded: PreparedQuery | None = None,
           scope: CallerScope | None = None,
           in_transaction: Callable[[Connection, list[str]], None] | None = None,
           conn: Connection | None = None,
           early: EarlyChannels | None = None) -> RecallResult:
    """Answer ``q`` against ``bank_id`` with the recipe it names (else ``ctx.default_recipe``).
    Raises :class:`BankNotFound`.

    Phases: query preparation (embed once; time window and entities, in the transaction),
    the recipe's channels from the registry (each in its own savepoint), weighted RRF, the
    recipe's steps (context, rerank, trust, expansion, post-processing), then the token
    budget cut. A channel that cannot serve (no query vector, an error) is skipped and named
    in ``degraded``; if none of the recipe's channels could run, its ``fallback`` channels
    answer instead (dense-only with the embedder down answers lexically, mode A) — degrade,
    never refuse (spec §1.4). ``embedded``: a query the caller already prepared (its
    vector is reused, not recomputed). ``scope``: the caller scope every candidate query
    filters by (:meth:`CallerScope.for_query` with the caller's principal); None is an
    internal call (every audience, ``q.purpose`` only).
    ``in_transaction(conn, ranked_ids)``: called inside
    the read-only transaction after hydration with the ranked ids (best first, before the
    budget cut), so a caller's extra read (the tunnels, :mod:`rcll.search.tunnels`) costs no
    connection of its own; it must not raise. ``conn``: run in the caller's open READ ONLY
    transaction on it (the cascade's one transaction per recall) instead of a connection
    and transaction of its own. ``early``: channels :func:`early_channels` already ran on
    ``conn`` for this query (used when it ran them for the recipe this recall runs; the
    rest run here as usual).
    """
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    name, kind = ctx.recipe_for(bank_id, q.recipe_name, conn)
    recipe = recipes[name]
    if scope is None:
        scope = ctx.scope(bank_id, q, None)
    wanted = list(recipe.channels)
    needs_vector = recipe_needs_vector(recipe, channels)
    if embedded is not None and embedded.vector is not None:
        # the caller (the cascade's tiers 1–2) embedded this query already
        pq = PreparedQuery(q, vector=embedded.vector, model=embedded.model,
                           entities=list(embedded.entities),
                           entities_ready=embedded.entities_ready)
    else:
        pq = prepare(ctx, q, needs_vector)
    if needs_vector:
        timings["embed_query"] = _ms(t0)

    with nullcontext(conn) if conn is not None else read_only(ctx.pool) as conn:
        if conn.execute("SELECT 1 FROM memory_banks WHERE id = %s",
                        (bank_id,)).fetchone() is None:
            raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})
        state = RecallState(conn=conn, ctx=ctx, scope=scope, pq=pq, recipe=recipe,
                            timings=timings)
        ready = None
        if early is not None and early.recipe == name:
            ready = early.outputs
            timings.update(early.timings)
        t = time.perf_counter()
        prepare_query(conn, scope, pq, time_window="temporal" in wanted,
                      entities="graph" in wanted)
        timings["prepare"] = _ms(t)
        with custom_plans(conn):  # the channels by bank; the steps below by primary key
            _run_channels(conn, ctx, scope, pq, [channels[n] for n in wanted], state.outputs,
                          state.degraded, timings, recipe.params, ready)
            if not state.outputs and recipe.fallback:
                _run_channels(conn, ctx, scope, pq, [channels[n] for n in recipe.fallback],
                              state.outputs, state.degraded, timings, recipe.params)
                if state.outputs:
                    state.degraded.append(
                        f"answered by fallback channels: {', '.join(state.outputs)}")

        t = time.perf_counter()
        ranked = {name: out.candidates for name, out in state.outputs.items()}
        ranked.update({f"{name}_{key}": cands for name, out in state.outputs.items()
                       for key, cands in out.extra.items()})
        state.ranked = rrf(ranked, k=ctx.rrf_k, weights=recipe.weights)
        n_fused = len(state.ranked)
        for uid, score in state.ranked:
            state.note(uid, "rrf", score)
        timings["fuse"] = _ms(t)
        run_steps(state)
        t = time.perf_counter()
        top = state.ranked[: state.pool_size()]
        rows = state.hydrate([uid for uid, _ in top])
        if in_transaction is not None:
            in_transaction(conn, [uid for uid, _ in top if uid in rows])
        # the budget cut needs each unit's text and tokens only: cut first, then read the
        # entities of, and render, just the units kept (the pool is twice the limit)
        t_cut = time.perf_counter()
        pool = [{"id": uid, "score": score, "text": rows[uid]["text"],
                 "tokens": rows[uid]["token_count"]} for uid, score in top if uid in rows]
        kept, used = cut_to_budget(pool, q.max_tokens, q.limit, ctx.tokens)
        timings["budget"] = _ms(t_cut)
        for uid, ents in _entities(conn, [k["id"] for k in kept]).items():
            rows[uid]["entities"] = ents
        timings["hydrate"] = _ms(t)

    ranks = {name: {c.unit_id: c for c in cands} for name, cands in ranked.items()}
    results = []
    for k in kept:
        uid = k["id"]
        out = _render(rows[uid], uid, k["score"], ranks, state.stage_scores.get(uid, {}),
                      state.collapsed.get(uid, []), state.expanded_from.get(uid))
        out["tokens"] = k["tokens"]  # counted by the cut when retain stored none
        results.append(out)
    documents = _documents(results, state) if state.aggregation else None
    timings["total"] = _ms(t0)

    counts: dict = {name: len(out.candidates) for name, out in state.outputs.items()}
    counts.update(fused=n_fused, returned=len(results))
    for name, out in state.outputs.items():
        counts.update({f"{name}_{k}": v for k, v in out.info.items()})
    counts.update(state.counts)
    dense_ok = pq.vector is not None and "dense" in state.outputs
    metrics.observe_recall_pipeline(timings, {name: len(out.candidates)
                                              for name, out in state.outputs.items()})
    return RecallResult(
        results=results,
        mode=_mode(set(state.outputs)),
        channels=sorted(state.outputs),
        dense_available=(dense_ok if needs_vector else ctx.embedder.get() is not None),
        reranked=state.reranked,
        tokens_used=used,
        counts=counts,
        degraded=state.degraded,
        timings_ms=timings if q.trace else None,
        recipe=recipe.name,
        query=pq.describe() if q.trace else None,
        documents=documents, aggregation=state.aggregation, bank_kind=kind,
    )


def _documents(results: list[dict], state: RecallState) -> list[dict]:
    """The documents of ``results`` in rank order: ``[{"document_id" (the caller's id),
    "score" (the documents step's fused score), "units": [unit ids, result order]}]``; a
    unit with no document is listed as one of its own (``document_id`` None)."""
    out: dict[str, dict] = {}
    for r in results:
        key = r["document_id"] or r["id"]
        entry = out.setdefault(key, {"document_id": r["document_id"],
                                     "score": round(state.document_scores.get(key, 0.0), 6),
                                     "units": []})
        entry["units"].append(r["id"])
    return list(out.values())


def _run_channels(conn, ctx: RecallContext, scope: CallerScope, pq: PreparedQuery,
                  todo: list[Channel], outputs: dict[str, ChannelOutput], degraded: list[str],
                  timings: dict[str, float], params: dict[str, dict] | None = None,
                  ready: dict[str, ChannelOutput] | None = None) -> None:
    """Run each channel of ``todo`` not in ``outputs`` yet into ``outputs``, in ``todo``'s
    order (RRF's tie order); one ``ready`` holds (run earlier, :func:`early_channels`) is
    taken as it is, and one that needs the vector when there is none is named in
    ``degraded``.

    A failing channel must not sink the rest: the channels run in one savepoint, and when
    one raises, the savepoint is rolled back, the channel is named in ``degraded``
    (``"<name>: <error type>"``) and the channels after it run in a new savepoint. The
    candidates the earlier ones returned are kept (their reads are done). One savepoint
    per call instead of one per channel: two round trips, not two per channel."""
    got: dict[str, ChannelOutput] = {}
    runnable: list[Channel] = []
    for ch in todo:
        if ch.name in outputs:
            continue
        if ready is not None and ch.name in ready:
            got[ch.name] = ready[ch.name]
        elif ch.needs_vector and pq.vector is None:
            degraded.append(f"{ch.name}: {pq.vector_error or 'no query vector'}")
        else:
            runnable.append(ch)
    i = 0
    while i < len(runnable):
        t = time.perf_counter()
        try:
            with conn.transaction():  # savepoint: a failing channel must not sink the rest
                while i < len(runnable):
                    ch = runnable[i]
                    got[ch.name] = ch.candidates(conn, scope, pq, ctx,
                                                 **(params or {}).get(ch.name, {}))
                    timings[ch.name] = _ms(t)
                    i, t = i + 1, time.perf_counter()
        except Exception as exc:
            if i >= len(runnable):  # the savepoint's release failed, not a channel
                raise
            ch = runnable[i]
            log.warning("%s channel failed: %s", ch.name, exc)
            degraded.append(f"{ch.name}: {type(exc).__name__}")
            timings[ch.name] = _ms(t)
            i += 1
    for ch in todo:  # in todo's order, whichever ran early or here
        if ch.name in got:
            outputs.setdefault(ch.name, got[ch.name])


def _mode(ran: set[str]) -> str:
    """Zero-LLM mode (spec §5): A = lexical only, B = lexical + dense fused, C = B plus the
    graph or temporal channel; ``dense`` when only the dense channel answered; ``none`` when
    nothing could."""
    if {"dense", "lexical"} <= ran and ran & {"graph", "temporal"}:
        return "C"
    if {"dense", "lexical"} <= ran:
        return "B"
    if "lexical" in ran:
        return "A"
    return "dense" if "dense" in ran else "none"


def _entities(conn, ids: list[str]) -> dict[str, list[dict]]:
    """The entities each of ``ids`` mentions: ``{unit_id: [{"id", "name"}, ...]}`` by name,
    in one read-only query probing ``unit_entities``' primary key (unit_id, entity_id).
    benchmarks/link_stage.py prints recall p50 with and without it."""
    if not ids:
        return {}
    out: dict[str, list[dict]] = {}
    # ids as one array literal and text results: psycopg's per-element uuid adaptation of
    # 100 ids cost more than the query (1.6 vs 3.2 ms on 2 busy cores)
    for r in conn.execute(
            """SELECT ue.unit_id::text AS unit_id, e.id::text AS id, e.name
               FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
               WHERE ue.unit_id = ANY(%s::uuid[]) ORDER BY ue.unit_id, e.name, e.id""",
            ("{" + ",".join(ids) + "}",)).fetchall():
        out.setdefault(r["unit_id"], []).append({"id": r["id"], "name": r["name"]})
    return out


def _render(row: dict, uid: str, score: float, ranks: dict, stages: dict,
            collapsed: list[str] = (), expanded_from: str | None = None) -> dict:
    iso = lambda v: v.isoformat() if v is not None else None  # noqa: E731
    out = {
        "id": uid, "text": row["text"], "kind": row["kind"], "room": row["room"],
        "hall": row["hall"], "layer": row["layer"], "context": row["context"],
        "occurred_start": iso(row["occurred_start"]), "occurred_end": iso(row["occurred_end"]),
        "mentioned_at": iso(row["mentioned_at"]), "created_at": iso(row["created_at"]),
        "metadata": row["metadata"], "tags": row["tags"],
        "document_id": row["document_id"],
        "chunk_id": str(row["chunk_id"]) if row["chunk_id"] else None,
        "ranks": {},
        "scores": {**{k: round(v, 6) if isinstance(v, float) else v for k, v in stages.items()},
                   "final": round(score, 6)},
        "tokens": row["token_count"],
        "entities": row.get("entities", []),
        "collapsed": list(collapsed), "expanded_from": expanded_from,
        # stale units appear only with include_superseded: say which they are
        "superseded_by": str(row["superseded_by_id"]) if row.get("superseded_by_id") else None,
        "invalidated_reason": row.get("invalidated_reason"),
    }
    for name, by_id in ranks.items():
        c = by_id.get(uid)
        out["ranks"][name] = c.rank if c else None
        out["scores"][name] = round(c.score, 6) if c else None
    return out


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)
