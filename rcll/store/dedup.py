"""Dedup proposals (spec §3, §4.7; claim 6: nothing is merged silently): the SQL.

A scan (:func:`scan`) compares the vectors of the newest live units of a bank that a caller
may see and stores what is at or above a cosine floor as ``open`` proposals: a *cluster* of
identical or near-identical units (cosine ≥ the cluster floor) is one proposal whose
``members`` are all of them (``size`` N), other pairs one proposal each (``size`` 2;
``unit_a < unit_b`` is always a pair of the members; a stored proposal, whatever its state, is
left as it is). Units made only of markup are never proposed. A person or an agent then
decides each one (:func:`decide`), for all its members: ``merge`` supersedes all but one
(history kept, nothing deleted), ``keep`` closes the proposal. ``dedup_scans`` (migration
0012) remembers up to which creation time each bank was scanned (:func:`banks_due`).
"""

from __future__ import annotations

import json
from uuid import UUID

from psycopg import Connection

from rcll.errors import BankNotFound, InvalidInput, NotFound, Rejected
from rcll.identity import same_visibility_sql
from rcll.retain.markup import is_markup_only
from rcll.search.scope import CallerScope
from rcll.store import links

STATES = ("open", "merged", "kept")
ACTIONS = ("merge", "keep")
MERGED_REASON = "merged_duplicate"
TEXT_PREVIEW = 200  # characters of each unit's text shown beside a proposal


class ProposalNotFound(NotFound):
    code = "dedup_proposal_not_found"


def _uuid(value: str, field: str) -> str:
    try:
        return str(UUID(str(value)))
    except ValueError:
        code = "invalid_proposal_id" if field == "proposal_id" else "invalid_request"
        raise Rejected(400, code, f"{field} must be a UUID", {"field": field, "value": str(value)})


def scan_scope(bank_id: str) -> tuple[str, dict]:
    """``(sql, params)`` of the units a dedup scan may compare, over alias ``u``.

    Seam for permissions (spec §1.5, a later issue): today the bank's live units of every
    layer whose audience is the whole bank (``audience = 'bank'``), i.e. what any caller of
    the bank may see. When recall's :class:`~rcll.search.scope.CallerScope` learns members
    and purposes, a scan per caller scope plugs in here.
    """
    where, params = CallerScope(bank_id=bank_id, layer_cap=3).where("u")
    return f"{where} AND u.audience = 'bank'", params


def lock_bank(conn: Connection, bank_id: str) -> None:
    """Hold the bank row ``FOR SHARE`` for the transaction (a bank delete waits for the scan
    or decision in flight). Raises :class:`BankNotFound`."""
    if conn.execute("SELECT 1 FROM memory_banks WHERE id = %s FOR SHARE",
                    (bank_id,)).fetchone() is None:
        raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})


