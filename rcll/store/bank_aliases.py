"""Bank aliases (migration 0025): extra ids a bank answers to. An alias never names a bank
and a bank never takes an alias's id (the migration's triggers: SQLSTATE 23505, constraint
``bank_alias_id_conflict``)."""

from __future__ import annotations

from psycopg import Connection

CONFLICT_CONSTRAINT = "bank_alias_id_conflict"


def bank_of(conn: Connection, alias: str) -> str | None:
    """The bank ``alias`` names, or ``None``."""
    row = conn.execute("SELECT bank_id FROM bank_aliases WHERE alias = %s",
                       (alias,)).fetchone()
    return row["bank_id"] if row else None


def list_for(conn: Connection, bank_id: str) -> list[dict]:
    """``bank_id``'s aliases ``[{"alias", "primary"}]``, the primary one first, then oldest
    first."""
    return conn.execute(
        """SELECT alias, is_primary AS "primary" FROM bank_aliases WHERE bank_id = %s
           ORDER BY is_primary DESC, created_at, alias""", (bank_id,)).fetchall()


def count(conn: Connection, bank_id: str) -> int:
    return conn.execute("SELECT count(*) AS n FROM bank_aliases WHERE bank_id = %s",
                        (bank_id,)).fetchone()["n"]


def insert(conn: Connection, bank_id: str, alias: str, created_by: str | None) -> bool:
    """Add ``alias`` to ``bank_id``; False when the alias exists already (of any bank).
    Raises ``psycopg.errors.UniqueViolation`` (constraint :data:`CONFLICT_CONSTRAINT`) when
    ``alias`` names a bank."""
    return conn.execute(
        """INSERT INTO bank_aliases (alias, bank_id, created_by) VALUES (%s, %s, %s)
           ON CONFLICT (alias) DO NOTHING RETURNING alias""",
        (alias, bank_id, created_by)).fetchone() is not None


def set_primary(conn: Connection, bank_id: str, alias: str, primary: bool) -> bool:
    """Make ``alias`` the bank's primary alias (the previous one no longer is), or no
    longer primary; False when ``alias`` is not one of ``bank_id``'s."""
    if primary:
        conn.execute("""UPDATE bank_aliases SET is_primary = false
                        WHERE bank_id = %s AND is_primary AND alias <> %s""", (bank_id, alias))
    return conn.execute(
        "UPDATE bank_aliases SET is_primary = %s WHERE bank_id = %s AND alias = %s "
        "RETURNING alias", (primary, bank_id, alias)).fetchone() is not None


def delete(conn: Connection, bank_id: str, alias: str) -> bool:
    """Remove ``alias`` from ``bank_id``; False when it is not one of its aliases."""
    return conn.execute("DELETE FROM bank_aliases WHERE bank_id = %s AND alias = %s "
                        "RETURNING alias", (bank_id, alias)).fetchone() is not None
