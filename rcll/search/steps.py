"""The steps a recipe runs after fusion, by name (see :mod:`rcll.search.recipes`).

A step is ``fn(state: RecallState, **params) -> None``: it reads and rewrites
``state.ranked`` (``[(unit_id, score)]``, best first), may hydrate rows and records what it
did in ``state.counts`` / ``state.degraded``. Steps never write to the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rcll.search.adjust import expand_step, trust_step
from rcll.search.context import context_step
from rcll.search.coverage import coverage_step
from rcll.search.documents import documents_step
from rcll.search.post import collapse_duplicates_step, l0_step, worth_step
from rcll.search.rerank import rerank_step
from rcll.search.speaker import speaker_step
from rcll.search.state import RecallState
from rcll.search.window import window_step

STEPS: dict[str, Callable[..., None]] = {
    "context": context_step,
    "coverage": coverage_step,
    "documents": documents_step,
    "speaker": speaker_step,
    "window": window_step,
    "rerank": rerank_step,
    "trust": trust_step,
    "expand": expand_step,
    "collapse_duplicates": collapse_duplicates_step,
    "worth": worth_step,
    "l0": l0_step,
}


def run_steps(state: RecallState, steps=None) -> None:
    """Run ``state.recipe.steps`` in order, timing each into ``state.timings``.
    Raises ``KeyError`` for a step name not in :data:`STEPS` (a recipe error)."""
    for step in state.recipe.steps if steps is None else steps:
        t = time.perf_counter()
        STEPS[step.name](state, **dict(step.params))
        state.timings[step.name] = round((time.perf_counter() - t) * 1000, 2)
