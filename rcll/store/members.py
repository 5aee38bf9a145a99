"""Members, API keys and bank grants (migration 0017): the SQL, nothing else.

Rules (who may, which purposes exist, the audit entry) live in :mod:`rcll.access.service`.
Rows are dicts; key rows never leave this module with their ``key_hash`` except through
:func:`key_for_auth`.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import Connection

MEMBER_COLUMNS = "id, name, kind, is_admin, default_purposes, created_at, disabled_at"
KEY_COLUMNS = "id::text AS id, member_id, prefix, label, created_at, last_used_at, revoked_at"
GRANT_COLUMNS = "member_id, bank_id, role, purposes, created_at, updated_at"


# --- members ----------------------------------------------------------------------------
def insert_member(conn: Connection, member_id: str, name: str, kind: str, is_admin: bool,
                  default_purposes: Sequence[str]) -> dict | None:
    """Insert a member; ``None`` when the id is taken."""
    return conn.execute(
        f"""INSERT INTO members (id, name, kind, is_admin, default_purposes)
            VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING
            RETURNING {MEMBER_COLUMNS}""",
        (member_id, name, kind, is_admin, list(default_purposes))).fetchone()


def get_member(conn: Connection, member_id: str, *, lock: bool = False) -> dict | None:
    """The member row or ``None``; ``lock`` takes ``FOR UPDATE``."""
    return conn.execute(f"SELECT {MEMBER_COLUMNS} FROM members WHERE id = %s"
                        + (" FOR UPDATE" if lock else ""), (member_id,)).fetchone()


def list_members(conn: Connection, limit: int, offset: int,
                 include_disabled: bool = True) -> tuple[list[dict], int]:
    """One page of members, oldest first (ties by id); ``(rows, total)``."""
    clause = "" if include_disabled else "WHERE disabled_at IS NULL"
    rows = conn.execute(f"SELECT {MEMBER_COLUMNS} FROM members {clause} "
                        "ORDER BY created_at, id LIMIT %s OFFSET %s", (limit, offset)).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM members {clause}").fetchone()["n"]
    return rows, total


def update_member(conn: Connection, member_id: str, fields: dict) -> dict | None:
    """Set the given columns (``name``, ``kind``, ``is_admin``, ``default_purposes``,
    ``disabled``: true sets ``disabled_at = now()`` if unset, false clears it). ``None`` when
    the member does not exist."""
    sets, params = [], []
    for col in ("name", "kind", "is_admin", "default_purposes"):
        if col in fields:
            sets.append(f"{col} = %s")
            params.append(list(fields[col]) if col == "default_purposes" else fields[col])
    if "disabled" in fields:
        sets.append("disabled_at = coalesce(disabled_at, now())" if fields["disabled"]
                    else "disabled_at = NULL")
    if not sets:
        return get_member(conn, member_id)
    return conn.execute(f"UPDATE members SET {', '.join(sets)} WHERE id = %s "
                        f"RETURNING {MEMBER_COLUMNS}", (*params, member_id)).fetchone()


# --- keys -------------------------------------------------------------------------------
def insert_key(conn: Connection, member_id: str, prefix: str, key_hash: str,
               label: str | None) -> dict:
    """Store a key's hash; returns the public row (no hash)."""
    return conn.execute(
        f"""INSERT INTO api_keys (member_id, prefix, key_hash, label) VALUES (%s, %s, %s, %s)
            RETURNING {KEY_COLUMNS}""", (member_id, prefix, key_hash, label)).fetchone()


def get_key(conn: Connection, key_id: str) -> dict | None:
    """The public row of key ``key_id`` (a UUID string; the caller checks its shape)."""
    return conn.execute(f"SELECT {KEY_COLUMNS} FROM api_keys WHERE id = %s",
                        (key_id,)).fetchone()


def list_keys(conn: Connection, member_id: str) -> list[dict]:
    """A member's keys (revoked ones too), oldest first; never the hash."""
    return conn.execute(f"SELECT {KEY_COLUMNS} FROM api_keys WHERE member_id = %s "
                        "ORDER BY created_at, id", (member_id,)).fetchall()