def scan(conn: Connection, bank_id: str, *, model: str, window: int = 500,
         min_cosine: float = 0.80, cluster_min_cosine: float = 0.98) -> dict:
    """Propose the duplicates among the ``window`` newest visible units of ``bank_id``
    (:func:`scan_scope`) whose ``model`` vectors have cosine ≥ ``min_cosine``, and record
    the scan in ``dedup_scans``. Pairs joined by a ``derived_from`` link (a fact and the
    chunk it came from) are not duplicates and are skipped, and so are pairs that not
    exactly the same callers may see (:func:`rcll.identity.same_visibility_sql`: merging
    them would show one member's memory to others, or hide it). A unit made only of markup
    (:func:`rcll.retain.markup.is_markup_only`, e.g. ``| --- | --- |``) is never proposed.

    Units joined by pairs at cosine ≥ ``cluster_min_cosine`` form a *cluster* (connected
    components): N identical or near-identical units are ONE proposal whose ``members`` are
    all N (:func:`_propose`), not N·(N-1)/2 pairs. Other pairs are proposed between the
    clusters' representatives (their oldest member) and single units, one proposal per pair.
    A proposal already stored is left as it is; an ``open`` cluster that gains members is
    extended; a set of units every pair of which some stored proposal (any state) already
    holds is not proposed again.

    Run inside a transaction. Cost: ``window²/2`` vector comparisons in SQL (125k for 500).
    Returns ``{"units_compared", "proposals_added", "proposals_extended",
    "scanned_through"}``; raises :class:`BankNotFound`.
    """
    lock_bank(conn, bank_id)
    # one scan per bank at a time: a second waits, then finds the pairs already stored
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('rcll-dedup'), hashtext(%s))", (bank_id,))
    where, params = scan_scope(bank_id)
    stats = conn.execute(
        f"""WITH recent AS (
                SELECT u.id, u.created_at FROM memory_units u WHERE {where}
                ORDER BY u.created_at DESC, u.id DESC LIMIT %(window)s)
            SELECT count(*) AS n, count(e.unit_id) AS with_vector,
                   max(r.created_at) AS newest,
                   min(r.created_at) FILTER (WHERE e.unit_id IS NULL) AS oldest_pending
            FROM recent r LEFT JOIN memory_embeddings e
              ON e.unit_id = r.id AND e.model = %(model)s""",
        {**params, "window": window, "model": model}).fetchone()
    pairs = candidate_pairs(conn, bank_id, model=model, window=window, min_cosine=min_cosine)
    added, extended = _propose(conn, bank_id, pairs, cluster_min_cosine)
    # units still waiting for a vector keep the bank due: scanned up to just before them
    row = conn.execute(
        """INSERT INTO dedup_scans (bank_id, scanned_through, units_compared, proposals_added)
           VALUES (%(b)s, coalesce(%(pending)s::timestamptz - interval '1 microsecond',
                            %(newest)s::timestamptz, now()),
                   %(n)s, %(added)s)
           ON CONFLICT (bank_id) DO UPDATE SET scanned_through = EXCLUDED.scanned_through,
               scanned_at = now(), units_compared = EXCLUDED.units_compared,
               proposals_added = EXCLUDED.proposals_added
           RETURNING scanned_through""",
        {"b": bank_id, "pending": stats["oldest_pending"], "newest": stats["newest"],
         "n": stats["with_vector"], "added": added}).fetchone()
    return {"units_compared": stats["with_vector"], "proposals_added": added,
            "proposals_extended": extended,
            "scanned_through": row["scanned_through"].isoformat()}


def candidate_pairs(conn: Connection, bank_id: str, *, model: str, window: int = 500,
                    min_cosine: float = 0.80) -> list[dict]:
    """Every pair a scan considers: ``[{"a", "b", "cosine", "text_a", "text_b",
    "created_a", "created_b"}]`` (``a < b``, ids as UUIDs) among the ``window`` newest
    visible units, cosine ≥ ``min_cosine``, same visibility, not ``derived_from``-linked;
    sorted by ``(a, b)``. Markup-only units are still in it (:func:`_propose` drops them);
    its length is what the pairwise rule (one proposal per pair) would propose."""
    where, params = scan_scope(bank_id)
    return conn.execute(
        f"""WITH recent AS (
                SELECT u.id FROM memory_units u WHERE {where}
                ORDER BY u.created_at DESC, u.id DESC LIMIT %(window)s),
            vec AS MATERIALIZED (
                SELECT r.id, e.embedding, u.audience, u.purposes, u.text, u.created_at
                FROM recent r
                JOIN memory_embeddings e ON e.unit_id = r.id AND e.model = %(model)s
                JOIN memory_units u ON u.id = r.id)
            SELECT a.id AS a, b.id AS b, 1 - (a.embedding <=> b.embedding) AS cosine,
                   a.text AS text_a, b.text AS text_b, a.created_at AS created_a,
                   b.created_at AS created_b
            FROM vec a JOIN vec b ON a.id < b.id AND {same_visibility_sql("a", "b")}
            WHERE a.embedding <=> b.embedding <= 1 - %(floor)s
              AND NOT EXISTS (
                  SELECT 1 FROM memory_links l WHERE l.type = 'derived_from'
                    AND ((l.from_unit = a.id AND l.to_unit = b.id)
                         OR (l.from_unit = b.id AND l.to_unit = a.id)))
            ORDER BY 1, 2""",
        {**params, "window": window, "model": model, "floor": min_cosine}).fetchall()


