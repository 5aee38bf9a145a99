"""Directives (migration 0029): a bank's rules for reflect — the repository. Permission
rules and audit entries live in the service (:mod:`rcll.directives.service`); these
functions only read and write rows.

A directive as returned here: ``{"id", "bank_id", "name", "content", "priority",
"is_active", "tags", "created_by", "created_at", "updated_at"}`` (``id`` a UUID string,
times as ``datetime``).

Scope (:func:`scope_sql`): an untagged directive is global and applies everywhere; a tagged
one only to a request whose tags match it, by ``tags_match`` as Hindsight defines it for
reflect — ``any``/``any_strict`` (shares a tag), ``all``/``all_strict`` (holds every tag of
the request), ``exact`` (the same set). A request without tags gets the global ones only.
"""

from __future__ import annotations

import builtins

from psycopg import Connection

COLUMNS = """d.id::text AS id, d.bank_id, d.name, d.content, d.priority, d.is_active, d.tags,
    d.created_by, d.created_at, d.updated_at"""
ORDER = "ORDER BY d.priority DESC, d.created_at, d.id"
# the request's tags are %(scope_tags)s; "untagged directives remain global in every mode"
_TAGGED = {
    "any": "d.tags && %(scope_tags)s::text[]",
    "any_strict": "d.tags && %(scope_tags)s::text[]",
    "all": "d.tags @> %(scope_tags)s::text[]",
    "all_strict": "d.tags @> %(scope_tags)s::text[]",
    "exact": "(d.tags @> %(scope_tags)s::text[] AND d.tags <@ %(scope_tags)s::text[])",
}
MATCH_MODES = tuple(_TAGGED)


def scope_sql(tags_match: str) -> str:
    """The condition (over alias ``d``, parameter ``scope_tags``) of directives in the scope
    of a request with those tags; ``ValueError`` for an unknown ``tags_match``."""
    if tags_match not in _TAGGED:
        raise ValueError(f"unknown tags_match {tags_match!r}")
    return (f"(cardinality(d.tags) = 0 OR (cardinality(%(scope_tags)s::text[]) > 0 "
            f"AND {_TAGGED[tags_match]}))")


def insert(conn: Connection, bank_id: str, *, name: str, content: str, priority: int,
           is_active: bool, tags: builtins.list[str], created_by: str | None) -> dict:
    """Insert one directive in the caller's transaction; the new row."""
    return conn.execute(
        f"""INSERT INTO directives AS d (bank_id, name, content, priority, is_active, tags,
                                         created_by)
            VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}""",
        (bank_id, name, content, priority, is_active, tags, created_by)).fetchone()


def get(conn: Connection, bank_id: str, directive_id: str, lock: bool = False) -> dict | None:
    """The directive ``directive_id`` (a UUID string) of ``bank_id``, or ``None``."""
    return conn.execute(
        f"SELECT {COLUMNS} FROM directives d WHERE d.id = %s AND d.bank_id = %s"
        + (" FOR UPDATE" if lock else ""), (directive_id, bank_id)).fetchone()


def update(conn: Connection, bank_id: str, directive_id: str, fields: dict) -> dict | None:
    """Set ``fields`` (any of name, content, priority, is_active, tags) and ``updated_at``;
    the row after it, or ``None`` when there is no such directive."""
    allowed = ("name", "content", "priority", "is_active", "tags")
    sets = [f"{k} = %({k})s" for k in allowed if k in fields]
    return conn.execute(
        f"""UPDATE directives AS d SET {", ".join([*sets, "updated_at = now()"])}
            WHERE d.id = %(id)s AND d.bank_id = %(bank)s RETURNING {COLUMNS}""",
        {**{k: fields[k] for k in allowed if k in fields}, "id": directive_id,
         "bank": bank_id}).fetchone()


def delete(conn: Connection, bank_id: str, directive_id: str) -> dict | None:
    """Delete the directive; the deleted row, or ``None`` when there was none."""
    return conn.execute(
        f"DELETE FROM directives AS d WHERE d.id = %s AND d.bank_id = %s RETURNING {COLUMNS}",
        (directive_id, bank_id)).fetchone()


def list_page(conn: Connection, bank_id: str, *, tags: builtins.list[str] | None,
              tags_match: str, active_only: bool, limit: int,
              offset: int) -> tuple[builtins.list[dict], int]:
    """One page of the bank's directives, highest priority first (then oldest), and the
    total matching: ``tags`` (``None`` or empty: every directive) keeps the directives in
    the scope of those tags (:func:`scope_sql`), ``active_only`` the active ones."""
    where = ["d.bank_id = %(bank)s"]
    params: dict = {"bank": bank_id, "limit": limit, "offset": offset}
    if tags:
        where.append(scope_sql(tags_match))
        params["scope_tags"] = list(tags)
    if active_only:
        where.append("d.is_active")
    clause = " AND ".join(where)
    rows = conn.execute(f"SELECT {COLUMNS} FROM directives d WHERE {clause} {ORDER} "
                        "LIMIT %(limit)s OFFSET %(offset)s", params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM directives d WHERE {clause}",
                         params).fetchone()["n"]
    return rows, total


def in_scope(conn: Connection, bank_id: str, tags: builtins.list[str] | None,
             tags_match: str, apply_all: bool = False,
             limit: int = 1000) -> builtins.list[dict]:
    """The active directives a reflect with ``tags`` applies, highest priority first (then
    oldest): the global ones and the tagged ones in scope (:func:`scope_sql`); every active
    one with ``apply_all``. At most ``limit``."""
    where = ["d.bank_id = %(bank)s", "d.is_active"]
    params: dict = {"bank": bank_id, "limit": limit, "scope_tags": list(tags or [])}
    if not apply_all:
        where.append(scope_sql(tags_match))
    return conn.execute(f"SELECT {COLUMNS} FROM directives d WHERE {' AND '.join(where)} "
                        f"{ORDER} LIMIT %(limit)s", params).fetchall()
