"""Bank aliases: extra ids a bank answers to (Hindsight's ``…/aliases`` family). Nothing is
copied or moved: the bank keeps its id and everything that names it (answers, jobs, audit
entries) still uses that id; an alias is a second way to reach it, which makes it a
rename without downtime.

:meth:`BankAliasService.resolve` is the one place an id becomes a bank: the API runs it
on the ``bank_id`` of every bank-scoped route before the access check (:mod:`api.auth`),
and the MCP server on every tool's bank, so the check applies to the resolved bank. What an
id resolves to (a bank or nothing) is kept per process for ``RCLL_BANK_ALIAS_CACHE_S``
seconds; a change made through this service is seen by its process at once (its entries
are dropped), by other processes within that time.

Rules: an alias follows the bank id rule (:mod:`rcll.banks.ids`); it must not name a bank
nor another alias (409 ``bank_alias_taken``; the database's triggers, migration 0025, also
keep a bank from being made under an alias's id later); a bank has at most
:data:`MAX_ALIASES` aliases and at most one of them is primary (display only: Hindsight
shows the bank under it). Listing needs ``read`` on the bank, changes ``admin``; each change
owns its transaction and audit entry (``bank_alias.create``, ``bank_alias.update``,
``bank_alias.delete``).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import psycopg

from rcll.access.principal import Principal
from rcll.banks.ids import MAX_BANK_ID_CHARS, bank_id_problem
from rcll.db import read_only
from rcll.errors import NotFound, Rejected
from rcll.store import audit, bank_aliases, banks

if TYPE_CHECKING:
    from rcll.bootstrap import Services

MAX_ALIASES = 100
MAX_CACHED = 10_000


class AliasNotFound(NotFound):
    code = "bank_alias_not_found"


def check_alias(alias: object) -> str:
    """``alias`` when it follows the bank id rule; else 400 ``invalid_bank_alias`` (details
    ``field``, ``reason``)."""
    why = bank_id_problem(alias)
    if why is not None:
        raise Rejected(400, "invalid_bank_alias",
                       f"alias must be 1-{MAX_BANK_ID_CHARS} characters without '/', control "
                       "characters, lone surrogates or U+FFFD, and not '.' or '..' (the bank "
                       f"id rule): {why}", {"field": "alias", "reason": why})
    return alias  # type: ignore[return-value]


def _taken(alias: str, why: str) -> Rejected:
    return Rejected(409, "bank_alias_taken", f"{alias!r} {why}", {"alias": alias})


class BankAliasService:
    """Aliases over the process's pools, with the resolution cache."""

    def __init__(self, services: Services, ttl_s: float) -> None:
        self._services = services
        self._ttl = ttl_s
        self._cache: dict[str, tuple[str | None, float]] = {}
        self._lock = threading.Lock()

    # -- resolution -------------------------------------------------------------------------

    def resolve(self, bank_id: str) -> str:
        """The bank ``bank_id`` names: the bank an alias belongs to, else ``bank_id`` itself
        (a bank or not). Never raises for a malformed id (it is returned as given, for the
        route's own check); a database outage propagates."""
        if bank_id_problem(bank_id) is not None:
            return bank_id
        now = time.monotonic()
        hit = self._cache.get(bank_id)
        if hit is not None and hit[1] > now:
            return hit[0] or bank_id
        with read_only(self._services.read_pool) as conn:
            target = bank_aliases.bank_of(conn, bank_id)
        if self._ttl > 0:
            with self._lock:
                if len(self._cache) >= MAX_CACHED:
                    self._cache.clear()
                self._cache[bank_id] = (target, now + self._ttl)
        return target or bank_id

    def forget(self, *ids: str) -> None:
        """Drop what this process cached about ``ids`` (after a change)."""
        with self._lock:
            for i in ids:
                self._cache.pop(i, None)

    def forget_bank(self, bank_id: str) -> None:
        """Drop every cached alias of ``bank_id`` (the bank was deleted: its aliases went
        with it)."""
        with self._lock:
            for alias in [a for a, (b, _) in self._cache.items() if b == bank_id]:
                self._cache.pop(alias, None)

    # -- the family's use cases --------------------------------------------------------------

    def _answer(self, conn, bank_id: str) -> dict:
        return {"bank_id": bank_id, "aliases": [dict(r) for r in
                                                 bank_aliases.list_for(conn, bank_id)]}

    def list(self, principal: Principal, bank_id: str) -> dict:
        """``{"bank_id", "aliases": [{"alias", "primary"}]}`` (``read``), the primary alias
        first, then oldest first. 404 ``bank_not_found``."""
        principal.require(bank_id, "read")
        with read_only(self._services.read_pool) as conn:
            banks.get(conn, bank_id)
            return self._answer(conn, bank_id)

    def create(self, principal: Principal, bank_id: str, alias: object,
               primary: bool = False) -> dict:
        """Give ``bank_id`` the alias (``admin``); ``primary``: show the bank under it
        (replacing the primary alias it had). The bank's aliases after it (:meth:`list`).
        400 ``invalid_bank_alias`` (the alias breaks the bank id rule), 404
        ``bank_not_found``, 409 ``bank_alias_taken`` (a bank or an alias has that name),
        409 ``too_many_bank_aliases``."""
        principal.require(bank_id, "admin")
        alias = check_alias(alias)
        with self._services.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT id FROM memory_banks WHERE id = %s FOR NO KEY UPDATE",
                         (bank_id,))  # one count check at a time per bank
            banks.get(conn, bank_id)
            if bank_aliases.count(conn, bank_id) >= MAX_ALIASES:
                raise Rejected(409, "too_many_bank_aliases",
                               f"a bank has at most {MAX_ALIASES} aliases",
                               {"bank_id": bank_id, "max": MAX_ALIASES})
            try:
                with conn.transaction():
                    added = bank_aliases.insert(conn, bank_id, alias, principal.member_id)
            except psycopg.errors.UniqueViolation as exc:
                if exc.diag.constraint_name != bank_aliases.CONFLICT_CONSTRAINT:
                    raise
                raise _taken(alias, "is a bank id; an alias cannot shadow a bank") from None
            if not added:
                raise _taken(alias, "is an alias already")
            if primary:
                bank_aliases.set_primary(conn, bank_id, alias, True)
            audit.record(conn, principal.member_id, "bank_alias.create", bank_id,
                         details={"alias": alias, "primary": bool(primary)})
            out = self._answer(conn, bank_id)
        self.forget(alias)
        return out

    def set_primary(self, principal: Principal, bank_id: str, alias: str,
                    primary: bool) -> dict:
        """Show the bank under ``alias`` (``primary``), or no longer (``admin``). The
        bank's aliases after it. 400 ``invalid_bank_alias``; 404 ``bank_not_found``,
        ``bank_alias_not_found``."""
        principal.require(bank_id, "admin")
        check_alias(alias)
        with self._services.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT id FROM memory_banks WHERE id = %s FOR NO KEY UPDATE",
                         (bank_id,))  # one primary at a time
            banks.get(conn, bank_id)
            if not bank_aliases.set_primary(conn, bank_id, alias, primary):
                raise AliasNotFound(f"{alias!r} is not an alias of bank {bank_id!r}",
                                    {"bank_id": bank_id, "alias": alias})
            audit.record(conn, principal.member_id, "bank_alias.update", bank_id,
                         details={"alias": alias, "primary": primary})
            return self._answer(conn, bank_id)

    def delete(self, principal: Principal, bank_id: str, alias: str) -> dict:
        """Remove ``alias`` from ``bank_id`` (``admin``): the id reaches nothing any more
        (and may become a bank of its own). The bank's aliases after it. 400
        ``invalid_bank_alias``; 404 ``bank_not_found``, ``bank_alias_not_found``."""
        principal.require(bank_id, "admin")
        check_alias(alias)
        with self._services.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            if not bank_aliases.delete(conn, bank_id, alias):
                raise AliasNotFound(f"{alias!r} is not an alias of bank {bank_id!r}",
                                    {"bank_id": bank_id, "alias": alias})
            audit.record(conn, principal.member_id, "bank_alias.delete", bank_id,
                         details={"alias": alias})
            out = self._answer(conn, bank_id)
        self.forget(alias)
        return out