def revoke_key(conn: Connection, key_id: str) -> dict | None:
    """Set ``revoked_at`` (kept if already set); the public row or ``None``."""
    return conn.execute(f"""UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
                            WHERE id = %s RETURNING {KEY_COLUMNS}""", (key_id,)).fetchone()


def key_for_auth(conn: Connection, prefix: str) -> dict | None:
    """Everything authentication needs about the key with ``prefix``, in one statement:
    ``{key_id, key_hash, revoked_at, member_id, is_admin, default_purposes, disabled_at,
    grants: [{bank_id, role, purposes}]}``; ``None`` when no key has that prefix."""
    return conn.execute(
        """SELECT k.id::text AS key_id, k.key_hash, k.revoked_at, m.id AS member_id,
                  m.is_admin, m.default_purposes, m.disabled_at,
                  coalesce((SELECT json_agg(json_build_object('bank_id', g.bank_id,
                                   'role', g.role, 'purposes', g.purposes))
                            FROM bank_grants g WHERE g.member_id = m.id), '[]') AS grants
           FROM api_keys k JOIN members m ON m.id = k.member_id WHERE k.prefix = %s""",
        (prefix,)).fetchone()


def key_for_session(conn: Connection, key_id: str) -> dict | None:
    """As :func:`key_for_auth`, found by the key's id (a web session holds the id, never
    the key); ``None`` when no key has that id."""
    return conn.execute(
        """SELECT k.id::text AS key_id, k.key_hash, k.revoked_at, m.id AS member_id,
                  m.is_admin, m.default_purposes, m.disabled_at,
                  coalesce((SELECT json_agg(json_build_object('bank_id', g.bank_id,
                                   'role', g.role, 'purposes', g.purposes))
                            FROM bank_grants g WHERE g.member_id = m.id), '[]') AS grants
           FROM api_keys k JOIN members m ON m.id = k.member_id WHERE k.id = %s::uuid""",
        (key_id,)).fetchone()


def touch_key(conn: Connection, key_id: str, min_interval_s: float) -> bool:
    """Set ``last_used_at = now()`` unless it was set less than ``min_interval_s`` ago;
    whether a row changed."""
    row = conn.execute(
        """UPDATE api_keys SET last_used_at = now()
           WHERE id = %s AND (last_used_at IS NULL
                              OR last_used_at < now() - make_interval(secs => %s))
           RETURNING id""", (key_id, min_interval_s)).fetchone()
    return row is not None


# --- grants -----------------------------------------------------------------------------
def upsert_grant(conn: Connection, member_id: str, bank_id: str, role: str,
                 purposes: Sequence[str]) -> dict:
    """Create or replace the member's grant on the bank."""
    return conn.execute(
        f"""INSERT INTO bank_grants (member_id, bank_id, role, purposes) VALUES (%s, %s, %s, %s)
            ON CONFLICT (member_id, bank_id) DO UPDATE
              SET role = EXCLUDED.role, purposes = EXCLUDED.purposes, updated_at = now()
            RETURNING {GRANT_COLUMNS}""", (member_id, bank_id, role, list(purposes))).fetchone()


def get_grant(conn: Connection, bank_id: str, member_id: str) -> dict | None:
    return conn.execute(f"SELECT {GRANT_COLUMNS} FROM bank_grants "
                        "WHERE bank_id = %s AND member_id = %s", (bank_id, member_id)).fetchone()


def delete_grant(conn: Connection, bank_id: str, member_id: str) -> dict | None:
    """Delete and return the grant, or ``None``."""
    return conn.execute(f"DELETE FROM bank_grants WHERE bank_id = %s AND member_id = %s "
                        f"RETURNING {GRANT_COLUMNS}", (bank_id, member_id)).fetchone()


def grants_of_bank(conn: Connection, bank_id: str) -> list[dict]:
    """Every grant on a bank, by member id."""
    return conn.execute(f"SELECT {GRANT_COLUMNS} FROM bank_grants WHERE bank_id = %s "
                        "ORDER BY member_id", (bank_id,)).fetchall()


def grants_of_member(conn: Connection, member_id: str) -> list[dict]:
    """Every grant a member holds, by bank id."""
    return conn.execute(f"SELECT {GRANT_COLUMNS} FROM bank_grants WHERE member_id = %s "
                        "ORDER BY bank_id", (member_id,)).fetchall()
