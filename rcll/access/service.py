"""Members, API keys and grants: the rules, written once for HTTP and the CLI (spec §7).

:class:`AccessService` creates members, issues keys (the key is returned once and only its
keyed hash is stored, :mod:`rcll.access.keys`), revokes them, sets and revokes grants and
resolves a presented key into a :class:`~rcll.access.principal.Principal`. Every change is
recorded in the audit log (:mod:`rcll.store.audit`) in the same transaction, with the actor
``by.member_id``.

Who may: members and keys are managed by a deployment admin (the bootstrap key or a member
with ``is_admin``); a bank's grants by an admin of that bank. A member may list and revoke
its own keys. Each method checks this itself (the HTTP layer checks the route's role first).

The bootstrap admin (``RCLL_ADMIN_KEY``) is the principal with member id ``"admin"``
(:data:`BOOTSTRAP_ADMIN_ID`, reserved: no member can take it); it is a deployment admin
holding every purpose but, like every admin, sees only ``bank``-audience units and its own.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime

from psycopg_pool import ConnectionPool

from rcll.access import keys
from rcll.access.principal import BANK_AUDIENCE, ROLES, Grant, Principal
from rcll.config import Settings
from rcll.errors import Forbidden, InvalidInput, NotFound, Rejected, Unauthorized
from rcll.store import audit
from rcll.store import members as store

log = logging.getLogger(__name__)

BOOTSTRAP_ADMIN_ID = "admin"
RESERVED_IDS = frozenset({BOOTSTRAP_ADMIN_ID, BANK_AUDIENCE})
MEMBER_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
KINDS = ("agent", "person")
TOUCH_INTERVAL_S = 60.0
INVALID_KEY_MESSAGE = "the API key is not valid (unknown, revoked, or its member is disabled)"


class MissingAPIKey(Unauthorized):
    """401: no ``Authorization: Bearer <key>`` header."""

    code = "missing_api_key"


class InvalidAPIKey(Unauthorized):
    """401: a key that is malformed, unknown, revoked, or whose member is disabled — one
    message for all, so the answer tells nothing about which."""

    code = "invalid_api_key"

    def __init__(self) -> None:
        super().__init__(INVALID_KEY_MESSAGE)


def _error(cls, code: str, message: str, details: dict | None = None):
    err = cls(message, details)
    err.code = code
    return err


def member_json(row: dict) -> dict:
    """A member row as JSON: ``{member_id, name, kind, is_admin, default_purposes,
    created_at, disabled_at}`` (ISO times)."""
    return {"member_id": row["id"], "name": row["name"], "kind": row["kind"],
            "is_admin": row["is_admin"], "default_purposes": list(row["default_purposes"]),
            "created_at": _iso(row["created_at"]), "disabled_at": _iso(row["disabled_at"])}


def key_json(row: dict) -> dict:
    """A key row as JSON (never the key nor its hash): ``{key_id, member_id, prefix, label,
    created_at, last_used_at, revoked_at}``."""
    return {"key_id": row["id"], "member_id": row["member_id"], "prefix": row["prefix"],
            "label": row["label"], "created_at": _iso(row["created_at"]),
            "last_used_at": _iso(row["last_used_at"]), "revoked_at": _iso(row["revoked_at"])}


def grant_json(row: dict) -> dict:
    """A grant row as JSON: ``{member_id, bank_id, role, purposes, created_at, updated_at}``."""
    return {"member_id": row["member_id"], "bank_id": row["bank_id"], "role": row["role"],
            "purposes": list(row["purposes"]), "created_at": _iso(row["created_at"]),
            "updated_at": _iso(row["updated_at"])}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class AccessService:
    """Members, keys and grants over ``pool`` (read-write) and ``read_pool`` (what
    :meth:`authenticate` reads with; a SELECT-only role in a read-only deployment).

    ``settings`` gives the closed purpose set, the bootstrap admin key, the key-hash
    secret (:func:`rcll.access.keys.server_secret`, read on first use) and ``read_only``
    (then ``last_used_at`` is not written).
    """

    def __init__(self, pool: ConnectionPool, read_pool: ConnectionPool, settings: Settings):
        self.pool = pool
        self.read_pool = read_pool
        self.settings = settings
        self.purposes: tuple[str, ...] = tuple(settings.purposes)
        self._secret: bytes | None = None
        self._touched: dict[str, float] = {}
        self._touch_lock = threading.Lock()

    @property
    def secret(self) -> bytes:
        """The key-hash secret (module :mod:`rcll.access.keys`), read once."""
        if self._secret is None:
            self._secret = keys.server_secret(self.settings)
        return self._secret

    # --- authentication ------------------------------------------------------------------
    def bootstrap_admin(self) -> Principal:
        """The principal of ``RCLL_ADMIN_KEY``: member id ``"admin"``, deployment admin."""
        return Principal(member_id=BOOTSTRAP_ADMIN_ID, is_admin=True,
                         default_purposes=self.purposes, purposes_all=self.purposes)

    def authenticate(self, key: str | None) -> Principal:
        """The principal a presented key stands for. Raises :class:`MissingAPIKey` for
        ``None``/empty and :class:`InvalidAPIKey` for a malformed, unknown or revoked key or
        a disabled member. Updates the key's ``last_used_at`` at most once a minute per key
        (own short transaction on the read-write pool, never in read-only mode)."""
        if not key:
            raise MissingAPIKey("send 'Authorization: Bearer <api key>'")
        admin_key = self.settings.admin_key
        if admin_key and keys.same_secret(key, admin_key):
            return self.bootstrap_admin()
        prefix = keys.prefix_of(key)
        if prefix is None:
            raise InvalidAPIKey()
        with self.read_pool.connection() as conn:
            row = store.key_for_auth(conn, prefix)
        if row is None:
            keys.hash_key(self.secret, key)  # same work as a known prefix: no timing oracle
            raise InvalidAPIKey()
        if (not keys.verify(self.secret, key, row["key_hash"]) or row["revoked_at"] is not None
                or row["disabled_at"] is not None):
            raise InvalidAPIKey()
        self._touch(row["key_id"])
        return self._principal(row)

    def session_principal(self, key_id: str | None) -> Principal:
        """The principal of a web session that signed in with the key ``key_id`` (``None``:
        the bootstrap admin key), read afresh: a key revoked or a member disabled since the
        sign-in ends the session. Raises :class:`InvalidAPIKey` then (and for an unknown id).
        """
        if key_id is None:
            if not self.settings.admin_key:
                raise InvalidAPIKey()
            return self.bootstrap_admin()
        try:
            kid = str(uuid.UUID(key_id))
        except (ValueError, TypeError, AttributeError):
            raise InvalidAPIKey()
        with self.read_pool.connection() as conn:
            row = store.key_for_session(conn, kid)
        if row is None or row["revoked_at"] is not None or row["disabled_at"] is not None:
            raise InvalidAPIKey()
        self._touch(row["key_id"])
        return self._principal(row)

    def _principal(self, row: dict) -> Principal:
        grants = {g["bank_id"]: Grant(g["bank_id"], g["role"], tuple(g["purposes"]))
                  for g in row["grants"]}
        return Principal(member_id=row["member_id"], grants=grants, is_admin=row["is_admin"],
                         default_purposes=tuple(row["default_purposes"]),
                         purposes_all=self.purposes, key_id=row["key_id"])

    def _touch(self, key_id: str) -> None:
        if self.settings.read_only:
            return
        now = time.monotonic()
        with self._touch_lock:
            last = self._touched.get(key_id)
            if last is not None and now - last < TOUCH_INTERVAL_S:
                return
            self._touched[key_id] = now
        try:
            with self.pool.connection() as conn:
                store.touch_key(conn, key_id, TOUCH_INTERVAL_S)
        except Exception as exc:  # bookkeeping only: never fail the request for it
            log.warning("last_used_at of key %s not updated: %s", key_id, exc)

    # --- checks --------------------------------------------------------------------------
    @staticmethod
    def _deployment_admin(by: Principal) -> None:
        if not by.is_admin:
            raise Forbidden("only a deployment admin manages members and keys",
                            {"needed": "deployment admin", "have": by.member_id})

    def check_purposes(self, purposes: Iterable, field: str = "purposes") -> tuple[str, ...]:
        """``purposes`` as a tuple without repeats (order kept) if it is a non-empty list of
        configured purposes; else 400 ``unknown_purpose`` (or ``invalid_request`` when not a
        list of strings)."""
        if isinstance(purposes, str) or not isinstance(purposes, Sequence) or not purposes \
                or not all(isinstance(p, str) for p in purposes):
            raise InvalidInput(f"{field} must be a non-empty list of purposes",
                               {"field": field, "allowed": list(self.purposes)})
        unknown = [p for p in purposes if p not in self.purposes]
        if unknown:
            raise _error(InvalidInput, "unknown_purpose",
                         f"unknown purpose(s) {', '.join(map(repr, unknown))}",
                         {"field": field, "unknown": unknown, "allowed": list(self.purposes)})
        return tuple(dict.fromkeys(purposes))

    @staticmethod
    def check_member_id(member_id) -> str:
        """``member_id`` if it is a slug (``[a-z0-9][a-z0-9_.-]{0,63}``) and not reserved
        (``admin``, ``bank``); else 400 ``invalid_member_id`` / ``reserved_member_id``."""
        if not isinstance(member_id, str) or not MEMBER_ID.fullmatch(member_id):
            raise _error(InvalidInput, "invalid_member_id",
                         "member id must be 1-64 of lowercase letters, digits, '_', '.', '-', "
                         "starting with a letter or digit", {"member_id": str(member_id)[:80]})
        if member_id in RESERVED_IDS:
            raise _error(InvalidInput, "reserved_member_id",
                         f"member id {member_id!r} is reserved", {"member_id": member_id})
        return member_id

    @staticmethod
    def _check_key_id(key_id: str) -> str:
        try:
            return str(uuid.UUID(key_id))
        except (ValueError, TypeError, AttributeError):
            raise _error(NotFound, "key_not_found", f"no API key {key_id!r}",
                         {"key_id": str(key_id)[:80]})

    @staticmethod
    def _member_or_404(conn, member_id: str, lock: bool = False) -> dict:
        row = store.get_member(conn, member_id, lock=lock)
        if row is None:
            raise _error(NotFound, "member_not_found", f"no member {member_id!r}",
                         {"member_id": member_id})
        return row

    # --- members -------------------------------------------------------------------------
    def create_member(self, by: Principal, member_id: str, name: str | None = None,
                      kind: str = "agent", is_admin: bool = False,
                      default_purposes: Sequence[str] | None = None) -> dict:
        """Create a member (deployment admin). ``default_purposes`` default
        ``[settings.default_purpose]``. Returns :func:`member_json`. Raises 400
        (``invalid_member_id``, ``reserved_member_id``, ``unknown_purpose``,
        ``invalid_request``), 403, 409 ``member_exists``."""
        self._deployment_admin(by)
        self.check_member_id(member_id)
        if kind not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}", {"field": "kind"})
        if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > 200):
            raise InvalidInput("name must be 1-200 characters", {"field": "name"})
        purposes = self.check_purposes(default_purposes if default_purposes is not None
                                       else [self.settings.default_purpose], "default_purposes")
        with self.pool.connection() as conn, conn.transaction():
            row = store.insert_member(conn, member_id, name or member_id, kind, bool(is_admin),
                                      purposes)
            if row is None:
                raise Rejected(409, "member_exists", f"member {member_id!r} exists",
                               {"member_id": member_id})
            audit.record(conn, by.member_id, "member.create", details={
                "member_id": member_id, "kind": kind, "is_admin": bool(is_admin),
                "default_purposes": list(purposes)})
        return member_json(row)

    def get_member(self, by: Principal, member_id: str) -> dict:
        """A member with its grants (``grants``: list of :func:`grant_json`); the member
        itself or a deployment admin. 404 ``member_not_found``."""
        if by.member_id != member_id:
            self._deployment_admin(by)
        with self.read_pool.connection() as conn:
            row = self._member_or_404(conn, member_id)
            grants = store.grants_of_member(conn, member_id)
        return {**member_json(row), "grants": [grant_json(g) for g in grants]}

    def list_members(self, by: Principal, limit: int = 50, offset: int = 0
                     ) -> tuple[list[dict], int]:
        """One page of members (deployment admin), oldest first; ``(rows, total)``."""
        self._deployment_admin(by)
        with self.read_pool.connection() as conn:
            rows, total = store.list_members(conn, limit, offset)
        return [member_json(r) for r in rows], total

    def update_member(self, by: Principal, member_id: str, fields: dict) -> dict:
        """Change ``name``, ``kind``, ``is_admin``, ``default_purposes`` or ``disabled``
        (bool) of a member (deployment admin). 400 for another field or a bad value, 404."""
        self._deployment_admin(by)
        allowed = {"name", "kind", "is_admin", "default_purposes", "disabled"}
        extra = sorted(set(fields) - allowed)
        if extra:
            raise InvalidInput(f"unknown field(s) {', '.join(extra)}",
                               {"unknown": extra, "allowed": sorted(allowed)})
        clean = dict(fields)
        if "kind" in clean and clean["kind"] not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}", {"field": "kind"})
        if "name" in clean and (not isinstance(clean["name"], str) or not clean["name"].strip()
                                or len(clean["name"]) > 200):
            raise InvalidInput("name must be 1-200 characters", {"field": "name"})
        for flag in ("is_admin", "disabled"):
            if flag in clean and not isinstance(clean[flag], bool):
                raise InvalidInput(f"{flag} must be true or false", {"field": flag})
        if "default_purposes" in clean:
            clean["default_purposes"] = self.check_purposes(clean["default_purposes"],
                                                            "default_purposes")
        with self.pool.connection() as conn, conn.transaction():
            self._member_or_404(conn, member_id, lock=True)
            row = store.update_member(conn, member_id, clean)
            action = ("member.disable" if clean.get("disabled") is True and len(clean) == 1
                      else "member.update")
            audit.record(conn, by.member_id, action, details={
                "member_id": member_id,
                **{k: (list(v) if isinstance(v, tuple) else v) for k, v in clean.items()}})
        return member_json(row)

    def disable_member(self, by: Principal, member_id: str) -> dict:
        """Disable a member (deployment admin): every key of it stops working at once; its
        keys, grants and units are kept. 404 ``member_not_found``."""
        return self.update_member(by, member_id, {"disabled": True})

    # --- keys ----------------------------------------------------------------------------
    def issue_key(self, by: Principal, member_id: str, label: str | None = None) -> dict:
        """A new key for a member (deployment admin): :func:`key_json` plus ``"key"``, the
        only time the key is shown. 404 ``member_not_found``; 409 ``member_disabled``."""
        self._deployment_admin(by)
        if label is not None and (not isinstance(label, str) or len(label) > 200):
            raise InvalidInput("label must be at most 200 characters", {"field": "label"})
        key, prefix = keys.generate()
        with self.pool.connection() as conn, conn.transaction():
            member = self._member_or_404(conn, member_id, lock=True)
            if member["disabled_at"] is not None:
                raise Rejected(409, "member_disabled", f"member {member_id!r} is disabled",
                               {"member_id": member_id})
            row = store.insert_key(conn, member_id, prefix, keys.hash_key(self.secret, key), label)
            audit.record(conn, by.member_id, "key.issue", details={
                "member_id": member_id, "key_id": row["id"], "prefix": prefix, "label": label})
        return {**key_json(row), "key": key}

    def list_keys(self, by: Principal, member_id: str) -> list[dict]:
        """A member's keys without hashes (the member itself or a deployment admin)."""
        if by.member_id != member_id:
            self._deployment_admin(by)
        with self.read_pool.connection() as conn:
            self._member_or_404(conn, member_id)
            return [key_json(r) for r in store.list_keys(conn, member_id)]

    def revoke_key(self, by: Principal, key_id: str) -> dict:
        """Revoke a key (deployment admin, or the key's own member); idempotent. 404
        ``key_not_found`` (also for someone else's key, so ids are not probed)."""
        kid = self._check_key_id(key_id)
        with self.pool.connection() as conn, conn.transaction():
            row = store.get_key(conn, kid)
            if row is None or (not by.is_admin and row["member_id"] != by.member_id):
                raise _error(NotFound, "key_not_found", f"no API key {key_id!r}",
                             {"key_id": key_id})
            was_revoked = row["revoked_at"] is not None
            row = store.revoke_key(conn, kid)
            if not was_revoked:
                audit.record(conn, by.member_id, "key.revoke", details={
                    "member_id": row["member_id"], "key_id": kid, "prefix": row["prefix"]})
        self._touched.pop(kid, None)
        return key_json(row)

    # --- grants --------------------------------------------------------------------------
    def set_grant(self, by: Principal, bank_id: str, member_id: str, role: str,
                  purposes: Sequence[str] | None = None) -> dict:
        """Create or replace ``member_id``'s grant on ``bank_id`` (an admin of the bank).
        ``purposes`` default the member's ``default_purposes``. 400 ``invalid_role`` /
        ``unknown_purpose``, 403, 404 ``member_not_found``."""
        by.require(bank_id, "admin")
        if role not in ROLES:
            raise _error(InvalidInput, "invalid_role", f"role must be one of {', '.join(ROLES)}",
                         {"field": "role", "allowed": list(ROLES)})
        if purposes is not None:
            purposes = self.check_purposes(purposes)
        with self.pool.connection() as conn, conn.transaction():
            member = self._member_or_404(conn, member_id)
            if purposes is None:
                purposes = tuple(member["default_purposes"])
            before = store.get_grant(conn, bank_id, member_id)
            row = store.upsert_grant(conn, member_id, bank_id, role, purposes)
            audit.record(conn, by.member_id, "grant.set", bank_id=bank_id, details={
                "member_id": member_id, "role": role, "purposes": list(purposes),
                "previous": ({"role": before["role"], "purposes": list(before["purposes"])}
                             if before else None)})
        return grant_json(row)

    def list_grants(self, by: Principal, bank_id: str) -> list[dict]:
        """Every grant on a bank (an admin of the bank)."""
        by.require(bank_id, "admin")
        with self.read_pool.connection() as conn:
            return [grant_json(r) for r in store.grants_of_bank(conn, bank_id)]

    def revoke_grant(self, by: Principal, bank_id: str, member_id: str) -> dict:
        """Delete a member's grant on a bank (an admin of the bank). 404 ``grant_not_found``."""
        by.require(bank_id, "admin")
        with self.pool.connection() as conn, conn.transaction():
            row = store.delete_grant(conn, bank_id, member_id)
            if row is None:
                raise _error(NotFound, "grant_not_found",
                             f"member {member_id!r} holds no grant on bank {bank_id!r}",
                             {"bank_id": bank_id, "member_id": member_id})
            audit.record(conn, by.member_id, "grant.revoke", bank_id=bank_id, details={
                "member_id": member_id, "role": row["role"], "purposes": list(row["purposes"])})
        return grant_json(row)

    # --- audit log ------------------------------------------------------------------------
    def audit(self, by: Principal, bank_id: str, *, action: str | None = None,
              actor: str | None = None, unit_id: str | None = None,
              since: datetime | None = None, until: datetime | None = None, limit: int = 50,
              offset: int = 0) -> tuple[list[dict], int]:
        """One page of the bank's audit entries, newest first (an admin of the bank),
        filtered by ``action``, ``actor`` and ``unit_id`` (exact), ``since`` (inclusive)
        and ``until`` (exclusive); ``(rows, total)`` (:func:`rcll.store.audit.list`)."""
        by.require(bank_id, "admin")
        with self.read_pool.connection() as conn:
            return audit.list(conn, bank_id, action=action, actor=actor, unit_id=unit_id,
                              since=since, until=until, limit=limit, offset=offset)

    def audit_entry(self, by: Principal, bank_id: str, entry_id: int) -> dict:
        """One audit entry of the bank (an admin of the bank; the row shape of
        :func:`rcll.store.audit.list`). 403 ``forbidden``, 404 ``audit_entry_not_found``
        (also an entry of another bank)."""
        by.require(bank_id, "admin")
        with self.read_pool.connection() as conn:
            row = audit.get(conn, bank_id, entry_id)
        if row is None:
            err = NotFound(f"audit entry {entry_id} does not exist in bank {bank_id!r}",
                           {"log_id": str(entry_id), "bank_id": bank_id})
            err.code = "audit_entry_not_found"
            raise err
        return row

    def audit_counts(self, by: Principal, bank_id: str, since: datetime, trunc: str,
                     action: str | None = None) -> list[dict]:
        """The bank's audit entries since ``since`` per ``trunc`` bucket and action (an admin
        of the bank; :func:`rcll.store.audit.counts`). 403 ``forbidden``."""
        by.require(bank_id, "admin")
        with self.read_pool.connection() as conn:
            return audit.counts(conn, bank_id, since, trunc, action)

    # --- who am I ------------------------------------------------------------------------
    def whoami(self, by: Principal) -> dict:
        """``{member_id, is_admin, bootstrap, key_id, default_purposes, grants: [{bank_id,
        role, purposes}], member: member_json | None}`` for the caller."""
        member = None
        if by.member_id and by.member_id != BOOTSTRAP_ADMIN_ID:
            with self.read_pool.connection() as conn:
                row = store.get_member(conn, by.member_id)
            member = member_json(row) if row else None
        return {"member_id": by.member_id, "is_admin": by.is_admin,
                "bootstrap": by.member_id == BOOTSTRAP_ADMIN_ID, "key_id": by.key_id,
                "default_purposes": list(by.default_purposes),
                "grants": [{"bank_id": g.bank_id, "role": g.role, "purposes": list(g.purposes)}
                           for g in sorted(by.grants.values(), key=lambda g: g.bank_id)],
                "member": member}