def _propose(conn: Connection, bank_id: str, pairs: list[dict],
             cluster_min_cosine: float) -> tuple[int, int]:
    """Store ``pairs`` (:func:`candidate_pairs`) as cluster and pair proposals (the rule of
    :func:`scan`); ``(proposals added, open proposals extended)``."""
    markup: dict[str, bool] = {}
    created: dict[str, object] = {}
    edges: list[tuple[str, str, float]] = []
    for p in pairs:
        a, b = str(p["a"]), str(p["b"])
        for u, text, at in ((a, p["text_a"], p["created_a"]), (b, p["text_b"], p["created_b"])):
            if u not in markup:
                markup[u] = is_markup_only(text)
                created[u] = at
        if not (markup[a] or markup[b]):
            edges.append((a, b, float(p["cosine"])))
    if not edges:
        return 0, 0
    parent: dict[str, str] = {}

    def find(u: str) -> str:
        parent.setdefault(u, u)
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    for a, b, c in edges:
        if c >= cluster_min_cosine:
            parent[find(a)] = find(b)
    clusters: dict[str, list[str]] = {}
    for u in {u for a, b, _ in edges for u in (a, b)}:
        clusters.setdefault(find(u), []).append(u)
    rep = {u: min(members, key=lambda m: (created[m], m))
           for members in clusters.values() for u in members}

    units = sorted(rep)
    stored = conn.execute(
        """SELECT id, state, members FROM dedup_proposals
           WHERE bank_id = %s AND members && %s::uuid[] ORDER BY created_at, id""",
        (bank_id, units)).fetchall()
    holding: dict[str, list[dict]] = {}
    for s in stored:
        s["set"] = {str(m) for m in s["members"]}
        for m in s["set"]:
            holding.setdefault(m, []).append(s)

    def covered(a: str, b: str) -> bool:
        return any(b in s["set"] for s in holding.get(a, ()))

    added = extended = 0
    inner: dict[str, list[tuple[str, str, float]]] = {}
    across: dict[tuple[str, str], float] = {}
    for a, b, c in edges:
        if c >= cluster_min_cosine:
            inner.setdefault(find(a), []).append((a, b, c))
            continue
        ra, rb = sorted((rep[a], rep[b]))
        if ra != rb and not covered(a, b) and not covered(ra, rb):
            across[(ra, rb)] = max(c, across.get((ra, rb), -1.0))
    for root, cluster_edges in sorted(inner.items()):
        members = sorted(clusters[root])
        fresh = [(a, b, c) for a, b, c in cluster_edges if not covered(a, b)]
        if not fresh:
            continue
        low = min(c for _, _, c in cluster_edges)
        open_ = next((s for m in members for s in holding.get(m, ()) if s["state"] == "open"),
                     None)
        if open_ is not None:
            cur = conn.execute(
                """UPDATE dedup_proposals SET cosine = least(cosine, %s),
                          members = (SELECT array_agg(DISTINCT m ORDER BY m)
                                     FROM unnest(members || %s::uuid[]) m)
                   WHERE id = %s AND state = 'open'""", (low, members, open_["id"]))
            if cur.rowcount:
                extended += 1
                continue
        a, b, _ = fresh[0]
        cur = conn.execute(
            """INSERT INTO dedup_proposals (bank_id, unit_a, unit_b, cosine, members)
               VALUES (%s, %s, %s, %s, %s::uuid[]) ON CONFLICT DO NOTHING""",
            (bank_id, a, b, low, members))
        added += max(cur.rowcount, 0)
    for (a, b), c in sorted(across.items()):
        cur = conn.execute(
            """INSERT INTO dedup_proposals (bank_id, unit_a, unit_b, cosine, members)
               VALUES (%s, %s, %s, %s, %s::uuid[]) ON CONFLICT DO NOTHING""",
            (bank_id, a, b, c, [a, b]))
        added += max(cur.rowcount, 0)
    return added, extended


