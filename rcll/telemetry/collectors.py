"""Families sampled when Prometheus scrapes the API: queue depth per queue (Redis list
lengths or RabbitMQ queue depths) and jobs by state (PostgreSQL). Each source is asked with a
short timeout; one that does not answer is reported by ``rcll_metrics_source_up{source} 0``
and its family is left out of that scrape — a scrape never fails or hangs on it.

Only the API registers these (one sampler per deployment's scrape target, not one per worker
replica, so sums over targets do not multiply them)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

JOB_STATES = ("queued", "running", "succeeded", "partial", "failed", "cancelled")
# kombu's Redis transport keeps a queue's messages of priority p > 0 in "<queue>\x06\x16<p>"
# (kombu.transport.redis: sep and the default priority_steps 0, 3, 6, 9)
REDIS_PRIORITY_SEP = "\x06\x16"
REDIS_PRIORITY_STEPS = (3, 6, 9)


def is_amqp(url: str) -> bool:
    """Whether ``url`` names an AMQP broker (RabbitMQ): ``amqp://``, ``amqps://``, ``pyamqp://``."""
    return urlsplit(url).scheme in ("amqp", "amqps", "pyamqp")


def redis_queue_depths(url: str, queues: Iterable[str], timeout_s: float) -> dict[str, int]:
    """``{queue: messages waiting}`` on a Redis broker (every priority list of the queue).
    Raises ``redis.RedisError`` when Redis does not answer within ``timeout_s``."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                  socket_connect_timeout=timeout_s)
    try:
        pipe = client.pipeline(transaction=False)
        names = list(queues)
        for q in names:
            pipe.llen(q)
            for p in REDIS_PRIORITY_STEPS:
                pipe.llen(f"{q}{REDIS_PRIORITY_SEP}{p}")
        lengths = pipe.execute()
        per = 1 + len(REDIS_PRIORITY_STEPS)
        return {q: int(sum(lengths[i * per:(i + 1) * per])) for i, q in enumerate(names)}
    finally:
        client.close()


def amqp_queue_depths(url: str, queues: Iterable[str], timeout_s: float) -> dict[str, int]:
    """``{queue: ready messages}`` on an AMQP broker, by a passive declare of each queue
    (messages delivered but not yet acknowledged are not counted). A queue that does not exist
    yet (no worker declared it) counts 0. Raises kombu/amqp errors when the broker does not
    answer within ``timeout_s``."""
    from amqp.exceptions import NotFound
    from kombu import Connection

    out: dict[str, int] = {}
    with Connection(url, connect_timeout=timeout_s,
                    transport_options={"read_timeout": timeout_s,
                                       "write_timeout": timeout_s}) as conn:
        conn.ensure_connection(max_retries=0, timeout=timeout_s)
        for q in queues:
            channel = conn.channel()
            try:
                _name, depth, _consumers = channel.queue_declare(queue=q, passive=True)
                out[q] = int(depth)
            except NotFound:  # the server closed this channel; the next queue opens another
                out[q] = 0
            finally:
                try:
                    channel.close()
                except Exception:
                    pass
    return out


def queue_depths(url: str, queues: Iterable[str], timeout_s: float) -> dict[str, int]:
    """``{queue: messages waiting}`` on the broker at ``url`` (Redis or AMQP)."""
    if is_amqp(url):
        return amqp_queue_depths(url, queues, timeout_s)
    return redis_queue_depths(url, queues, timeout_s)


def jobs_by_state(pool, timeout_s: float) -> dict[str, int]:
    """``{state: jobs}`` for every job state (0 for a state no job is in), from one
    ``GROUP BY`` under a ``statement_timeout`` of ``timeout_s``. ``pool`` is a psycopg pool.
    Raises psycopg errors (pool timeout, statement timeout)."""
    counts = dict.fromkeys(JOB_STATES, 0)
    with pool.connection(timeout=timeout_s) as conn, conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        conn.execute("SELECT set_config('statement_timeout', %s, true)",
                      (f"{int(timeout_s * 1000)}ms",))
        for row in conn.execute("SELECT state, count(*) AS n FROM jobs GROUP BY state"):
            state, n = (row["state"], row["n"]) if isinstance(row, dict) else row
            counts[state] = int(n)
    return counts


class ScrapeCollector(Collector):
    """``rcll_queue_depth{queue}``, ``rcll_jobs{state}`` and ``rcll_metrics_source_up{source}``,
    sampled on each scrape. ``broker_url`` and ``queues``: where to count; ``pool``: a callable
    returning the psycopg pool (lazy: the API opens it on first use)."""

    def __init__(self, broker_url: str, queues: Iterable[str], pool: Callable[[], object],
                 timeout_s: float = 1.0):
        self.broker_url, self.queues = broker_url, list(queues)
        self.pool, self.timeout_s = pool, timeout_s

    def describe(self):
        return []  # sampled live: registering must not touch the broker or the database

    def collect(self):
        up = GaugeMetricFamily("rcll_metrics_source_up",
                               "1 when the sampled source answered this scrape, else 0.",
                               labels=["source"])
        try:
            depths = queue_depths(self.broker_url, self.queues, self.timeout_s)
        except Exception as exc:
            log.warning("metrics: queue depth unavailable: %s: %s", type(exc).__name__, exc)
            up.add_metric(["broker"], 0)
        else:
            up.add_metric(["broker"], 1)
            depth = GaugeMetricFamily("rcll_queue_depth",
                                      "Messages waiting in a broker queue (sampled on scrape).",
                                      labels=["queue"])
            for q, n in depths.items():
                depth.add_metric([q], n)
            yield depth
        try:
            states = jobs_by_state(self.pool(), self.timeout_s)
        except Exception as exc:
            log.warning("metrics: jobs by state unavailable: %s: %s", type(exc).__name__, exc)
            up.add_metric(["database"], 0)
        else:
            up.add_metric(["database"], 1)
            jobs = GaugeMetricFamily("rcll_jobs", "Jobs by state (PostgreSQL, on scrape).",
                                     labels=["state"])
            for state, n in states.items():
                jobs.add_metric([state], n)
            yield jobs
        yield up
