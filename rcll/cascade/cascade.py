"""The recall cascade (spec §5): tier 1 hot (Redis, ACT-R), tier 2 warm (PostgreSQL: entity
drawer + LSH shortlist + cosine), tier 3 cold (the full pipeline of
:func:`rcll.search.recall.recall`), chosen per request by :func:`rcll.cascade.policy.plan`.

A tier *answers* when it has at least ``min_hits`` hits above its similarity threshold that
PostgreSQL still serves to this caller — and, in tier 1, when a re-asked question's cached
answer is whole (:func:`rcll.cascade.hot.is_complete_reask`); otherwise the next tier
runs. The last tier a plan allows answers with whatever it has. Hits of tiers 1 and 2 are
hydrated from PostgreSQL through the caller scope (one read-only primary-key query), so a
cached id that PostgreSQL would not return — superseded, invalidated, deleted, out of scope — is never served.

After the response, off the request path (:class:`rcll.cascade.after.AfterRecall`): the
returned units' activation and cues are recorded, the cold tier's top ``promote_top`` and the
warm tier's hits are promoted to tier 1.

Degradation (spec §1.4): Redis down → tier 1 is skipped (a circuit breaker stops retrying for
``redis_retry_s`` seconds so no recall waits on a dead socket) and tiers 2–3 answer; no query
vector (embedder down) → tiers 1–2 cannot score and the cold tier answers lexically (mode A).
Every skip is named in ``degraded``. A database outage is not degraded around: the warm tier
re-raises it (``PoolTimeout``, a lost connection: the API's 503) instead of letting the cold
tier wait for the pool a second time.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, replace

from rcll.access.principal import Principal
from rcll.cascade.hot import is_complete_reask
from rcll.cascade.policy import Plan, plan
from rcll.config import Settings
from rcll.db import is_transient, read_only
from rcll.errors import BankNotFound
from rcll.search.budget import cut_to_budget
from rcll.search.models import RecallQuery, RecallResult
from rcll.search.recall import (
    EarlyChannels,
    RecallContext,
    _entities,
    _render,
    early_channels,
    prepare,
    recall,
    recipe_needs_vector,
)
from rcll.search.recipes import POST, RECIPES
from rcll.search.scope import CallerScope
from rcll.search.state import UNIT_COLUMNS, RecallState
from rcll.search.steps import run_steps
from rcll.search.tunnels import SCORE_FACTOR, TOP_SOURCES, TunnelHit, follow
from rcll.telemetry import metrics

log = logging.getLogger(__name__)

COMPACT_FIELDS = ("id", "text", "kind", "layer", "tokens")
LOOKAHEAD_SLACK = 5  # ranked units beyond the top sources whose tunnels are read too


@dataclass(frozen=True)
class CascadeSettings:
    """Thresholds of the cascade.

    ``hot_threshold``/``warm_threshold``: similarity a tier-1/tier-2 hit must reach (cosine
    of unit-norm MiniLM vectors; chosen by ``benchmarks/recall_cascade.py``,
    docs/decisions/0006-cascade-thresholds.md). ``min_hits``: hits that make a tier
    sufficient (spec §5: 3). ``promote_top``: cold results promoted to tier 1 after the
    response (spec §5 says 3; ``benchmarks/recall_cascade.py --promote-top``, same record).
    ``redis_retry_s``: how long tier 1 stays off after a Redis error.
    ``overlap_max_in_flight``: while the process runs at most this many recalls, a recall
    embeds its query on a thread of its own and meanwhile runs the cold recipe's channels
    that do not read the vector (:func:`~rcll.search.recall.early_channels`); 0 = never
    (``RCLL_RECALL_OVERLAP_MAX_IN_FLIGHT``, docs/decisions/0027-overlap-when-idle.md).
    """

    # the defaults are the settings' (rcll.config), documented there
    hot_threshold: float = Settings.model_fields["hot_threshold"].default
    warm_threshold: float = Settings.model_fields["warm_threshold"].default
    min_hits: int = Settings.model_fields["cascade_min_hits"].default
    promote_top: int = Settings.model_fields["hot_promote_top"].default
    redis_retry_s: float = 5.0
    overlap_max_in_flight: int = Settings.model_fields["recall_overlap_max_in_flight"].default


class _Breaker:
    """Open for ``retry_s`` seconds after a failure: callers skip the part instead of waiting
    on it. Thread-safe."""

    def __init__(self, retry_s: float):
        self.retry_s, self._until, self._why = retry_s, 0.0, ""
        self._lock = threading.Lock()

    def open_reason(self) -> str | None:
        with self._lock:
            left = self._until - time.monotonic()
            return f"{self._why} (retrying in {left:.1f} s)" if left > 0 else None

    def trip(self, why: str) -> None:
        with self._lock:
            self._until, self._why = time.monotonic() + self.retry_s, why


class Cascade:
    """Recall through the tiers. ``hot``: a :class:`rcll.cascade.hot.HotTier` or None (no
    Redis tier configured); ``after``: a :class:`rcll.cascade.after.AfterRecall` or None
    (activation off); ``warm``: the tier-2 lookup function (default
    :func:`rcll.cascade.warm.warm_lookup`) or None."""

    def __init__(self, ctx: RecallContext, hot=None, after=None, warm="default",
                 settings: CascadeSettings | None = None, route=None, gate=None):
        if warm == "default":
            from rcll.cascade.warm import warm_lookup
            warm = warm_lookup
        self.ctx, self.hot, self.after, self.warm = ctx, hot, after, warm
        self.route = route  # bank id -> the pool this recall reads (a replica or ctx.pool)
        self.gate = gate  # rcll.admission.Gate: backpressure, or None
        self.settings = settings or CascadeSettings()
        self.redis_breaker = _Breaker(self.settings.redis_retry_s)
        self._in_flight = 0  # recalls of this process running now (the overlap rule)
        self._in_flight_lock = threading.Lock()
        self._embedding: ThreadPoolExecutor | None = None  # started on first overlap

    def recall(self, bank_id: str, q: RecallQuery,
               principal: Principal | None = None) -> RecallResult:
        """:meth:`_recall` inside a slot of ``gate`` (backpressure, :mod:`rcll.admission`):
        past saturation it raises :class:`~rcll.errors.Overloaded` (503) after the gate's
        bounded wait instead of queueing."""
        with self._in_flight_lock:
            self._in_flight += 1
        try:
            if self.gate is None:
                return self._recall(bank_id, q, principal)
            with self.gate.slot("recall"):
                return self._recall(bank_id, q, principal)
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1

    def _recall(self, bank_id: str, q: RecallQuery,
                principal: Principal | None = None) -> RecallResult:
        """Answer ``q`` against ``bank_id`` for ``principal`` through the tiers its plan
        allows. Every tier filters by the caller scope (:meth:`RecallContext.scope`:
        audience, purpose, hierarchy) inside its candidate query — tier 1 from the audience
        and purposes it stores with each unit, tiers 2–3 in SQL — and tier 1–2 hits are
        verified through the same scope in PostgreSQL. ``principal`` None: an internal call
        (every audience; purpose only if ``q.purpose`` names one). Raises
        :class:`BankNotFound`, :class:`~rcll.errors.Forbidden` (no read on the bank),
        :class:`~rcll.errors.Rejected` (400 ``unknown_purpose``, 403 ``purpose_not_granted``).

        Whichever tier answers, tunnels are then followed from its top results (unless
        ``q.follow_tunnels`` is false; :meth:`_merge_tunnels`): the tunnelled units are
        read from PostgreSQL for this caller on every request, in the answering tier's
        transaction, never cached in tier 1.

        With a read replica (``route``, :meth:`rcll.replica.ReplicaRouter.pool_for`) every
        PostgreSQL read of this recall — tier 2, the hydration of tier-1/2 hits, tier 3 —
        runs on the pool ``route(bank_id)`` chose: the replica only when it has replayed
        the bank's last fenced write, so a forgotten unit is never served from tier 1 or
        from a lagging replica.

        The result's ``tiers`` lists the tiers tried, the answering one last;
        ``tier_reason`` says why; ``timings_ms`` (with ``trace``, ms) holds ``tier_hot`` and
        ``tier_warm`` (the lookups), ``tier_hot_verify`` / ``tier_warm_verify`` (hydrating
        the hits through the caller scope in PostgreSQL, when they were enough to answer),
        ``tier_cold`` (the whole pipeline), ``tunnels`` and ``total``."""
        t0 = time.perf_counter()
        ctx = self.ctx
        if self.route is not None:  # a read replica: the pool fresh enough for this bank
            pool = self.route(bank_id)
            if pool is not ctx.pool:
                ctx = replace(ctx, pool=pool)
        with _Reader(ctx.pool) as reader:
            return self._tiers(ctx, reader, t0, bank_id, q, principal)

    def _tiers(self, ctx: RecallContext, reader: _Reader, t0: float, bank_id: str,
               q: RecallQuery, principal: Principal | None) -> RecallResult:
        """The body of :meth:`_recall`: every PostgreSQL read of the recall (tier 2, the
        hydration of tier-1/2 hits, tier 3) in ``reader``'s one READ ONLY transaction."""
        scope = ctx.scope(bank_id, q, principal)
        p = plan(q)
        principal = principal or Principal.unrestricted()  # tunnels: whose banks
        timings: dict[str, float] = {}
        degraded: list[str] = []
        tried: list[str] = []
        if not p.tiers:
            self._check_bank(reader, bank_id)
            return self._result([], p, tried, degraded, timings, t0, q, mode="none")

        pq = None
        early = None
        if "hot" in p.tiers or "warm" in p.tiers:
            if self._may_overlap(ctx, q, p):
                pq, early = self._embed_overlapped(ctx, reader, bank_id, q, scope, p, timings)
            else:
                pq = prepare(ctx, q, needs_vector=True)
            timings["embed_query"] = _ms(t0)
            if pq.vector is None:
                degraded.append(f"hot, warm: {pq.vector_error or 'no query vector'}")
        elif self._may_overlap(ctx, q, p) and self._cold_embeds(ctx, reader, bank_id, q):
            # a cold-only plan (a time-relative or scoped query) whose recipe embeds it
            pq, early = self._embed_overlapped(ctx, reader, bank_id, q, scope, p, timings)
            timings["embed_query"] = _ms(t0)

        last = p.tiers[-1]
        incomplete = False  # tier 1 held a re-asked question's answer with a part missing
        pooled: dict[str, tuple[float, float | None, str, str]] = {}
        for tier in ("hot", "warm"):
            if tier not in p.tiers or pq is None or pq.vector is None:
                continue
            t = time.perf_counter()
            hits = self._lookup(ctx, reader, tier, scope, pq, p, degraded)
            timings[f"tier_{tier}"] = _ms(t)
            if hits is None:
                continue
            tried.append(tier)
            for h in hits:
                pooled.setdefault(h.unit_id, (h.similarity, h.activation, h.via, tier))
            if tier != last and (len(hits) < self.settings.min_hits or (
                    tier == "hot" and not is_complete_reask(hits, self.settings.promote_top))):
                if len(hits) >= self.settings.min_hits:
                    incomplete = True
                continue  # not enough to answer: no need to ask PostgreSQL about them
            t = time.perf_counter()
            found = _TunnelLookup(scope, principal, p) if q.follow_tunnels else None
            answer, stale, post_counts = self._answer(ctx, reader, bank_id, scope, pq,
                                                      hits if tier != last else None, pooled, p,
                                                      found)
            timings[f"tier_{tier}_verify"] = _ms(t)
            if stale and tier == "hot":
                # a cached unit PostgreSQL no longer serves (an invalidation Redis missed):
                # drop it from tier 1 and let the next tier answer in full
                self._forget_stale(bank_id, stale)
                if tier != last:
                    continue
            if len(answer) >= self.settings.min_hits or tier == last:
                results, used = cut_to_budget(answer, p.max_tokens, p.limit, ctx.tokens)
                promote = [r["id"] for r in results] if tier == "warm" else []
                self._after(bank_id, results, pq, promote)  # the bank's own units only
                results, used = self._merge_tunnels(ctx, found, p, results, used, post_counts,
                                                    degraded, timings)
                # a hit PostgreSQL refused (stale: re-scoped, forgotten, an invalidation
                # Redis missed) is not counted either: counts see only rows that passed
                gone = set(stale or ())
                passed = sum(1 for h in hits if h.unit_id not in gone)
                return self._result(results, p, tried, degraded, timings, t0, q, used=used,
                                    hits={tier: passed}, extra=post_counts)
        counts_extra = {"hot_incomplete_reask": 1} if incomplete else {}
        if "cold" not in p.tiers:  # the plan allows no cold tier: what the tiers had, or nothing
            return self._result([], p, tried, degraded, timings, t0, q, extra=counts_extra)

        t = time.perf_counter()
        cold_q = q.model_copy(update={"limit": p.limit, "max_tokens": p.max_tokens})
        found = _TunnelLookup(scope, principal, p) if q.follow_tunnels else None
        res = recall(ctx, bank_id, cold_q, embedded=pq, scope=scope, in_transaction=found,
                     conn=reader.conn(), early=early)
        timings["tier_cold"] = _ms(t)
        tried.append("cold")
        top = [r["id"] for r in res.results[: self.settings.promote_top]]
        if p.cache:  # cues and promotions only from answers any re-ask may reuse
            self._after(bank_id, res.results, pq, top, query=q.query)
        results = [_compact(r) for r in res.results] if p.compact else res.results
        results, used = self._merge_tunnels(ctx, found, p, results, res.tokens_used,
                                            counts_extra, degraded, timings)
        if res.timings_ms is not None:
            timings = {**res.timings_ms, **timings}
        timings["total"] = _ms(t0)
        metrics.observe_recall(timings, tried, used, len(results))
        return replace(res, results=results, tiers=tried, tier_reason=p.reason,
                       tokens_used=used,
                       counts={**res.counts, **counts_extra, "returned": len(results)},
                       degraded=degraded + res.degraded,
                       timings_ms=timings if q.trace else None)

    # -- the query's embedding beside the channels that do not need it ---------------------
    def _may_overlap(self, ctx: RecallContext, q: RecallQuery, p: Plan) -> bool:
        """Overlap when the cold tier may run, the process has a core to spare (at most
        ``overlap_max_in_flight`` recalls in flight: above that every core is busy with
        other recalls, and the early channels would only add the work wasted when tier 1 or
        2 answers) and the query needs embedding (not in the query cache)."""
        limit = self.settings.overlap_max_in_flight
        if limit <= 0 or "cold" not in p.tiers or self._in_flight > limit:
            return False
        emb = ctx.embedder.get()
        if emb is None:
            return False
        cache = ctx.query_cache
        return cache is None or cache.get(emb.stamp, q.query) is None

    @staticmethod
    def _cold_embeds(ctx: RecallContext, reader: _Reader, bank_id: str, q: RecallQuery) -> bool:
        """Whether the recipe the cold tier runs for ``q`` needs the query vector."""
        name, _kind = ctx.recipe_for(bank_id, q.recipe_name, reader.conn())
        return recipe_needs_vector(RECIPES[name])

    def _embed_overlapped(self, ctx: RecallContext, reader: _Reader, bank_id: str,
                          q: RecallQuery, scope: CallerScope, p: Plan, timings: dict):
        """``(pq, early)``: the query embedded on a thread of this cascade's pool (the
        embedder releases the GIL) while this thread runs the cold recipe's vector-free
        channels and matches the query's entities in the recall's transaction
        (:func:`~rcll.search.recall.early_channels`; ``early`` None when that failed for
        any reason but a database outage, which is raised). ``timings["early_channels"]``:
        their ms."""
        with self._in_flight_lock:
            if self._embedding is None:
                self._embedding = ThreadPoolExecutor(
                    max_workers=max(1, self.settings.overlap_max_in_flight),
                    thread_name_prefix="rcll-embed")
        future = self._embedding.submit(prepare, ctx, q, True)
        early: EarlyChannels | None = None
        t = time.perf_counter()
        try:
            early = early_channels(ctx, reader.conn(), bank_id, q, scope,
                                   match_entities="warm" in p.tiers)
        except Exception as exc:
            if is_transient(exc):
                future.result()  # let the embedding finish before the 503
                raise
            reader.reset()  # an aborted transaction: the tiers read in a new one
            log.warning("early channels failed: %s", exc)
        timings["early_channels"] = _ms(t)
        pq = future.result()
        if early is not None and early.entities is not None:
            pq.entities, pq.entities_ready = early.entities, True
        return pq, early

    # -- tunnels -----------------------------------------------------------------------------
    def _merge_tunnels(self, ctx: RecallContext, found: _TunnelLookup | None, p: Plan,
                       results: list[dict], used: int, counts: dict, degraded: list[str],
                       timings: dict) -> tuple[list[dict], int]:
        """Insert, just below each of the top :data:`~rcll.search.tunnels.TOP_SOURCES`
        results, the units its tunnels reach that this caller may see (``found``, read in
        the answering tier's transaction), each unit once, then cut again to the plan's
        ``limit`` and token budget (a tunnelled unit may push the lowest-ranked own units
        out). Each carries ``bank_id`` and ``tunnel`` ``{id, relationship, from_unit_id,
        bank_id}``; ``counts.tunnels_followed`` is how many were kept, ``timings_ms.tunnels``
        the lookup. A failed lookup is named in ``degraded`` (``tunnels: <error>``) and
        changes nothing. Returns ``(results, tokens_used)``."""
        if found is None or not found.ran:
            return results, used
        timings["tunnels"] = found.ms
        if found.error:
            degraded.append(f"tunnels: {found.error}")
            return results, used
        under: dict[str, list[TunnelHit]] = {}
        for h in found.hits:
            under.setdefault(h.from_unit_id, []).append(h)
        merged: list[dict] = []
        seen: set[str] = set()
        for i, r in enumerate(results):
            merged.append(r)
            for h in under.get(r["id"], []) if i < TOP_SOURCES else []:
                if h.unit_id in seen:
                    continue
                seen.add(h.unit_id)
                score = float(r.get("scores", {}).get("final") or 0.0) * SCORE_FACTOR
                row = {**h.row, "entities": found.entities.get(h.unit_id, [])}
                rendered = _render(row, h.unit_id, score, {}, {"tunnel": SCORE_FACTOR}, [], None)
                if p.compact:
                    rendered = _compact(rendered)
                rendered["bank_id"] = h.bank_id
                rendered["tunnel"] = h.tunnel_json()
                merged.append(rendered)
        if seen:
            results, used = cut_to_budget(merged, p.max_tokens, p.limit, ctx.tokens)
        counts["tunnels_followed"] = sum(1 for r in results if "tunnel" in r)
        return results, used

    # -- tiers -------------------------------------------------------------------------------
    def _lookup(self, ctx: RecallContext, reader: _Reader, tier: str, scope: CallerScope, pq, p: Plan,
                degraded: list[str]):
        """The tier's hits, or None when it cannot run (reason appended to ``degraded``)."""
        if tier == "hot":
            if self.hot is None:
                return None
            why = self.redis_breaker.open_reason()
            if why:
                degraded.append(f"hot: {why}")
                return None
            try:
                return self.hot.lookup(scope, pq.vector, threshold=self.settings.hot_threshold,
                                       limit=max(p.limit, self.settings.min_hits))
            except Exception as exc:  # redis.RedisError and its kin: tier 1 off for a while
                reason = f"Redis unavailable ({type(exc).__name__})"
                self.redis_breaker.trip(reason)
                log.warning("hot tier: %s: %s", reason, exc)
                degraded.append(f"hot: {reason}")
                return None
        if self.warm is None:
            return None
        from rcll.search.query_prep import prepare_query
        try:
            conn = reader.conn()
            prepare_query(conn, scope, pq, time_window=False, entities=True)
            return self.warm(conn, scope, pq, threshold=self.settings.warm_threshold,
                             limit=max(p.limit, self.settings.min_hits))
        except Exception as exc:
            if is_transient(exc):  # the database is away: the cold tier could not answer
                raise              # either, and waiting for it again would double the 503's wait
            reader.reset()  # the failed statement aborted the transaction: the next tier
            # reads in a new one
            log.warning("warm tier failed: %s", exc)
            degraded.append(f"warm: {type(exc).__name__}")
            return None

    def _answer(self, ctx: RecallContext, reader: _Reader, bank_id: str, scope: CallerScope, pq, hits,
                pooled: dict, p: Plan, tunnels: _TunnelLookup | None = None
                ) -> tuple[list[dict], list[str], dict]:
        """Hydrate ``hits`` (or, for the last tier, every hit pooled so far) through the
        caller scope, best similarity first, then run the post-processing every recipe runs
        (spec §5: Memory Worth filter, the bank's L0 units first, duplicates collapsed) and
        render them like the cold tier's results. ``(results, stale, counts)``: ``stale`` are
        hit ids PostgreSQL no longer serves to this caller (never returned), ``counts`` what
        the post-processing reports (``worth_dropped``, ``l0``, ``collapsed``, …)."""
        if hits is not None:
            chosen = [(h.unit_id, (h.similarity, h.activation, h.via, None)) for h in hits]
        else:
            chosen = sorted(pooled.items(), key=lambda kv: -kv[1][0])
        ids = [uid for uid, _ in chosen]
        where, params = scope.where("u")
        with nullcontext(reader.conn()) as conn:
            if conn.execute("SELECT 1 FROM memory_banks WHERE id = %s",
                            (bank_id,)).fetchone() is None:
                raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})
            rows = {}
            if ids:
                rows = {str(r["id"]): r for r in conn.execute(
                    f"""SELECT {UNIT_COLUMNS} FROM memory_units u
                        LEFT JOIN documents d ON d.id = u.document_id
                        WHERE u.id = ANY(%(ids)s::uuid[]) AND {where}""",
                    {**params, "ids": "{" + ",".join(ids) + "}"}).fetchall()}
            stale = [uid for uid in ids if uid not in rows]
            hit_of = {uid: v for uid, v in chosen if uid in rows}
            recipe = RECIPES[ctx.default_recipe]
            state = RecallState(conn=conn, ctx=ctx, scope=scope, pq=pq, recipe=recipe)
            state.rows.update(rows)
            state.ranked = [(uid, float(v[0])) for uid, v in hit_of.items()]
            run_steps(state, steps=POST)
            rows = state.hydrate([uid for uid, _ in state.ranked])
            # the same fields whichever tier answers: the entities each unit mentions, as cold
            for uid, ents in _entities(conn, [u for u, _ in state.ranked if u in rows]).items():
                rows[uid]["entities"] = ents
            if tunnels is not None:  # in this transaction: no connection of its own
                tunnels(conn, [uid for uid, _ in state.ranked if uid in rows])
        out = []
        for uid, score in state.ranked:
            if uid not in rows:
                continue
            stages = dict(state.stage_scores.get(uid, {}))
            if uid in hit_of:
                sim, act, via, _tier = hit_of[uid]
                stages.update(similarity=round(float(sim), 6), via=via)
                if act is not None:
                    stages["activation"] = round(float(act), 6)
            r = _render(rows[uid], uid, float(score), {}, stages,
                        state.collapsed.get(uid, []), None)
            out.append(_compact(r) if p.compact else r)
        return out, stale, dict(state.counts)

    def _forget_stale(self, bank_id: str, ids: list[str]) -> None:
        """Best effort: remove ``ids`` from tier 1 (never fails the recall)."""
        if self.hot is None or self.redis_breaker.open_reason():
            return
        try:
            self.hot.invalidate(bank_id, ids)
        except Exception as exc:
            log.warning("hot tier: could not drop stale units: %s", exc)

    def _after(self, bank_id: str, results: list[dict], pq, promote: list[str],
               query: str | None = None) -> None:
        if self.after is None or not results:
            return
        vector = pq.vector if pq is not None else None
        if vector is None and self.ctx.query_cache is not None and query is not None:
            # a cold-only plan embedded inside recall(): its vector is in the query cache
            emb = self.ctx.embedder.get()
            if emb is not None:
                vector = self.ctx.query_cache.get(emb.stamp, query)
        try:
            self.after.submit(bank_id, [r["id"] for r in results], vector, promote)
        except Exception as exc:  # never fail a recall for bookkeeping
            log.warning("after-recall submit failed: %s", exc)

    def _check_bank(self, reader: _Reader, bank_id: str) -> None:
        with nullcontext(reader.conn()) as conn:
            if conn.execute("SELECT 1 FROM memory_banks WHERE id = %s",
                            (bank_id,)).fetchone() is None:
                raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})

    def _result(self, results, p: Plan, tried, degraded, timings, t0, q, *, used: int = 0,
                mode: str = "C", hits: dict | None = None,
                extra: dict | None = None) -> RecallResult:
        timings["total"] = _ms(t0)
        metrics.observe_recall(timings, tried, used, len(results))
        counts = {**{f"{k}_hits": v for k, v in (hits or {}).items()}, **(extra or {}),
                  "returned": len(results)}
        return RecallResult(results=results, mode=mode, channels=[], dense_available=mode == "C",
                            reranked=False, tokens_used=used, counts=counts, degraded=degraded,
                            timings_ms=timings if q.trace else None, recipe=None,
                            tiers=tried, tier_reason=p.reason)