def banks_due(conn: Connection, limit: int = 1000) -> list[str]:
    """Banks holding a unit created after their last scan (or never scanned), at most
    ``limit``, least recently scanned first. One index probe per bank
    (``memory_units (bank_id, created_at)``)."""
    rows = conn.execute(
        """SELECT b.id FROM memory_banks b LEFT JOIN dedup_scans s ON s.bank_id = b.id
           WHERE EXISTS (SELECT 1 FROM memory_units u WHERE u.bank_id = b.id
                           AND u.created_at > coalesce(s.scanned_through, '-infinity'))
           ORDER BY s.scanned_at NULLS FIRST, b.id LIMIT %s""", (limit,)).fetchall()
    return [r["id"] for r in rows]


_COLUMNS = """p.id, p.bank_id, p.unit_a, p.unit_b, p.cosine, p.state, p.decided_by,
    p.decided_at, p.created_at, p.members,
    left(a.text, %(preview)s) AS text_a, left(b.text, %(preview)s) AS text_b,
    (a.superseded_by_id IS NULL AND a.invalidated_reason IS NULL) AS live_a,
    (b.superseded_by_id IS NULL AND b.invalidated_reason IS NULL) AS live_b,
    a.superseded_by_id AS superseded_by_a, b.superseded_by_id AS superseded_by_b"""
_FROM = """dedup_proposals p JOIN memory_units a ON a.id = p.unit_a
    JOIN memory_units b ON b.id = p.unit_b"""


def list_page(conn: Connection, bank_id: str, state: str | None = None, limit: int = 50,
              offset: int = 0,
              visible: tuple[str, dict] = ("TRUE", {})) -> tuple[list[dict], int]:
    """One page of a bank's proposals, highest cosine first (ties by id, so pages never
    overlap), optionally in one ``state``; ``(rows as :func:`to_json`, total matching)``.
    ``visible``: ``(sql, params)`` on aliases ``a`` and ``b`` (the pair's units) — only
    proposals whose two units the caller sees (:func:`pair_filter`)."""
    where = f"p.bank_id = %(bank_id)s AND {visible[0]}"
    params = {"bank_id": bank_id, "preview": TEXT_PREVIEW, **visible[1]}
    if state:
        where += " AND p.state = %(state)s"
        params["state"] = state
    rows = conn.execute(
        f"""SELECT {_COLUMNS} FROM {_FROM} WHERE {where}
            ORDER BY p.cosine DESC, cardinality(p.members) DESC, p.id
            LIMIT %(limit)s OFFSET %(offset)s""",
        {**params, "limit": limit, "offset": offset}).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM {_FROM} WHERE {where}",
                         params).fetchone()["n"]
    units = _member_units(conn, rows)
    return [to_json(r, units) for r in rows], total


def _member_units(conn: Connection, rows: list[dict]) -> dict[str, dict]:
    """The members of ``rows`` by id: ``{id: {"id", "text" (preview), "live",
    "superseded_by_id"}}`` (one query)."""
    ids = sorted({str(m) for r in rows for m in r["members"]})
    if not ids:
        return {}
    found = conn.execute(
        """SELECT id, left(text, %s) AS text,
                  (superseded_by_id IS NULL AND invalidated_reason IS NULL) AS live,
                  superseded_by_id FROM memory_units WHERE id = ANY(%s::uuid[])""",
        (TEXT_PREVIEW, ids)).fetchall()
    return {str(u["id"]): {"id": str(u["id"]), "text": u["text"], "live": u["live"],
                           "superseded_by_id": (str(u["superseded_by_id"])
                                                if u["superseded_by_id"] else None)}
            for u in found}


