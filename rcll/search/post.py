"""Post-processing of the ranked result (spec §5): duplicates collapsed, Memory Worth
filter, L0 units always included.

Stub: leaves the ranking unchanged.
"""

from __future__ import annotations

from rcll.search.state import RecallState


def collapse_duplicates_step(state: RecallState, cosine: float = 0.88) -> None:
    """Collapse near-duplicates within the result (placeholder: no change)."""


def worth_step(state: RecallState, **params) -> None:
    """Drop units whose Memory Worth is low (placeholder: no change)."""


def l0_step(state: RecallState, **params) -> None:
    """Include the bank's L0 units (placeholder: no change)."""
