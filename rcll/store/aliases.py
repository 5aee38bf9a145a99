"""Bank aliases (migration 0040; Hindsight's ``/aliases``): extra ids that reach a bank.
An alias is unique across the deployment and never names a bank."""

from __future__ import annotations

from psycopg import Connection


def resolve(conn: Connection, alias: str) -> str | None:
    """The bank ``alias`` reaches, or ``None``."""
    row = conn.execute("SELECT bank_id FROM bank_aliases WHERE alias = %s", (alias,)).fetchone()
    return row["bank_id"] if row else None


def list_for(conn: Connection, bank_id: str) -> list[dict]:
    """``[{alias, primary}]``: the primary one first, then oldest first."""
    return conn.execute(
        """SELECT alias, is_primary AS primary FROM bank_aliases WHERE bank_id = %s
           ORDER BY is_primary DESC, created_at, alias""", (bank_id,)).fetchall()


def add(conn: Connection, bank_id: str, alias: str, primary: bool) -> bool:
    """Add ``alias``; ``False`` when it names a bank or is taken (nothing changed)."""
    if conn.execute("SELECT 1 FROM memory_banks WHERE id = %s", (alias,)).fetchone():
        return False
    row = conn.execute("""INSERT INTO bank_aliases (alias, bank_id) VALUES (%s, %s)
                          ON CONFLICT (alias) DO NOTHING RETURNING alias""",
                       (alias, bank_id)).fetchone()
    if row is None:
        return False
    if primary:
        set_primary(conn, bank_id, alias, True)
    return True


def set_primary(conn: Connection, bank_id: str, alias: str, primary: bool) -> bool:
    """Make ``alias`` the bank's primary one (the others lose it) or not; ``False`` when the
    bank has no such alias."""
    if not conn.execute("SELECT 1 FROM bank_aliases WHERE alias = %s AND bank_id = %s",
                        (alias, bank_id)).fetchone():
        return False
    conn.execute("UPDATE bank_aliases SET is_primary = false WHERE bank_id = %s AND is_primary",
                 (bank_id,))
    if primary:
        conn.execute("UPDATE bank_aliases SET is_primary = true WHERE alias = %s", (alias,))
    return True


def remove(conn: Connection, bank_id: str, alias: str) -> bool:
    return conn.execute("DELETE FROM bank_aliases WHERE alias = %s AND bank_id = %s RETURNING alias",
                        (alias, bank_id)).fetchone() is not None
