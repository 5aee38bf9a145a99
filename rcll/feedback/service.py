"""The feedback service: what HTTP (``POST …/memories/{unit_id}/feedback``) calls to record
one outcome for a unit (Memory Worth, spec §3, §5).

:meth:`FeedbackService.record` takes the caller's
:class:`~rcll.access.principal.Principal` first and checks ``write`` on the bank itself; a
unit the caller may not see (:func:`rcll.access.visibility.unit_filter`) is not found, like
a missing one. The outcome and its audit entry ``unit.feedback`` share one transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.store import audit, banks, feedback
from rcll.store.memories import parse_unit_id

if TYPE_CHECKING:
    from rcll.bootstrap import Services


def check_unit_id(unit_id: str) -> str:
    """Canonical UUID text; 400 ``invalid_unit_id`` otherwise."""
    return parse_unit_id(unit_id)


def check_outcome(value) -> str:
    """``"success"`` or ``"failure"``; 400 ``invalid_outcome`` otherwise."""
    return feedback.parse_outcome(value)


class FeedbackService:
    """Feedback over the process's read-write pool (``services.pool``)."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def record(self, principal: Principal, bank_id: str, unit_id: str, outcome: str) -> dict:
        """Add one ``outcome`` to the unit (``write``) → ``{unit_id, success, failure,
        worth}`` (:func:`rcll.store.feedback.record`). Raises 400 ``invalid_unit_id`` /
        ``invalid_outcome``, 403, 404 ``bank_not_found`` / ``unit_not_found`` (also a unit
        of another bank or one the caller may not see)."""
        principal.require(bank_id, "write")
        check_unit_id(unit_id)
        outcome = check_outcome(outcome)
        with self._services.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            out = feedback.record(conn, bank_id, unit_id, outcome,
                                  visible=unit_filter(principal, bank_id, alias="m"))
            audit.record(conn, principal.member_id, "unit.feedback", bank_id, out["unit_id"],
                         {"outcome": outcome})
        return out
