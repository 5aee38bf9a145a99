"""Mental models and their history (migration 0030)."""

from __future__ import annotations

from psycopg import Connection
from psycopg.types.json import Jsonb

COLUMNS = ("bank_id, id, name, source_query, tags, max_tokens, content, reflect_response, "
           "seen_unit_ids, refreshed_by, created_at, updated_at, last_refreshed_at")


def get(conn: Connection, bank_id: str, model_id: str, *, lock: bool = False) -> dict | None:
    return conn.execute(f"SELECT {COLUMNS} FROM mental_models WHERE bank_id = %s AND id = %s"
                        + (" FOR UPDATE" if lock else ""), (bank_id, model_id)).fetchone()


def list_for(conn: Connection, bank_id: str, tags: list[str] | None, tags_match: str,
             limit: int, offset: int) -> tuple[list[dict], int]:
    """``(rows, total)``: the bank's models, oldest first; ``tags`` with ``tags_match``
    (``any``: shares one; ``all``: holds every one; ``exact``: the same set)."""
    cond, params = "bank_id = %(b)s", {"b": bank_id, "t": tags or [], "l": limit, "o": offset}
    if tags:
        cond += {"any": " AND tags && %(t)s", "all": " AND tags @> %(t)s",
                 "exact": " AND tags @> %(t)s AND tags <@ %(t)s"}[tags_match]
    total = conn.execute(f"SELECT count(*) AS n FROM mental_models WHERE {cond}",
                         params).fetchone()["n"]
    rows = conn.execute(f"SELECT {COLUMNS} FROM mental_models WHERE {cond} "
                        "ORDER BY created_at, id LIMIT %(l)s OFFSET %(o)s", params).fetchall()
    return rows, total


def insert(conn: Connection, bank_id: str, model_id: str, name: str, source_query: str,
           tags: list[str], max_tokens: int, created_by: str | None) -> bool:
    """False when the bank has a model with that id already."""
    return conn.execute(
        """INSERT INTO mental_models (bank_id, id, name, source_query, tags, max_tokens,
                                      created_by)
           VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id""",
        (bank_id, model_id, name, source_query, tags, max_tokens, created_by)
    ).fetchone() is not None


def update(conn: Connection, bank_id: str, model_id: str, fields: dict) -> None:
    """Set ``fields`` (a subset of name, source_query, tags, max_tokens)."""
    sets = ", ".join(f"{k} = %({k})s" for k in fields)
    conn.execute(f"UPDATE mental_models SET {sets}, updated_at = now() "
                 "WHERE bank_id = %(_b)s AND id = %(_i)s",
                 {**fields, "_b": bank_id, "_i": model_id})


def set_content(conn: Connection, bank_id: str, model_id: str, content: str | None,
                reflect_response: dict | None, seen: list[str], actor: str | None) -> None:
    conn.execute(
        """UPDATE mental_models SET content = %s, reflect_response = %s,
               seen_unit_ids = %s::uuid[], refreshed_by = %s, updated_at = now(),
               last_refreshed_at = CASE WHEN %s::text IS NULL THEN last_refreshed_at ELSE now() END
           WHERE bank_id = %s AND id = %s""",
        (content, None if reflect_response is None else Jsonb(reflect_response), seen, actor,
         content, bank_id, model_id))


def add_history(conn: Connection, bank_id: str, model_id: str, action: str,
                previous: str | None, content: str | None, source_query: str,
                actor: str | None, seen: list[str] | None = None) -> None:
    """One history row; ``seen``: the units a refresh gave the model (what
    :func:`erase_seen` looks for)."""
    conn.execute(
        """INSERT INTO mental_model_history (bank_id, mental_model_id, action,
               previous_content, content, source_query, actor, seen_unit_ids)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s::uuid[])""",
        (bank_id, model_id, action, previous, content, source_query, actor, seen))


def seen_units_of_bank(conn: Connection, bank_id: str) -> list[str]:
    """The units of ``bank_id`` that a mental model of another bank saw (through a
    tunnel; its current or a history row's ``seen_unit_ids``): what a delete of the bank
    erases from them (:func:`erase_seen`). The bank's own models go with the bank."""
    return [str(r["id"]) for r in conn.execute(
        """SELECT u.id FROM memory_units u
           WHERE u.bank_id = %(b)s AND u.id IN (
               SELECT unnest(seen_unit_ids) FROM mental_models WHERE bank_id <> %(b)s
               UNION SELECT unnest(seen_unit_ids) FROM mental_model_history
                     WHERE bank_id <> %(b)s)
           ORDER BY u.id""", {"b": bank_id}).fetchall()]


def erase_seen(conn: Connection, unit_ids: list[str], actor: str | None) -> list[str]:
    """The erasure of ``unit_ids``' text (forget, a document delete, a bank clear) reaching
    the mental models written from them, in the caller's transaction: every model — of any
    bank, since a refresh also sees the units tunnels bring in — whose current
    ``seen_unit_ids`` or any history row's holds one of them loses its ``content`` and
    ``reflect_response`` and every content its history kept, and gets one history row
    ``forget`` (actor ``actor``). A model refreshed again is written from what is left.
    Returns the models as ``"<bank_id>/<model_id>"``, sorted — what the erasing action's
    audit entry lists (``details.mental_models``; migration 0032)."""
    if not unit_ids:
        return []
    ids = [str(u) for u in unit_ids]
    rows = conn.execute(
        """SELECT m.bank_id, m.id, m.source_query FROM mental_models m
           WHERE (m.bank_id, m.id) IN (
               SELECT bank_id, id FROM mental_models WHERE seen_unit_ids && %(u)s::uuid[]
               UNION SELECT bank_id, mental_model_id FROM mental_model_history
                     WHERE seen_unit_ids && %(u)s::uuid[])
           ORDER BY m.bank_id, m.id FOR UPDATE OF m""", {"u": ids}).fetchall()
    for r in rows:
        conn.execute("UPDATE mental_models SET content = NULL, reflect_response = NULL, "
                     "updated_at = now() WHERE bank_id = %s AND id = %s", (r["bank_id"], r["id"]))
        conn.execute("UPDATE mental_model_history SET previous_content = NULL, content = NULL "
                     "WHERE bank_id = %s AND mental_model_id = %s", (r["bank_id"], r["id"]))
        add_history(conn, r["bank_id"], r["id"], "forget", None, None, r["source_query"], actor)
    return [f"{r['bank_id']}/{r['id']}" for r in rows]


def history(conn: Connection, bank_id: str, model_id: str) -> list[dict]:
    """Newest first."""
    return conn.execute(
        """SELECT action, previous_content, content, source_query, actor, at
           FROM mental_model_history WHERE bank_id = %s AND mental_model_id = %s
           ORDER BY seq DESC""", (bank_id, model_id)).fetchall()


def delete(conn: Connection, bank_id: str, model_id: str) -> bool:
    return conn.execute("DELETE FROM mental_models WHERE bank_id = %s AND id = %s RETURNING id",
                        (bank_id, model_id)).fetchone() is not None


def hidden_count(conn: Connection, bank_id: str, seen: list, rule_sql: str,
                 params: dict) -> int:
    """How many of the live units ``seen`` the visibility condition ``rule_sql`` (on alias
    ``u``) hides."""
    if not seen:
        return 0
    return conn.execute(
        f"""SELECT count(*) AS n FROM memory_units u
            WHERE u.bank_id = %(_b)s AND u.id = ANY(%(_s)s::uuid[]) AND NOT ({rule_sql})""",
        {**params, "_b": bank_id, "_s": [str(s) for s in seen]}).fetchone()["n"]
