"""Temporal channel: units in the query's time window (spec §5).

Stub: no candidates.
"""

from __future__ import annotations

from rcll.search.channels import ChannelOutput


def temporal_candidates(conn, scope, pq, ctx) -> ChannelOutput:
    """Placeholder: no candidates."""
    return ChannelOutput([], {"window": None})
