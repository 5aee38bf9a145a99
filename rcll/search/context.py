"""Context scoring: a unit's score borrows from its neighbours and its episode (issue 7).

Stub until measured: leaves the ranking unchanged.
"""

from __future__ import annotations

from rcll.search.state import RecallState


def context_step(state: RecallState, **params) -> None:
    """No-op placeholder (filled in by the context-scoring work)."""
