"""The state one recall carries through its steps (see :mod:`rcll.search.steps`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from psycopg import Connection

from rcll.search.channels import ChannelOutput, PreparedQuery
from rcll.search.recipes import Recipe
from rcll.search.scope import CallerScope

if TYPE_CHECKING:
    from rcll.search.recall import RecallContext

UNIT_COLUMNS = """u.id, u.text, u.kind, u.room, u.hall, u.layer, u.context, u.occurred_start,
    u.occurred_end, u.mentioned_at, u.created_at, u.metadata, u.tags, u.chunk_id, u.token_count,
    u.origin, u.confidence, u.superseded_by_id, u.invalidated_reason,
    d.document_id AS document_id"""


@dataclass
class RecallState:
    """One recall in progress, inside its READ ONLY transaction.

    ``ranked``: the current order ``[(unit_id, score)]``, best first — RRF scores after
    fusion, rewritten by each step. ``rows``: hydrated units by id (``hydrate``). ``stage
    scores``: ``{unit_id: {stage: score}}`` reported per result. ``counts`` and ``degraded``
    go to the response; ``timings`` (ms) too when the request asks for ``trace``.
    ``collapsed`` ``{kept_id: [ids]}`` and ``expanded_from`` ``{unit_id: source_id}`` are
    shown on each result.
    """

    conn: Connection
    ctx: RecallContext
    scope: CallerScope
    pq: PreparedQuery
    recipe: Recipe
    outputs: dict[str, ChannelOutput] = field(default_factory=dict)
    ranked: list[tuple[str, float]] = field(default_factory=list)
    rows: dict[str, dict] = field(default_factory=dict)
    stage_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    reranked: bool = False
    # post-processing provenance, rendered per result: kept unit → the near-duplicates
    # collapsed into it (rcll.search.post), expanded unit → the unit whose link added it
    # (rcll.search.adjust)
    collapsed: dict[str, list[str]] = field(default_factory=dict)
    expanded_from: dict[str, str] = field(default_factory=dict)
    # the documents step (rcll.search.documents): which aggregation ran and each ranked
    # document's fused score (the document's own id, or the unit id for a unit without a
    # document → score); None / empty when it did not run
    aggregation: str | None = None
    document_scores: dict[str, float] = field(default_factory=dict)

    @property
    def request(self):
        return self.pq.request

    def pool_size(self) -> int:
        """How many of the ranking later steps look at: ``max(2·limit, limit + 20)``."""
        limit = self.request.limit
        return max(limit * 2, limit + 20)

    def hydrate(self, ids: list[str]) -> dict[str, dict]:
        """Load the units ``ids`` not yet in ``rows`` (one query); returns ``rows``. Callers
        pass ids a channel or a scoped query produced; as a second guard, a unit the caller
        may not see (audience, purpose: :meth:`CallerScope.visibility`) is never loaded, so
        no step can render, rerank or count it."""
        missing = [i for i in dict.fromkeys(ids) if i not in self.rows]
        if missing:
            vis, vparams = self.scope.visibility("u")
            for r in self.conn.execute(
                    f"""SELECT {UNIT_COLUMNS} FROM memory_units u
                        LEFT JOIN documents d ON d.id = u.document_id
                        WHERE u.id = ANY(%(ids)s::uuid[]) AND {vis}""",
                    {**vparams, "ids": "{" + ",".join(missing) + "}"}).fetchall():
                self.rows[str(r["id"])] = r
        return self.rows

    def boost_pool(self, chosen: set[str], boost: float, stage: str) -> int:
        """Multiply by ``1 + boost`` the score of the units of ``chosen`` in the pool (the
        first :meth:`pool_size` of ``ranked``), noting stage score ``stage`` for each, and
        re-sort the pool (stable: ties keep their order); the rest stays after it — boosting
        only raises scores, so the pool stays ahead. Returns how many units were boosted."""
        n = self.pool_size()
        pool, rest = self.ranked[:n], self.ranked[n:]
        out, boosted = [], 0
        for uid, score in pool:
            if uid in chosen:
                score *= 1 + boost
                self.note(uid, stage, score)
                boosted += 1
            out.append((uid, score))
        out.sort(key=lambda p: -p[1])
        self.ranked = out + rest
        return boosted

    def note(self, unit_id: str, stage: str, score: float) -> None:
        """Record ``unit_id``'s score at ``stage`` (shown in the result's ``scores``, rounded
        to 6 decimals there: most noted units are never rendered)."""
        self.stage_scores.setdefault(unit_id, {})[stage] = float(score)
