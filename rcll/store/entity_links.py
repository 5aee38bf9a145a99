"""Entity (co-mention) and temporal links between units, written once, never edited.

``memory_links`` rows are keyed ``(from_unit, to_unit, type)`` and inserted with
``ON CONFLICT DO NOTHING``: a replayed stage adds nothing twice and no row is ever updated.
Links point from the newer unit to the older one; readers follow them both ways.
"""

from __future__ import annotations

from psycopg import Connection


def insert(conn: Connection, bank_id: str, link_type: str,
           links: list[tuple[str, str, float]]) -> int:
    """Insert ``(from_unit, to_unit, weight)`` links of ``link_type``; self-links and links
    already stored are skipped. Returns rows inserted."""
    links = [lk for lk in links if lk[0] != lk[1]]
    if not links:
        return 0
    return conn.execute(
        """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           SELECT x.f, x.t, %s, %s, x.w
           FROM unnest(%s::uuid[], %s::uuid[], %s::real[]) AS x(f, t, w)
           ON CONFLICT (from_unit, to_unit, type) DO NOTHING""",
        (bank_id, link_type, *map(list, zip(*links, strict=True)))).rowcount


def temporal(conn: Connection, unit_ids: list[str], window_s: float, per_unit: int) -> int:
    """Temporal links for ``unit_ids``: each unit links to the ``per_unit`` units just before
    it on its bank's timeline — ordered by ``(mentioned_at, created_at, id)``, same origin
    (told with told, derived with derived), live (not invalidated), mentioned at most
    ``window_s`` seconds earlier — weighted ``max(0.1, 1 - Δt / window_s)``. A unit without
    a ``mentioned_at`` links to the chunk before it in its document instead. Two
    statements; returns rows inserted."""
    if not unit_ids:
        return 0
    n = conn.execute(
        """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           SELECT u.id, p.id, u.bank_id, 'temporal',
                  greatest(0.1, 1 - extract(epoch FROM u.mentioned_at - p.mentioned_at) / %(w)s)
           FROM memory_units u
           CROSS JOIN LATERAL (
               SELECT o.id, o.mentioned_at FROM memory_units o
               WHERE o.bank_id = u.bank_id AND o.mentioned_at IS NOT NULL
                 AND o.mentioned_at >= u.mentioned_at - make_interval(secs => %(w)s)
                 AND (o.mentioned_at, o.created_at, o.id) < (u.mentioned_at, u.created_at, u.id)
                 AND o.origin = u.origin AND o.invalidated_reason IS NULL
               ORDER BY o.mentioned_at DESC, o.created_at DESC, o.id DESC
               LIMIT %(k)s) AS p
           WHERE u.id = ANY(%(ids)s::uuid[]) AND u.mentioned_at IS NOT NULL
           ON CONFLICT (from_unit, to_unit, type) DO NOTHING""",
        {"w": window_s, "k": per_unit, "ids": unit_ids}).rowcount
    n += conn.execute(
        """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight)
           SELECT u.id, p.id, u.bank_id, 'temporal', 1.0
           FROM memory_units u JOIN chunks c ON c.id = u.chunk_id
           CROSS JOIN LATERAL (
               SELECT o.id FROM memory_units o JOIN chunks oc ON oc.id = o.chunk_id
               WHERE o.document_id = u.document_id AND oc.index < c.index
                 AND o.origin = u.origin AND o.invalidated_reason IS NULL
               ORDER BY oc.index DESC LIMIT 1) AS p
           WHERE u.id = ANY(%(ids)s::uuid[]) AND u.mentioned_at IS NULL
           ON CONFLICT (from_unit, to_unit, type) DO NOTHING""",
        {"ids": unit_ids}).rowcount
    return n