class _Reader:
    """One READ ONLY transaction for a whole recall (:func:`rcll.db.read_only`), begun on
    first use: tier 2, the hydration of tier-1/2 hits and tier 3 share one pooled
    connection, one ``BEGIN READ ONLY`` and one ``COMMIT`` (a recall tier 1 cannot answer
    makes one checkout instead of three). :meth:`reset` rolls back a transaction a failed
    statement aborted; the next :meth:`conn` begins a new one."""

    def __init__(self, pool):
        self.pool, self._stack, self._conn = pool, ExitStack(), None

    def conn(self):
        if self._conn is None:
            self._conn = self._stack.enter_context(read_only(self.pool))
        return self._conn

    def reset(self) -> None:
        if self._conn is not None:
            self._conn = None
            self._stack.__exit__(RuntimeError, RuntimeError("reset"), None)
            self._stack = ExitStack()

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc) -> bool:
        self._conn = None
        return self._stack.__exit__(*exc)


class _TunnelLookup:
    """Reads, inside the answering tier's read-only transaction (a savepoint, so a failure
    sinks nothing), the units tunnels join the first ``min(limit, TOP_SOURCES) +
    LOOKAHEAD_SLACK`` ranked ids to (:func:`rcll.search.tunnels.follow`; the budget cut
    may skip a unit too long to fit, so the final top sources are among them) and their
    entities. Never raises: an error is kept in ``error``."""

    def __init__(self, scope: CallerScope, principal: Principal, p: Plan):
        self.scope, self.principal, self.compact = scope, principal, p.compact
        self.sources = min(p.limit, TOP_SOURCES) + LOOKAHEAD_SLACK
        self.ran, self.ms, self.error = False, 0.0, None
        self.hits: list[TunnelHit] = []
        self.entities: dict[str, list[dict]] = {}

    def __call__(self, conn, ranked_ids: list[str]) -> None:
        t = time.perf_counter()
        self.ran = True
        try:
            with conn.transaction():
                self.hits = follow(conn, self.scope, self.principal,
                                   ranked_ids[: self.sources])
                if self.hits and not self.compact:
                    self.entities = _entities(conn, [h.unit_id for h in self.hits])
        except Exception as exc:  # degrade, never refuse (spec §1.4)
            log.warning("following tunnels failed: %s", exc)
            self.hits, self.error = [], type(exc).__name__
        self.ms = _ms(t)


def _compact(r: dict) -> dict:
    out = {k: r[k] for k in COMPACT_FIELDS if k in r}
    out["scores"] = {"final": r.get("scores", {}).get("final")}
    return out


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)
