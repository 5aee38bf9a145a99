"""The consolidation service: what HTTP (``…/closets``, ``…/dedup-proposals``) calls to
make and list closets and to list, scan and decide dedup proposals.

Every method takes the caller's :class:`~rcll.access.principal.Principal` first and checks
its role itself (``read`` to list, ``write`` to make closets or scan, ``admin`` to decide a
proposal). Listings hold only what the caller may see
(:func:`rcll.access.visibility.unit_filter`). Each write owns its transaction and audit
entry; a closets job is made by the one job protocol (:func:`rcll.retain.submit.submit_job`:
job row and audit entry in one transaction, enqueue after commit); a merge evicts the
merged unit from tier 1 after the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.cascade import invalidation
from rcll.consolidate import closets as closet_jobs
from rcll.consolidate.dedup import DedupSettings, scan_bank
from rcll.errors import InvalidInput, Rejected
from rcll.retain.submit import submit_job
from rcll.store import audit, banks, closets, dedup

if TYPE_CHECKING:
    from rcll.bootstrap import Services

DEDUP_STATES = dedup.STATES


def check_dedup_state(state: str | None) -> str | None:
    """``state`` if it is ``None`` or a proposal state (:data:`DEDUP_STATES`); else 400
    ``invalid_request``."""
    if state is not None and state not in DEDUP_STATES:
        raise InvalidInput(f"state must be one of {', '.join(DEDUP_STATES)}", {"field": "state"})
    return state


class ConsolidateService:
    """Closets and dedup proposals over the process's pool; ``enqueue(task_name, job_id)``
    sends a closets job to the workers (injected: ``rcll`` never imports Celery)."""

    def __init__(self, services: Services, enqueue: Callable[[str, str], None]) -> None:
        self._services = services
        self.enqueue = enqueue

    @property
    def pool(self):
        return self._services.pool

    # --- closets ---------------------------------------------------------------------------
    def make_closets(self, principal: Principal, bank_id: str, room: str | None = None,
                     hall: str | None = None) -> dict:
        """A queued ``closets`` job for the bank (``write``; optionally one room and/or
        hall), audited ``closets.create`` and enqueued after the commit; returns the job
        row. Raises 400 ``llm_not_configured`` in chunk mode, 404 ``bank_not_found``, 503
        ``queue_unavailable`` when it could not be enqueued (the job is ``failed``)."""
        from rcll.retain import stages

        principal.require(bank_id, "write")
        if self._services.settings.llm_provider == "none":
            raise Rejected(400, "llm_not_configured",
                           "closets need an LLM; set RCLL_LLM_PROVIDER (chunk mode makes none)")

        def create(conn) -> dict:
            banks.get(conn, bank_id)
            return closet_jobs.create_job(conn, bank_id, room, hall, principal.member_id)

        return submit_job(self.pool, self.enqueue,
                          stages.JOB_STEPS[closet_jobs.STAGE].task_name, create,
                          actor=principal.member_id, action="closets.create", bank_id=bank_id,
                          details={"room": room, "hall": hall}, what="closets job")

    def closets(self, principal: Principal, bank_id: str, room: str | None, hall: str | None,
                limit: int, offset: int) -> tuple[list[dict], int]:
        """One page of the bank's closets (``read``), newest first, as
        :func:`rcll.store.closets.to_json` — only closets whose summary unit the caller may
        see; ``(closets, total)``."""
        principal.require(bank_id, "read")
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            rows, total = closets.list_page(conn, bank_id, room, hall, limit, offset,
                                            visible=unit_filter(principal, bank_id, alias="vu"))
        return [closets.to_json(r) for r in rows], total

    # --- dedup proposals -------------------------------------------------------------------
    @staticmethod
    def _pairs_visible(principal: Principal, bank_id: str) -> tuple[str, dict]:
        """Only proposals whose two units the caller may see."""
        return dedup.pair_filter(partial(unit_filter, principal, bank_id))

    def dedup_proposals(self, principal: Principal, bank_id: str, state: str | None,
                        limit: int, offset: int) -> tuple[list[dict], int]:
        """One page of the bank's proposals (``read``), highest cosine first (then larger
        clusters); ``(rows, total)``, rows as :func:`rcll.store.dedup.to_json` (pair fields
        plus ``size`` and ``members``)."""
        principal.require(bank_id, "read")
        check_dedup_state(state)
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            return dedup.list_page(conn, bank_id, state, limit, offset,
                                   visible=self._pairs_visible(principal, bank_id))

    def dedup_scan(self, principal: Principal, bank_id: str) -> dict:
        """Scan the bank now (``write``; synchronous, bounded to ``dedup_window`` units,
        :func:`rcll.consolidate.dedup.scan_bank`), then audit ``dedup.scan`` with its
        counts. Returns the scan's answer."""
        principal.require(bank_id, "write")
        out = scan_bank(self.pool, bank_id, DedupSettings.from_settings(self._services.settings))
        with self.pool.connection() as conn, conn.transaction():
            audit.record(conn, principal.member_id, "dedup.scan", bank_id, None,
                         {k: v for k, v in out.items()
                          if isinstance(v, (int, float, str, bool)) and k != "bank_id"})
        return out

    def decide_dedup(self, principal: Principal, bank_id: str, proposal_id: str, action: str,
                     keep_unit_id: str | None = None, decided_by: str | None = None) -> dict:
        """Decide one open proposal (``admin``; :func:`rcll.store.dedup.decide`), audited
        ``dedup.decide``; the merged units leave tier 1 after the commit. Returns the
        proposal with ``merged_unit_ids`` (a cluster's decision applies to all its
        members); 409 ``dedup_proposal_decided`` if it was decided."""
        principal.require(bank_id, "admin")
        with self.pool.connection() as conn, conn.transaction():
            out = dedup.decide(conn, bank_id, proposal_id, action, keep_unit_id, decided_by,
                               visible=self._pairs_visible(principal, bank_id))
            merged = out["merged_unit_ids"]
            audit.record(conn, principal.member_id, "dedup.decide", bank_id,
                         merged[0] if merged else None,
                         {"proposal_id": out["id"], "action": action, "merged": merged,
                          "decided_by": decided_by})
        invalidation.units_left(self._services.hot_tier, bank_id, merged)
        return out