def pair_filter(unit_filter) -> tuple[str, dict]:
    """``visible`` for :func:`list_page`/:func:`get` from ``unit_filter(alias, prefix)`` →
    ``(sql, params)`` (e.g. ``functools.partial(rcll.access.visibility.unit_filter,
    principal, bank_id)``): both units of the pair must pass."""
    a_sql, a_params = unit_filter(alias="a", prefix="va")
    b_sql, b_params = unit_filter(alias="b", prefix="vb")
    return f"({a_sql}) AND ({b_sql})", {**a_params, **b_params}


def get(conn: Connection, bank_id: str, proposal_id: str,
        visible: tuple[str, dict] = ("TRUE", {})) -> dict:
    """One proposal as :func:`to_json`. Raises :class:`ProposalNotFound` (also one whose
    units ``visible`` refuses; 400 ``invalid_request`` for a malformed id)."""
    pid = _uuid(proposal_id, "proposal_id")
    row = conn.execute(f"SELECT {_COLUMNS} FROM {_FROM} WHERE p.id = %(id)s AND p.bank_id = %(b)s"
                       f" AND {visible[0]}",
                       {"id": pid, "b": bank_id, "preview": TEXT_PREVIEW, **visible[1]}).fetchone()
    if row is None:
        raise ProposalNotFound(f"dedup proposal {proposal_id} does not exist",
                               {"proposal_id": proposal_id, "bank_id": bank_id})
    return to_json(row, _member_units(conn, [row]))


def to_json(row: dict, units: dict[str, dict] | None = None) -> dict:
    """The API's proposal object: ids as strings, times ISO, the two units side by side
    (``unit_a``, ``unit_b``: ``{id, text, live, superseded_by_id}``), and the cluster:
    ``size`` (how many units the proposal is about; 2 for a pair) and ``members`` (each
    unit as ``unit_a``, sorted by id; from ``units``, :func:`_member_units`)."""
    iso = lambda v: v.isoformat() if v is not None else None  # noqa: E731
    unit = lambda s: {"id": str(row[f"unit_{s}"]), "text": row[f"text_{s}"],  # noqa: E731
                      "live": row[f"live_{s}"],
                      "superseded_by_id": (str(row[f"superseded_by_{s}"])
                                           if row[f"superseded_by_{s}"] else None)}
    return {"id": str(row["id"]), "bank_id": row["bank_id"], "state": row["state"],
            "cosine": round(float(row["cosine"]), 6), "unit_a": unit("a"), "unit_b": unit("b"),
            "size": len(row["members"]),
            "members": [(units or {}).get(m, {"id": m, "text": None, "live": False,
                                              "superseded_by_id": None})
                        for m in sorted(str(x) for x in row["members"])],
            "decided_by": row["decided_by"], "decided_at": iso(row["decided_at"]),
            "created_at": iso(row["created_at"])}


