"""Invalidation of the cascade's caches after a PostgreSQL commit (spec §5, issue 8 §7).

Tier 1 is a cache of PostgreSQL and must never serve what PostgreSQL would not: the write
paths that supersede, invalidate (a replaced document version, a merged duplicate),
re-scope (room, hall or layer changed by a new document version) or delete units, or
delete a bank, call these functions right after their transaction commits. Best effort:
Redis being down must never fail a write, so errors are logged and counted, not raised
(the cascade's hydration through the caller scope in PostgreSQL is the second guard).

The same points fence a read replica when one is configured (``hot.replica``, a
:class:`rcll.replica.ReplicaRouter`): a removal (:func:`units_left`, :func:`bank_dropped`)
raises the bank's and the deployment's watermark, new units (:func:`bank_written`) the
bank's, so no read after the write runs on a replica that has not replayed it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rcll.cascade.hot import HotTier

log = logging.getLogger(__name__)

failures = {"units": 0, "banks": 0, "cues": 0}
"""Invalidations that failed in this process (Redis unreachable), by kind."""


def units_left(hot: HotTier | None, bank_id: str, unit_ids: Iterable[str]) -> int:
    """Remove ``unit_ids`` of ``bank_id`` from tier 1 (and their co-recall weights).
    ``hot`` ``None`` (no cascade wired in) does nothing. Returns how many were hot; 0 when
    Redis failed (logged)."""
    ids = [str(u) for u in unit_ids]
    if hot is None or not ids:
        return 0
    _fence(hot, bank_id, removal=True)
    try:
        return hot.invalidate(bank_id, ids)
    except Exception as exc:  # redis.RedisError and anything else: never fail the write
        failures["units"] += 1
        log.warning("tier 1: could not invalidate %d units of bank %s: %s: %s", len(ids),
                    bank_id, type(exc).__name__, exc)
        return 0


def bank_dropped(hot: HotTier | None, bank_id: str) -> bool:
    """Remove everything the cascade holds in Redis for a deleted bank. True when done,
    False when Redis failed (logged) or ``hot`` is ``None``."""
    if hot is None:
        return False
    _fence(hot, bank_id, removal=True)
    try:
        hot.drop_bank(bank_id)
        return True
    except Exception as exc:
        failures["banks"] += 1
        log.warning("tier 1: could not drop bank %s: %s: %s", bank_id, type(exc).__name__, exc)
        return False


def bank_written(hot: HotTier | None, bank_id: str) -> int:
    """New units of ``bank_id`` are searchable: tier 1 forgets the bank's cues, so a
    re-asked question is answered by the cold tier once (seeing the new units) instead of
    from the answer it got before them. Units, activation and co-recall weights stay.
    Returns how many units lost their cues; 0 when Redis failed (logged) or ``hot`` is
    ``None``."""
    if hot is None:
        return 0
    _fence(hot, bank_id, removal=False)
    try:
        return hot.forget_cues(bank_id)
    except Exception as exc:
        failures["cues"] += 1
        log.warning("tier 1: could not forget the cues of bank %s: %s: %s", bank_id,
                    type(exc).__name__, exc)
        return 0


def _fence(hot, bank_id: str, removal: bool) -> None:
    """Fence the read replica of ``hot`` (:func:`rcll.replica.fence`; never raises)."""
    from rcll import replica

    replica.fence(getattr(hot, "replica", None), [bank_id], removal)
