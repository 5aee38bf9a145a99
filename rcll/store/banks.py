"""Memory banks: created on first retain, listed, deleted with everything they hold."""

from __future__ import annotations

from collections.abc import Collection

from psycopg import Connection

from rcll.errors import BankNotFound


def ensure(conn: Connection, bank_id: str) -> None:
    """Create the bank if it does not exist (idempotent)."""
    conn.execute(
        "INSERT INTO memory_banks (id, name) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
        (bank_id, bank_id),
    )


def get(conn: Connection, bank_id: str) -> dict:
    """The bank row. Raises :class:`BankNotFound`."""
    row = conn.execute("SELECT * FROM memory_banks WHERE id = %s", (bank_id,)).fetchone()
    if row is None:
        raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})
    return row


def list_page(conn: Connection, limit: int = 50, offset: int = 0,
              only: Collection[str] | None = None,
              visible: tuple[str, dict] = ("TRUE", {})) -> tuple[list[dict], int]:
    """One page of banks with their unit counts, newest first (ties broken by id, so pages
    never overlap); ``(rows, total banks)``. ``only``: just these bank ids (the banks a
    caller holds a grant on); ``None`` = every bank. ``visible``: ``(sql, params)`` on alias
    ``u`` (:func:`rcll.access.visibility.grants_filter`) — unless ``"TRUE"``, ``units``
    counts only live, not forgotten units the caller may see (another member's private
    units are not even counted)."""
    clause = "WHERE b.id = ANY(%(only)s)" if only is not None else ""
    vis = "TRUE" if visible[0] == "TRUE" else f"u.forgotten_at IS NULL AND {visible[0]}"
    params = {"only": list(only) if only is not None else None, "l": limit, "o": offset,
              **visible[1]}
    rows = conn.execute(
        f"""SELECT b.id, b.name, b.config, b.created_at,
                  (SELECT count(*) FROM memory_units u WHERE u.bank_id = b.id AND {vis}) AS units
           FROM memory_banks b {clause} ORDER BY b.created_at DESC, b.id DESC
           LIMIT %(l)s OFFSET %(o)s""", params).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM memory_banks b {clause}",
                         params).fetchone()["n"]
    return rows, total


def upsert(conn: Connection, bank_id: str, name: str | None = None,
           config: dict | None = None) -> tuple[dict, bool]:
    """Create the bank or update it: ``name`` (when given) replaces the display name (a new
    bank is named after its id), ``config`` keys are merged into the stored ``config``
    (jsonb ``||``; a key with value ``None`` is removed). ``(row, created)``."""
    from psycopg.types.json import Jsonb

    config = config or {}
    drop = [k for k, v in config.items() if v is None]
    keep = {k: v for k, v in config.items() if v is not None}
    row = conn.execute(
        """INSERT INTO memory_banks (id, name, config) VALUES (%(id)s, coalesce(%(name)s, %(id)s),
                  %(cfg)s)
           ON CONFLICT (id) DO UPDATE SET name = coalesce(%(name)s, memory_banks.name),
                  config = (memory_banks.config || %(cfg)s) - %(drop)s::text[]
           RETURNING *, (xmax = 0) AS created""",
        {"id": bank_id, "name": name, "cfg": Jsonb(keep), "drop": drop}).fetchone()
    created = bool(row.pop("created"))
    return row, created


def reset_config(conn: Connection, bank_id: str) -> dict:
    """Drop every stored override of the bank (``config = '{}'``); the name stays. The bank
    row after it. Raises :class:`BankNotFound`."""
    row = conn.execute("UPDATE memory_banks SET config = '{}'::jsonb WHERE id = %s "
                       "RETURNING *", (bank_id,)).fetchone()
    if row is None:
        raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})
    return row


def list_all(conn: Connection) -> list[dict]:
    """Every bank with its unit count, newest first."""
    total = conn.execute("SELECT count(*) AS n FROM memory_banks").fetchone()["n"]
    return list_page(conn, max(total, 1), 0)[0]


def delete(conn: Connection, bank_id: str) -> None:
    """Delete a bank and everything in it (documents, units, embeddings, jobs).

    The bank's job rows are locked first (the order workers lock in: job row, then the
    rows they write), so a delete waits for a worker's item in flight, and the worker's next
    item finds its job gone and stops (see :func:`rcll.store.jobs.lock_for_work`).
    Raises :class:`BankNotFound`.
    """
    conn.execute("SELECT id FROM jobs WHERE bank_id = %s ORDER BY id FOR UPDATE", (bank_id,))
    if conn.execute("DELETE FROM memory_banks WHERE id = %s RETURNING id", (bank_id,)).fetchone() is None:
        raise BankNotFound(f"bank {bank_id!r} does not exist", {"bank_id": bank_id})