def decide(conn: Connection, bank_id: str, proposal_id: str, action: str,
           keep_unit_id: str | None = None, decided_by: str | None = None,
           visible: tuple[str, dict] = ("TRUE", {})) -> dict:
    """Decide an open proposal, in one transaction; returns it as :func:`to_json`.

    The decision applies to every member of the proposal (a pair's two units, a cluster's N).
    ``keep``: state ``kept`` (all units stay). ``merge``: each live member not kept gets
    ``superseded_by_id`` = the kept one, ``invalidated_reason = 'merged_duplicate'`` and
    ``revision + 1``; a ``supersedes`` link kept → other is added for each; state
    ``merged``. Nothing is deleted; a member superseded or invalidated since the scan is
    left as it is. ``keep_unit_id`` (merge only; default: the oldest live member, the first
    stored) must be a member. The answer adds ``merged_unit_ids`` (the units this decision
    superseded; ``[]`` for ``keep``).

    Raises :class:`ProposalNotFound`; :class:`~rcll.errors.InvalidInput` (400) for an unknown
    action or a ``keep_unit_id`` outside the pair; :class:`~rcll.errors.Rejected` 409
    ``dedup_proposal_decided`` (details: the current state) when it was decided already,
    409 ``dedup_unit_not_live`` when the kept unit, or all members but one, were superseded
    or invalidated since (nothing left to merge; a pair: either unit).
    ``visible`` (as :func:`get`): a proposal whose units the caller does not see is not found.
    """
    if action not in ACTIONS:
        raise InvalidInput(f"action must be one of {', '.join(ACTIONS)}",
                           {"field": "action", "value": action})
    pid = _uuid(proposal_id, "proposal_id")
    with conn.transaction():
        lock_bank(conn, bank_id)
        get(conn, bank_id, pid, visible)  # not found unless the caller sees both units
        p = conn.execute("""SELECT id, unit_a, unit_b, members, state, decided_by, decided_at
                            FROM dedup_proposals WHERE id = %s AND bank_id = %s FOR UPDATE""",
                         (pid, bank_id)).fetchone()
        if p is None:
            raise ProposalNotFound(f"dedup proposal {proposal_id} does not exist",
                                   {"proposal_id": proposal_id, "bank_id": bank_id})
        if p["state"] != "open":
            raise Rejected(409, "dedup_proposal_decided",
                           f"dedup proposal {pid} was already decided: {p['state']}",
                           json.loads(json.dumps(
                               {"proposal_id": pid, "state": p["state"],
                                "decided_by": p["decided_by"], "decided_at": p["decided_at"]},
                               default=str)))
        merged = _merge(conn, bank_id, p, keep_unit_id) if action == "merge" else []
        conn.execute("""UPDATE dedup_proposals SET state = %s, decided_by = %s,
                               decided_at = now() WHERE id = %s""",
                     ("merged" if action == "merge" else "kept", decided_by, pid))
        return {**get(conn, bank_id, pid), "merged_unit_ids": merged}


def _merge(conn: Connection, bank_id: str, p: dict, keep_unit_id: str | None) -> list[str]:
    """Supersede every live member of proposal ``p`` but the kept one; the ids superseded."""
    members = sorted(str(u) for u in p["members"])
    units = {str(r["id"]): r for r in conn.execute(
        """SELECT id, created_at, superseded_by_id, invalidated_reason FROM memory_units
           WHERE id = ANY(%s::uuid[]) ORDER BY id FOR UPDATE""", (members,)).fetchall()}
    live = [u for u in members if u in units and not units[u]["superseded_by_id"]
            and not units[u]["invalidated_reason"]]
    dead = [u for u in members if u not in live]
    if keep_unit_id is None:
        keep = min(live, key=lambda u: (units[u]["created_at"], u)) if live else members[0]
    else:
        keep = _uuid(keep_unit_id, "keep_unit_id")
        if keep not in members:
            raise InvalidInput("keep_unit_id must be one of the proposal's units",
                               {"field": "keep_unit_id", "value": keep_unit_id,
                                "units": members})
    if keep not in live or len(live) < 2:
        raise Rejected(409, "dedup_unit_not_live",
                       "units of this proposal were superseded or invalidated since and "
                       "nothing is left to merge; decide it with action 'keep'", {"units": dead})
    others = [u for u in live if u != keep]
    conn.execute("""UPDATE memory_units SET superseded_by_id = %s, invalidated_reason = %s,
                           revision = revision + 1 WHERE id = ANY(%s::uuid[])""",
                 (keep, MERGED_REASON, others))
    for other in others:
        links.add(conn, bank_id=bank_id, from_unit=keep, to_unit=other, link_type="supersedes")
    return others
