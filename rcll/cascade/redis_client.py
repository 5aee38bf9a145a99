"""The one place that builds the Redis client of the cascade (hot tier, co-recall weights).

Bounded sockets and no retry: when Redis is down a lookup fails in well under a
second with :class:`redis.RedisError` and the caller falls through to the next tier
(spec §1.4 "degrade, never refuse"), instead of waiting out redis-py's default backoff.
"""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

CONNECT_TIMEOUT_S = 0.25
"""Connecting to a local Redis takes well under a millisecond; a refused or unreachable
server is detected within this."""
SOCKET_TIMEOUT_S = 0.25
"""A single command (or pipeline) on a bank of a few thousand hot units returns in
milliseconds; a server that accepts but does not answer (paused, swapping) is given up after
this. With the cascade's circuit breaker a hung Redis costs one recall 0.25 s per breaker
window (5 s), not every recall — 1 s plus a retry cost one recall 2 s every 5–7 s."""


def make_redis(url: str) -> redis.Redis:
    """A client for ``url`` (``redis://host:port/db``) returning bytes (vectors are binary),
    with the timeouts above and no retry (a retry doubles the wait on a hung server). Connects lazily;
    commands raise :class:`redis.RedisError` when Redis is unreachable."""
    return redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                socket_timeout=SOCKET_TIMEOUT_S, decode_responses=False,
                                retry=Retry(NoBackoff(), 0), health_check_interval=0)
