"""Trust adjustments after fusion, and 1-hop expansion along strong links (spec §5, tier 3
step 5: "Trust and activation adjustments (origin, confidence, superseded state, ACT-R),
1-hop graph expansion when the budget allows").

ACT-R activation lives in the hot tier (Redis), not here. Both steps read only (the pool's
rows, one SELECT over ``memory_links``).
"""

from __future__ import annotations

from rcll.search.state import RecallState

# Link types expansion follows: similarity and co-occurrence, not provenance (derived_from,
# about, supersedes) nor causal (LLM mode only, and a cause is not a paraphrase).
EXPAND_TYPES = ("semantic", "entity", "temporal")


def trust_step(state: RecallState, derived: float = 0.95, migrated: float = 0.9,
               confidence_weight: float = 0.1, superseded: float = 0.5) -> None:
    """Multiply each pool unit's fused score by its trust and re-sort the pool.

    ``trust = origin factor × (1 − w + w · confidence) × history factor`` with origin factor
    1.0 for ``told`` (what a user or agent stated), ``derived`` for facts an LLM extracted,
    ``migrated`` for imported units; ``w`` = ``confidence_weight`` and ``confidence``
    clipped to [0, 1] (a unit of confidence 0 keeps ``1 − w`` of its score); history factor
    ``superseded`` for a superseded or invalidated unit (only seen with
    ``include_superseded``: the live version ranks above its history), else 1.0.

    UNMEASURED: the defaults (0.95, 0.9, 0.1, 0.5) are small placeholders in the direction the
    seeds give (told > derived > migrated; ../shared/seeds/001_9b20b717b6670ff9.txt line 32:
    "a confidence, an origin (told, derived or migrated)"), not fitted; the lead measures
    them on the eval. In chunk mode every unit is ``told`` with confidence 1.0, so the step
    changes nothing there.

    Only the pool (``state.pool_size()`` first units) is adjusted and re-sorted; it stays
    ahead of the rest. Stage score ``trust`` per adjusted unit; ``counts["trust_adjusted"]``:
    units whose factor was not 1.
    """
    n = state.pool_size()
    pool, rest = state.ranked[:n], state.ranked[n:]
    rows = state.hydrate([uid for uid, _ in pool])
    out, changed = [], 0
    for uid, score in pool:
        row = rows.get(uid)
        if row is None:
            out.append((uid, score))
            continue
        factor = {"derived": derived, "migrated": migrated}.get(row["origin"], 1.0)
        conf = min(1.0, max(0.0, float(row["confidence"] if row["confidence"] is not None else 1.0)))
        factor *= 1.0 - confidence_weight + confidence_weight * conf
        if row["superseded_by_id"] is not None or row["invalidated_reason"] is not None:
            factor *= superseded
        if factor != 1.0:
            changed += 1
            score *= factor
            state.note(uid, "trust", score)
        out.append((uid, score))
    out.sort(key=lambda p: -p[1])  # stable: ties keep the fused order
    state.ranked = out + rest
    state.counts["trust_adjusted"] = changed


def expand_step(state: RecallState, min_weight: float = 0.8, per_unit: int = 2, top: int = 5,
                damping: float = 0.5, types: tuple[str, ...] = EXPAND_TYPES) -> None:
    """1-hop expansion: units linked to the ``top`` best units by a strong link are added just
    below their source, when the result has room.

    Links: ``memory_links`` of ``types`` (semantic, entity, temporal) with weight ≥
    ``min_weight`` (0.8), followed both ways (links point from the newer unit), to units in
    the caller scope (``state.scope.where``) not already ranked; per source the
    ``per_unit`` (2) strongest. Score = source score × weight × ``damping`` (0.5), so an
    expanded unit never outranks its source. One SELECT.

    Room (spec §5 "1-hop graph expansion when the budget allows"; seed
    ../shared/seeds/003_4c8355635cfadf5f.txt line 51 "Top 10 + 1-hop graph expansion"):
    expansion never displaces a ranked unit from the returned result. Slots =
    ``limit`` − units ranked (capped at ``limit``); token room = ``max_tokens`` − tokens of
    the first ``limit`` ranked units; each added unit must fit both. With a full ranking
    (a bank with more matches than ``limit``) nothing is added.

    UNMEASURED: ``min_weight``, ``per_unit``, ``top`` and ``damping`` are the brief's
    defaults, not fitted. ``state.expanded_from[unit] = source``; stage score ``expand``;
    ``counts["expanded"]``.
    """
    state.counts["expanded"] = 0
    limit, max_tokens = state.request.limit, state.request.max_tokens
    head = state.ranked[:limit]
    slots = limit - len(head)
    if slots <= 0 or not head:
        return
    rows = state.hydrate([uid for uid, _ in head])
    counts = _token_counts(state, [rows[u] for u, _ in head if u in rows])
    room = max_tokens - sum(counts)
    if room <= 0:
        return
    sources = head[:top]
    src_ids = "{" + ",".join(uid for uid, _ in sources) + "}"
    where, params = state.scope.where("u")
    links = state.conn.execute(
        f"""SELECT l.src::text AS src, u.id::text AS id, max(l.weight) AS weight,
                   u.token_count, u.text
            FROM (SELECT from_unit AS src, to_unit AS other, weight FROM memory_links
                  WHERE from_unit = ANY(%(src)s::uuid[]) AND type = ANY(%(types)s)
                    AND weight >= %(min_w)s
                  UNION ALL
                  SELECT to_unit, from_unit, weight FROM memory_links
                  WHERE to_unit = ANY(%(src)s::uuid[]) AND type = ANY(%(types)s)
                    AND weight >= %(min_w)s) l
            JOIN memory_units u ON u.id = l.other
            WHERE {where}
            GROUP BY l.src, u.id, u.token_count, u.text
            ORDER BY l.src, max(l.weight) DESC, u.id""",
        {**params, "src": src_ids, "types": list(types), "min_w": min_weight}).fetchall()
    by_src: dict[str, list[dict]] = {}
    for r in links:
        by_src.setdefault(r["src"], []).append(r)
    seen = {uid for uid, _ in state.ranked}
    inserts: dict[str, list[tuple[str, float]]] = {}
    added = 0
    for src, src_score in sources:
        taken = 0
        for r in by_src.get(src, []):
            if taken >= per_unit or added >= slots:
                break
            if r["id"] in seen:
                continue
            n_tok = (r["token_count"] if r["token_count"] is not None
                     else state.ctx.tokens.count(r["text"]))
            if n_tok > room:
                continue
            score = src_score * float(r["weight"]) * damping
            inserts.setdefault(src, []).append((r["id"], score))
            state.expanded_from[r["id"]] = src
            state.note(r["id"], "expand", score)
            seen.add(r["id"])
            room -= n_tok
            taken += 1
            added += 1
    if inserts:
        out = []
        for uid, score in state.ranked:
            out.append((uid, score))
            out.extend(inserts.get(uid, ()))
        state.ranked = out
    state.counts["expanded"] = added


def _token_counts(state: RecallState, rows: list[dict]) -> list[int]:
    """Stored token counts, counted with the recall's tokenizer where missing."""
    missing = [r["text"] for r in rows if r["token_count"] is None]
    counted = iter(state.ctx.tokens.count_many(missing)) if missing else iter(())
    return [r["token_count"] if r["token_count"] is not None else next(counted) for r in rows]
