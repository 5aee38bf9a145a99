"""The bank service: what HTTP (``/v1/default/banks…``) calls to list, create, update,
read, reset and delete banks (a bank is also created on first retain, :mod:`rcll.retain`).

Every method takes the caller's :class:`~rcll.access.principal.Principal` first and checks
its role itself (``read`` to read a bank, ``admin`` to change or delete it; listing needs
none: it shows the banks the caller holds a grant on). Each write owns its transaction and
its audit entry (:func:`rcll.store.audit.record`); a delete evicts the bank from tier 1
after the commit (:mod:`rcll.cascade.invalidation`). Answers are bank rows (dicts); the
HTTP layer shapes them (:mod:`api.hindsight`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import grants_filter, unit_filter
from rcll.cascade import invalidation
from rcll.errors import BankNotFound
from rcll.store import audit, banks, documents, mental_models
from rcll.store.jobs import HINDSIGHT_STATUS

if TYPE_CHECKING:
    from rcll.bootstrap import Services


class BankService:
    """Banks over the process's read-write pool (``services.pool``) and tier 1."""

    def __init__(self, services: Services) -> None:
        self._services = services

    @property
    def pool(self):
        return self._services.pool

    def list(self, principal: Principal, limit: int, offset: int) -> tuple[list[dict], int]:
        """One page of the banks ``principal`` holds a grant on (every bank for a deployment
        admin), newest first, each with ``units``: the live units the caller may see
        (:func:`rcll.access.visibility.grants_filter`). ``(rows, total)``."""
        only = None if principal.is_admin else sorted(principal.grants)
        with self.pool.connection() as conn:
            return banks.list_page(conn, limit, offset, only,
                                   visible=grants_filter(principal, "u"))

    def get(self, principal: Principal, bank_id: str) -> dict:
        """The bank row (``read``). Raises 403 ``forbidden``, 404 ``bank_not_found``."""
        principal.require(bank_id, "read")
        with self.pool.connection() as conn:
            return banks.get(conn, bank_id)

    def put(self, principal: Principal, bank_id: str, name: str | None,
            config: dict) -> tuple[dict, bool]:
        """Create the bank or update its ``name`` and ``config`` keys (``admin``);
        ``(row, created)``. Audit ``bank.create`` / ``bank.update`` (details: name, the
        config fields)."""
        principal.require(bank_id, "admin")
        with self.pool.connection() as conn, conn.transaction():
            row, created = banks.upsert(conn, bank_id, name, config)
            audit.record(conn, principal.member_id, "bank.create" if created else "bank.update",
                         bank_id, details={"name": name, "fields": sorted(config)})
        return row, created

    def update_profile(self, principal: Principal, bank_id: str, name: str | None,
                       config: dict) -> dict:
        """Update an existing bank's ``name`` and ``config`` keys (``admin``; 404
        ``bank_not_found``); audit ``bank.update`` (details: name, fields). The row."""
        return self._update(principal, bank_id, name, config,
                            {"name": name, "fields": sorted(config)})

    def update_config(self, principal: Principal, bank_id: str, name: str | None,
                      config: dict) -> dict:
        """As :meth:`update_profile`, audited with the fields only (``PATCH …/config``)."""
        return self._update(principal, bank_id, name, config, {"fields": sorted(config)})

    def _update(self, principal: Principal, bank_id: str, name: str | None, config: dict,
                details: dict) -> dict:
        principal.require(bank_id, "admin")
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            row, _ = banks.upsert(conn, bank_id, name, config)
            audit.record(conn, principal.member_id, "bank.update", bank_id, details=details)
        return row

    def reset_config(self, principal: Principal, bank_id: str) -> dict:
        """Drop the bank's stored overrides (``admin``); the name stays. Audit
        ``bank.config_reset``. The row after it."""
        principal.require(bank_id, "admin")
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            row = banks.reset_config(conn, bank_id)
            audit.record(conn, principal.member_id, "bank.config_reset", bank_id)
        return row

    def stats(self, principal: Principal, bank_id: str) -> dict:
        """Counts of the bank as ``principal`` sees it (``read``;
        :func:`rcll.store.documents.stats` over
        :func:`rcll.access.visibility.unit_filter`), plus ``operations_by_status``: the
        jobs per Hindsight status (:data:`rcll.store.jobs.HINDSIGHT_STATUS`)."""
        principal.require(bank_id, "read")
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            s = documents.stats(conn, bank_id, visible=unit_filter(principal, bank_id, alias="u"))
        status: dict[str, int] = {}
        for state, n in s["operations_by_state"].items():
            name = HINDSIGHT_STATUS.get(state, state)
            status[name] = status.get(name, 0) + n
        return {**s, "operations_by_status": status}

    def delete(self, principal: Principal, bank_id: str, missing_ok: bool = False) -> bool:
        """Delete the bank and everything in it (``admin``); audit ``bank.delete``; models of
        other banks that saw its units through tunnels lose their content in the same
        transaction (:func:`rcll.store.mental_models.erase_seen`); after the commit tier 1
        forgets the bank. Returns whether the bank existed. A bank that does
        not exist is 404 ``bank_not_found``, or — ``missing_ok`` (Hindsight's route, where
        a delete of a bank never made is done: crewai and agno reset banks that way) —
        ``False``, with no audit entry (tier 1 forgets the id all the same)."""
        principal.require(bank_id, "admin")
        existed = True
        try:
            with self.pool.connection() as conn, conn.transaction():
                seen = mental_models.seen_units_of_bank(conn, bank_id)
                banks.delete(conn, bank_id)
                erased = mental_models.erase_seen(conn, seen, principal.member_id)
                audit.record(conn, principal.member_id, "bank.delete", bank_id=bank_id,
                             details={"mental_models": erased} if erased else None)
        except BankNotFound:
            if not missing_ok:
                raise
            existed = False
        invalidation.bank_dropped(self._services.hot_tier, bank_id)
        self._services.bank_aliases.forget_bank(bank_id)  # its aliases went with it
        return existed
