"""Query-term coverage: reorder the head of the ranking so it covers more of the query.

A question about two things — "How many days did I spend in Hawaii and in New York City?",
"Which did I use most recently, a bus or a train?" — has its evidence in different units,
often in different sessions. Fused relevance ranks the units matching the most and rarest
terms first, so the top of the list fills with units about one half of the question (the
Hawaii trip) and the unit about the other half arrives late. Diversifying over the query's
terms (its *aspects*) lets a unit holding a term nothing above it holds move up.

This is xQuAD (Santos, Macdonald & Ounis 2010, "Exploiting query reformulations for web
search result diversification", WWW) with the query's terms as aspects, as in term-level
diversification (Dang & Croft 2013, "Term level search result diversification", SIGIR).
Greedily, position by position over the head of the ranking, pick the unit d maximising

    (1 − λ) · s(d) / s_max  +  λ · Σ_t p(t) · c(d, t) · Π_{e already picked} (1 − c(e, t))

where s is the fused score, p(t) = idf(t) / Σ idf over the lexical channel's kept terms
(BM25's idf, so rare terms weigh most), and c(d, t) ∈ {0, 1} says whether d's own text holds
t (its ``tsvector``). With λ = 0 the order is unchanged.
"""

from __future__ import annotations

from rcll.search.state import RecallState


def coverage_step(state: RecallState, weight: float = 0.2, pool: int = 50) -> None:
    """Reorder the first ``pool`` units of ``state.ranked`` by greedy xQuAD over the lexical
    channel's kept query terms with λ = ``weight`` (see the module doc); the head keeps its
    scores, reassigned in the new order, so the ranking stays sorted and the tail is
    untouched. Needs the lexical channel's output (its terms and idf) — without it, or with
    fewer than two terms, nothing changes. Stage score ``coverage``: the objective when the
    unit was picked; ``counts["coverage_moved"]``: how many of the head changed position.
    Raises nothing; reads only: the terms each unit holds come from the lexical channel's
    ``private["held"]``, and one SELECT of the ``tsvector`` terms of head units it cannot
    vouch for (none when it saw every unit holding a term: ``held_complete``)."""
    lexical = state.outputs.get("lexical")
    idf: dict[str, float] = dict(lexical.info.get("idf") or {}) if lexical else {}
    if weight <= 0 or len(idf) < 2 or len(state.ranked) < 2:
        return
    head, tail = state.ranked[:pool], state.ranked[pool:]
    terms = list(idf)
    held = _terms_held(state, [uid for uid, _ in head], terms, lexical.private)
    total = sum(idf.values()) or 1.0
    p = {t: idf[t] / total for t in terms}
    s_max = max(s for _, s in head) or 1.0
    rel = {uid: s / s_max for uid, s in head}
    uncovered = set(terms)
    left = [uid for uid, _ in head]  # in fused order
    order: list[str] = []
    while left:
        # the best unit adding nothing new is the first left (fused order); only units
        # holding an uncovered term can beat it
        best, best_v = left[0], (1 - weight) * rel[left[0]]
        gaining = False
        for uid in left:  # ties keep the fused order (strict >)
            new_terms = held.get(uid, set()) & uncovered
            if not new_terms:
                continue
            gaining = True
            v = (1 - weight) * rel[uid] + weight * sum(p[t] for t in new_terms)
            if v > best_v:
                best, best_v = uid, v
        if not gaining:  # nothing left to cover: the rest keeps its fused order
            for uid in left:
                state.note(uid, "coverage", (1 - weight) * rel[uid])
            order += left
            break
        order.append(best)
        left.remove(best)
        uncovered -= held.get(best, set())
        state.note(best, "coverage", best_v)
    scores = [s for _, s in head]  # already sorted, best first
    moved = sum(1 for (a, _), b in zip(head, order, strict=True) if a != b)
    state.counts["coverage_moved"] = moved
    state.ranked = list(zip(order, scores, strict=True)) + tail


def _terms_held(state: RecallState, ids: list[str], terms: list[str],
                known: dict | None = None) -> dict[str, set[str]]:
    """``{unit_id: the query terms of ``terms`` its own text holds}`` for ``ids``: from the
    lexical channel's ``known["held"]`` where it has the unit (or vouches, with
    ``held_complete``, that a unit it did not return holds none), else one SELECT of the
    units' ``tsvector``. The channel's lists can hold feedback terms: only ``terms`` count."""
    known = known or {}
    from_channel = known.get("held") or {}
    wanted = set(terms)
    out = {uid: set(from_channel[uid]) & wanted for uid in ids if uid in from_channel}
    missing = [] if known.get("held_complete") else [uid for uid in ids if uid not in out]
    if missing:
        rows = state.conn.execute(
            """SELECT u.id, array(SELECT t.lexeme FROM unnest(
                          ts_filter(setweight(u.tsv, 'A', %(terms)s::text[]), '{a}')) AS t)
                      AS held
               FROM memory_units u WHERE u.id = ANY(%(ids)s::uuid[])""",
            {"terms": terms, "ids": missing}).fetchall()
        out.update({str(r["id"]): set(r["held"]) for r in rows})
    return out
