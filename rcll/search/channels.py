"""Recall channels as a registry: each one yields ranked candidates for a scope and a query.

A channel is a name, what it needs from the prepared query (``needs_vector``: it cannot run
without the query vector; ``uses_vector``: it reads the vector when there is one, so it
cannot run before the query is embedded without changing its scores), and ``candidates(conn, scope,
prepared, ctx)``. Recall iterates the strategy's channels from :data:`CHANNELS` (a failing
one rolled back alone, :func:`rcll.search.recall._run_channels`), so a new channel (graph,
temporal) is one class and one registry entry.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import numpy as np
from psycopg import Connection
from psycopg.pq import TransactionStatus

from rcll.search.dense import dense_candidates
from rcll.search.lexical import lexical_candidates
from rcll.search.models import Candidate, RecallQuery
from rcll.search.scope import CallerScope, ScopeSizes

if TYPE_CHECKING:
    from rcll.search.recall import RecallContext


@contextmanager
def custom_plans(conn: Connection) -> Iterator[None]:
    """Inside ``conn``'s open transaction, plan every statement of the block with its
    parameter values (``plan_cache_mode = force_custom_plan``, transaction-local), then give
    the transaction its previous mode back. One round trip each way.

    The channels' statements filter by bank id, and their best plan depends on the bank (its
    own HNSW index, its row count; docs/decisions/0009-vector-index-per-bank.md): psycopg
    prepares a statement after five runs, and PostgreSQL may then switch it to a generic
    plan that cannot see the bank. The steps after fusion read rows by primary key, so they
    keep PostgreSQL's default (``auto``) and, once prepared, skip planning
    (docs/decisions/0027-overlap-when-idle.md). Not restored when the transaction failed:
    its rollback undoes the setting."""
    prev = conn.execute("SELECT current_setting('plan_cache_mode') AS m, "
                        "set_config('plan_cache_mode', 'force_custom_plan', true)").fetchone()
    try:
        yield
    finally:
        if conn.info.transaction_status == TransactionStatus.INTRANS:
            conn.execute("SELECT set_config('plan_cache_mode', %s, true)", (prev["m"],))


@dataclass
class PreparedQuery:
    """The query once prepared: the request, and its unit-norm float32 vector ``(dim,)`` with
    the embedder's model name when the embedder could serve (else ``None`` and why not)."""

    request: RecallQuery
    vector: np.ndarray | None = None
    model: str | None = None
    vector_error: str | None = None
    # filled by rcll.search.query_prep.prepare_query inside the recall transaction
    reference_time: datetime | None = None
    time_window: tuple[datetime, datetime] | None = None
    time_expression: str | None = None
    entities: list[dict] = field(default_factory=list)
    entities_ready: bool = False  # entities matched already (the cascade's tier 2)
    sizes: ScopeSizes = field(default_factory=ScopeSizes)  # counts the channels share

    def describe(self) -> dict:
        """What query preparation found, for ``trace``: ``{"reference_time", "time_window":
        [start, end] | None, "time_expression", "entities": [{"id", "name", ...}]}``."""
        iso = lambda v: v.isoformat() if v is not None else None  # noqa: E731
        return {"reference_time": iso(self.reference_time),
                "time_window": [iso(t) for t in self.time_window] if self.time_window else None,
                "time_expression": self.time_expression, "entities": self.entities}

    @property
    def text(self) -> str:
        return self.request.query

    @property
    def topic_text(self) -> str:
        """The query without its time expression (once :func:`prepare_query` found one): the
        words left for relevance scoring, the time being the temporal channel's window."""
        if not self.time_expression:
            return self.text
        return self.text.replace(self.time_expression, " ", 1)


@dataclass
class ChannelOutput:
    """A channel's ranked candidates (rank 1 first) and what it reports about itself
    (surfaced in the response's ``counts`` as ``<channel>_<key>``)."""

    candidates: list[Candidate]
    info: dict = field(default_factory=dict)
    # further rankings the channel computed alongside its own, each fused as an RRF list of
    # its own named "<channel>_<key>" (weight from the recipe): lexical's "feedback"
    extra: dict[str, list[Candidate]] = field(default_factory=dict)
    # what later steps read of the channel's work and the response does not show: lexical's
    # "held" ({unit_id: query terms its own text holds}) and "held_complete"
    private: dict = field(default_factory=dict)


