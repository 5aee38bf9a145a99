"""The one place that builds the Redis client of the cascade (hot tier, co-recall weights).

Bounded sockets and a single retry: when Redis is down a lookup fails in well under a
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
SOCKET_TIMEOUT_S = 1.0
"""A single command on a bank of a few thousand hot units returns in milliseconds; a server
that accepts but does not answer is given up after this."""


def make_redis(url: str) -> redis.Redis:
    """A client for ``url`` (``redis://host:port/db``) returning bytes (vectors are binary),
    with the timeouts above and one immediate retry on a connection error. Connects lazily;
    commands raise :class:`redis.RedisError` when Redis is unreachable."""
    return redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                socket_timeout=SOCKET_TIMEOUT_S, decode_responses=False,
                                retry=Retry(NoBackoff(), 1), health_check_interval=0)
