"""Graph channel: spreading activation from the query's entities (spec §5).

Stub: no candidates.
"""

from __future__ import annotations

from rcll.search.channels import ChannelOutput


def graph_candidates(conn, scope, pq, ctx) -> ChannelOutput:
    """Placeholder: no candidates."""
    return ChannelOutput([], {"seeds": 0})
