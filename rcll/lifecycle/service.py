"""The lifecycle service: the one implementation of the verbs that HTTP, the CLI and MCP
call (spec §7, §8; issue 9 item 3). Recall stays in :mod:`rcll.cascade`.

Every verb takes the caller's :class:`~rcll.access.principal.Principal` first and checks
its role on the bank itself (``read`` for read; ``write`` for the others), so no channel
can skip it. Errors are :mod:`rcll.errors` classes (see :mod:`rcll.lifecycle.rules`).
Every write verb records an audit entry in its own transaction
(:func:`rcll.store.audit.record`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.lifecycle import correct, derive, forget, read, remember, supersede
from rcll.lifecycle.context import LifecycleContext

if TYPE_CHECKING:
    from rcll.bootstrap import Services


class Lifecycle:
    """The seven verbs' write/read services (recall stays in rcll.cascade)."""

    def __init__(self, services: Services) -> None:
        self.ctx = LifecycleContext(services)

    def read(self, principal: Principal, bank_id: str, unit_id: str,
             purpose: str | None = None) -> dict:
        """See :func:`rcll.lifecycle.read.read`."""
        return read.read(self.ctx, principal, bank_id, unit_id, purpose)

    def history(self, principal: Principal, bank_id: str, unit_id: str) -> dict:
        """See :func:`rcll.lifecycle.read.history` (earlier revisions and feedback)."""
        return read.history(self.ctx, principal, bank_id, unit_id)

    def remember(self, principal: Principal, bank_id: str, unit: dict) -> dict:
        """See :func:`rcll.lifecycle.remember.remember` (HTTP: 201)."""
        return remember.remember(self.ctx, principal, bank_id, unit)

    def derive(self, principal: Principal, bank_id: str, source_ids: list[str],
               unit: dict) -> dict:
        """See :func:`rcll.lifecycle.derive.derive` (HTTP: 201)."""
        return derive.derive(self.ctx, principal, bank_id, source_ids, unit)

    def correct(self, principal: Principal, bank_id: str, unit_id: str, revision: int | None,
                changes: dict) -> dict:
        """See :func:`rcll.lifecycle.correct.correct`."""
        return correct.correct(self.ctx, principal, bank_id, unit_id, revision, changes)

    def supersede(self, principal: Principal, bank_id: str, unit_id: str, revision: int,
                  unit: dict) -> dict:
        """See :func:`rcll.lifecycle.supersede.supersede` (HTTP: 201)."""
        return supersede.supersede(self.ctx, principal, bank_id, unit_id, revision, unit)

    def forget(self, principal: Principal, bank_id: str, unit_id: str,
               reason: str | None = None) -> dict:
        """See :func:`rcll.lifecycle.forget.forget`."""
        return forget.forget(self.ctx, principal, bank_id, unit_id, reason)
