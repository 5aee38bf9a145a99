"""Session-then-turn scoring: a unit's fused score borrows from the best unit of its episode.

Units retained with the same ``context`` (a conversation session, a meeting, a document
section) form an episode. When the right episode is found but not the right turn in it,
lifting every unit of a strong episode a little reorders the turns toward it:

    s'(u) = s(u) + β · max_{v ∈ episode(u), v in the pool} s(v)

Units without a context are their own episode. Measured in benchmarks/recall_ablation.py
(the "context step" row); the neighbour-word context of the lexical channel
(:mod:`rcll.search.lexical`) is the other, larger half of the same idea.

The boost above keeps the order of episodes (an episode's best unit gains β times its own
score). Episode-level channel evidence (``episodes``) changes it: a channel's scores are
aggregated per episode — the mean of its ``episode_top`` best units among the channel's
candidates — and the episodes are ranked by that, a ranking of documents beside the ranking
of passages (document-level evidence for passage retrieval: Callan 1994, "Passage-level
evidence in document retrieval", SIGIR). The episode ranking is fused into every unit of
the episode as one more RRF list (Cormack, Clarke & Büttcher 2009, "Reciprocal rank fusion
outperforms Condorcet and individual rank learning methods", SIGIR):

    s'(u) += w_c / (k + rank_c(episode(u)))     for each channel c in ``episodes``

Measured on both datasets, not in a recipe: see :data:`rcll.search.recipes.SESSION`.
"""

from __future__ import annotations

from collections.abc import Mapping

from rcll.search.state import RecallState


def context_step(state: RecallState, session: float = 0.25, pool: int = 300,
                 terms: float = 0.0, episodes: Mapping[str, float] | None = None,
                 episode_top: int = 3) -> None:
    """Rescore the top ``pool`` of ``state.ranked`` with the episode boost β = ``session``
    (units below the pool keep their order after it). Records stage score ``session``.

    ``terms`` > 0 adds ``terms`` × the head's best score × the episode's query-term
    coverage — the idf-weighted share of the lexical channel's kept terms held by any unit
    of the episode in the head (a session covering the whole question across its turns,
    passage ranking with document-level evidence: Callan 1994, "Passage-level evidence in
    document retrieval") — to every unit of the episode. Measured, not in a recipe: see
    :data:`rcll.search.recipes.SESSION`.

    ``episodes`` ``{channel: weight}`` adds each named channel's episode ranking (the module
    doc; ``episode_top`` ≥ 1 units averaged per episode) as ``weight / (ctx.rrf_k + rank)``
    to every unit of the episode in the head; a channel that did not run adds nothing.
    Costs one narrow SELECT of ``context`` for the channel's candidates outside the head."""
    episodes = {c: float(w) for c, w in (episodes or {}).items() if w > 0}
    if (session <= 0 and not episodes) or not state.ranked:
        return
    head, tail = state.ranked[:pool], state.ranked[pool:]
    contexts = _contexts(state, [uid for uid, _ in head])
    best: dict[str, float] = {}
    key = {}
    for uid, score in head:
        k = _episode_key(uid, contexts.get(uid))
        key[uid] = k
        best[k] = max(best.get(k, 0.0), score)
    if terms > 0 and session > 0:
        lexical = state.outputs.get("lexical")
        idf = dict(lexical.info.get("idf") or {}) if lexical else {}
        held = lexical.private.get("held", {}) if lexical else {}
        total = sum(idf.values())
        if total > 0:
            covered: dict[str, set] = {}
            for uid, _ in head:
                covered.setdefault(key[uid], set()).update(held.get(uid, ()))
            top = head[0][1]
            for k, ts in covered.items():
                best[k] += terms / session * top * sum(idf.get(t, 0.0) for t in ts) / total
    bonus = _episode_evidence(state, contexts, episodes, max(1, episode_top))
    rescored = [(uid, score + session * best[key[uid]] + bonus.get(key[uid], 0.0))
                for uid, score in head]
    rescored.sort(key=lambda kv: (-kv[1], kv[0]))
    for uid, score in rescored:
        state.note(uid, "session", score)
    floor = rescored[-1][1] if rescored else 0.0
    state.ranked = rescored + [(u, min(s, floor)) for u, s in tail]


def _episode_key(uid: str, context: str | None) -> str:
    return f"c:{context}" if context else f"u:{uid}"


def _episode_evidence(state: RecallState, contexts: dict[str, str | None],
                      weights: dict[str, float], top: int) -> dict[str, float]:
    """``{episode key: Σ_c w_c / (rrf_k + rank_c)}`` over the channels of ``weights``:
    each channel's candidates grouped by episode (``contexts``, plus the candidates outside
    the head read once here — units the scope hides are never read and drop out),
    an episode scored by the mean of its ``top`` best channel scores, ranked best first
    (ties by key, so the order is deterministic)."""
    out: dict[str, float] = {}
    for name, weight in weights.items():
        output = state.outputs.get(name)
        if output is None or not output.candidates:
            continue
        missing = [c.unit_id for c in output.candidates if c.unit_id not in contexts]
        if missing:
            contexts = {**contexts, **_narrow_contexts(state, missing)}
        per: dict[str, list[float]] = {}
        for c in output.candidates:
            if c.unit_id in contexts:
                per.setdefault(_episode_key(c.unit_id, contexts[c.unit_id]), []).append(
                    float(c.score))
        scored = {k: sum(sorted(v, reverse=True)[:top]) / min(top, len(v))
                  for k, v in per.items()}
        for rank, k in enumerate(sorted(scored, key=lambda k: (-scored[k], k)), 1):
            out[k] = out.get(k, 0.0) + weight / (state.ctx.rrf_k + rank)
    return out


def _narrow_contexts(state: RecallState, ids: list[str]) -> dict[str, str | None]:
    """``{unit_id: context}`` of the ``ids`` the caller may see, one SELECT of two columns."""
    vis, vparams = state.scope.visibility("u")
    return {str(r["id"]): r["context"] for r in state.conn.execute(
        f"""SELECT u.id, u.context FROM memory_units u
            WHERE u.id = ANY(%(ids)s::uuid[]) AND {vis}""",
        {**vparams, "ids": "{" + ",".join(ids) + "}"}).fetchall()}


def _contexts(state: RecallState, ids: list[str]) -> dict[str, str | None]:
    """``{unit_id: context}`` for ``ids`` (best first). The first ``state.pool_size()`` are
    hydrated — the speaker step and the response read those rows next, so this costs them no
    query of their own (docs/decisions/0004-latency-of-full.md) —, the rest (a small limit) in one
    narrow SELECT of ``context`` alone. A unit the scope hides is never loaded and counts
    as its own episode."""
    n = state.pool_size()
    rows = state.hydrate(ids[:n])
    out = {uid: rows[uid]["context"] for uid in ids if uid in rows}
    missing = [uid for uid in ids[n:] if uid not in out]
    if missing:
        out.update(_narrow_contexts(state, missing))
    return out
