"""Session-then-turn scoring: a unit's fused score borrows from the best unit of its episode.

Units retained with the same ``context`` (a conversation session, a meeting, a document
section) form an episode. When the right episode is found but not the right turn in it —
LoCoMo session recall@10 0.92 against turn recall@10 0.63 with ``hybrid`` — lifting every
unit of a strong episode a little reorders the turns toward it:

    s'(u) = s(u) + β · max_{v ∈ episode(u), v in the pool} s(v)

Units without a context are their own episode. Measured in benchmarks/recall_ablation.py
(the "context step" row); the neighbour-word context of the lexical channel
(:mod:`rcll.search.lexical`) is the other, larger half of the same idea.
"""

from __future__ import annotations

from rcll.search.state import RecallState


def context_step(state: RecallState, session: float = 0.25, pool: int = 300,
                 terms: float = 0.0) -> None:
    """Rescore the top ``pool`` of ``state.ranked`` with the episode boost β = ``session``
    (units below the pool keep their order after it). Records stage score ``session``.

    ``terms`` > 0 adds ``terms`` × the head's best score × the episode's query-term
    coverage — the idf-weighted share of the lexical channel's kept terms held by any unit
    of the episode in the head (a session covering the whole question across its turns,
    passage ranking with document-level evidence: Callan 1994, "Passage-level evidence in
    document retrieval") — to every unit of the episode. Measured, not in a recipe: see
    :data:`rcll.search.recipes.SESSION`."""
    if session <= 0 or not state.ranked:
        return
    head, tail = state.ranked[:pool], state.ranked[pool:]
    contexts = _contexts(state, [uid for uid, _ in head])
    best: dict[str, float] = {}
    key = {}
    for uid, score in head:
        ctx = contexts.get(uid)
        k = f"c:{ctx}" if ctx else f"u:{uid}"
        key[uid] = k
        best[k] = max(best.get(k, 0.0), score)
    if terms > 0:
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
    rescored = [(uid, score + session * best[key[uid]]) for uid, score in head]
    rescored.sort(key=lambda kv: (-kv[1], kv[0]))
    for uid, score in rescored:
        state.note(uid, "session", score)
    floor = rescored[-1][1] if rescored else 0.0
    state.ranked = rescored + [(u, min(s, floor)) for u, s in tail]


def _contexts(state: RecallState, ids: list[str]) -> dict[str, str | None]:
    """``{unit_id: context}`` for ``ids`` (best first). The first ``state.pool_size()`` are
    hydrated — the speaker step and the response read those rows next, so this costs them no
    query of their own (a separate SELECT of ``context`` was 1.5 ms of an HTTP recall on
    LoCoMo at limit 50, where the pool is the whole head) —, the rest (a small limit) in one
    narrow SELECT of ``context`` alone. A unit the scope hides is never loaded and counts
    as its own episode."""
    n = state.pool_size()
    rows = state.hydrate(ids[:n])
    out = {uid: rows[uid]["context"] for uid in ids if uid in rows}
    missing = [uid for uid in ids[n:] if uid not in out]
    if missing:
        vis, vparams = state.scope.visibility("u")
        for r in state.conn.execute(
                f"""SELECT u.id, u.context FROM memory_units u
                    WHERE u.id = ANY(%(ids)s::uuid[]) AND {vis}""",
                {**vparams, "ids": "{" + ",".join(missing) + "}"}).fetchall():
            out[str(r["id"])] = r["context"]
    return out
