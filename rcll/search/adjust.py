"""Trust and activation adjustments after fusion, and 1-hop expansion (spec §5, step 5).

Stub: leaves the ranking unchanged.
"""

from __future__ import annotations

from rcll.search.state import RecallState


def trust_step(state: RecallState, **params) -> None:
    """Origin and confidence multipliers (placeholder: no change)."""


def expand_step(state: RecallState, **params) -> None:
    """1-hop expansion along strong links when the budget allows (placeholder: no change)."""