class Channel(Protocol):
    """A candidate generator over the units a :class:`CallerScope` allows."""

    name: str
    needs_vector: bool
    uses_vector: bool

    def candidates(self, conn: Connection, scope: CallerScope, pq: PreparedQuery,
                   ctx: RecallContext, **params) -> ChannelOutput: ...


class DenseChannel:
    """pgvector cosine similarity to the query vector, floor ``ctx.dense_floor``."""

    name = "dense"
    needs_vector = True
    uses_vector = True

    def candidates(self, conn, scope, pq, ctx, floor: float | None = None) -> ChannelOutput:
        """``floor``: the recipe's cosine floor (None: the deployment's ``ctx.dense_floor``)."""
        cands = dense_candidates(conn, scope, pq.vector, model=pq.model,
                                 limit=ctx.candidates_per_channel,
                                 floor=ctx.dense_floor if floor is None else floor)
        return ChannelOutput(cands)


class LexicalChannel:
    """Okapi BM25 over PostgreSQL full text (see :mod:`rcll.search.lexical`)."""

    name = "lexical"
    needs_vector = False
    uses_vector = False

    def candidates(self, conn, scope, pq, ctx, context: float = 0.0,
                   context_max_avgdl: float | None = None, prf_terms: int = 0,
                   prf_weight: float = 0.3, prf_separate: bool = False,
                   query_tf: bool = False, df_cutoff: float | None = None) -> ChannelOutput:
        """``context``: weight γ of the neighbours' words (0 = the unit's own text only),
        applied in banks whose units average ≤ ``context_max_avgdl`` tokens (BM25's avgdl; None:
        all). ``prf_terms`` > 0: pseudo-relevance feedback with that many expansion terms
        at ``prf_weight`` (:func:`rcll.search.lexical.lexical_candidates`); with
        ``prf_separate`` the expanded ranking is not the channel's own but a second list,
        ``extra["feedback"]`` (fused as ``lexical_feedback``), so the query's own ranking
        keeps the head. ``query_tf``: weigh each term by how often the query says it;
        ``df_cutoff``: the recipe's common-term share (None: the deployment's
        ``ctx.lexical_df_cutoff``; above 1 nothing is pruned)."""
        cands, info = lexical_candidates(conn, scope, pq.request.query,
                                         limit=ctx.candidates_per_channel,
                                         df_cutoff=(ctx.lexical_df_cutoff if df_cutoff is None
                                                    else df_cutoff),
                                         context_weight=context,
                                         context_max_avgdl=context_max_avgdl,
                                         prf_terms=prf_terms, prf_weight=prf_weight,
                                         prf_separate=prf_separate, query_tf=query_tf,
                                         sizes=pq.sizes)
        extra = {"feedback": info.pop("feedback")} if "feedback" in info else {}
        private = {"held": info.pop("held", {}),
                   "held_complete": info.pop("held_complete", False)}
        out_info = {"terms": info.get("terms", []),
                    "dropped_terms": info.get("dropped_terms", []),
                    "context": info.get("context_weight", 0.0),
                    "idf": info.get("idf", {})}
        if "expansion_terms" in info:
            out_info["expansion_terms"] = info["expansion_terms"]
        return ChannelOutput(cands, out_info, extra, private)


class GraphChannel:
    """Spreading activation from the query's entities (see :mod:`rcll.search.graph`)."""

    name = "graph"
    needs_vector = False
    uses_vector = False

    def candidates(self, conn, scope, pq, ctx) -> ChannelOutput:
        from rcll.search.graph import graph_candidates
        return graph_candidates(conn, scope, pq, ctx)


class TemporalChannel:
    """Units in the query's time window (see :mod:`rcll.search.temporal`)."""

    name = "temporal"
    needs_vector = False
    uses_vector = True

    def candidates(self, conn, scope, pq, ctx) -> ChannelOutput:
        from rcll.search.temporal import temporal_candidates
        return temporal_candidates(conn, scope, pq, ctx)


CHANNELS: dict[str, Channel] = {c.name: c for c in (DenseChannel(), LexicalChannel(),
                                                     GraphChannel(), TemporalChannel())}
