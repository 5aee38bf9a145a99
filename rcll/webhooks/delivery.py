"""Deliver webhook events from the outbox: the dispatcher (:func:`dispatch_due`, beat, queue
``maintenance``) claims the due deliveries and sends one task per claim; the task
(:func:`deliver`) makes one attempt and records it. The outbox and its states:
:mod:`rcll.store.webhooks`.

One attempt: ``POST`` the stored body (the same bytes every attempt) to the webhook's
current URL with its ``http_config`` headers and query parameters, and

- ``Content-Type: application/json``;
- ``X-Hindsight-Event``: the event type;
- ``X-Hindsight-Signature: sha256=<hex>``: HMAC-SHA256 of the body with the webhook's
  secret (Hindsight's header; a receiver recomputes it over the raw body and compares in
  constant time);
- ``X-RCLL-Delivery`` (the delivery id) and ``X-RCLL-Attempt`` (1, 2, …).

A 2xx answer completes the delivery. Anything else — another status (redirects are not
followed), a refused connection, a timeout (each phase — connect, write, read — waits at most
the webhook's ``timeout_seconds``, itself at most ``RCLL_WEBHOOK_TIMEOUT_S``), or, unless
``RCLL_WEBHOOK_ALLOW_PRIVATE_NETWORKS``, a host that resolves to a non-global address — is
a failed attempt: retried after the next delay of ``RCLL_WEBHOOK_RETRY_DELAYS_S``, and the
delivery is ``failed`` once they are spent. The first 1,024 bytes of the answer are kept.
Delivery is at least once: an attempt whose result could not be recorded (the database went
away) is made again after its lease, so receivers deduplicate on ``event_id``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from psycopg_pool import ConnectionPool

from rcll.store import webhooks as store

log = logging.getLogger(__name__)
if logging.getLogger("httpx").level == logging.NOTSET:  # not one INFO line per attempt
    logging.getLogger("httpx").setLevel(logging.WARNING)
MAX_RESPONSE_BYTES = 1024
MAX_ERROR_CHARS = 1000
_client: httpx.Client | None = None
_client_lock = threading.Lock()


def shared_client() -> httpx.Client:
    """This process's HTTP client (made on first use, so each worker process has its own):
    one TLS context and a pool of kept-alive connections for every attempt (a new client
    per attempt builds a TLS context each time: benchmarks/results/webhooks_aliases.txt)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(follow_redirects=False)
        return _client


def sign(secret: str, body: bytes) -> str:
    """The ``X-Hindsight-Signature`` value of ``body``: ``sha256=`` and the hex HMAC-SHA256
    with ``secret`` (UTF-8) as the key."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class DeliveryPolicy:
    """``retry_delays_s``: seconds before each retry; ``timeout_s``: the most one phase of
    an attempt waits; ``allow_private``: deliver to non-global addresses;
    ``retention_days``: how long ended deliveries stay in the log."""

    retry_delays_s: tuple[float, ...] = (5, 60, 300, 1800, 7200)
    timeout_s: float = 10.0
    allow_private: bool = False
    retention_days: float = 30.0

    @classmethod
    def from_settings(cls, s) -> DeliveryPolicy:
        return cls(retry_delays_s=s.webhook_retry_delays, timeout_s=s.webhook_timeout_s,
                   allow_private=s.webhook_allow_private_networks,
                   retention_days=s.webhook_log_retention_days)

    @property
    def lease_s(self) -> float:
        """How long a claim keeps a delivery from being claimed again: longer than an
        attempt can take (resolution, then connect, write and read, each bounded)."""
        return 4 * self.timeout_s + 30

    def after_failure(self, attempt: int) -> tuple[str, float | None]:
        """``(status, retry in seconds)`` after failed attempt number ``attempt``."""
        if attempt <= len(self.retry_delays_s):
            return "pending", self.retry_delays_s[attempt - 1]
        return "failed", None


@dataclass(frozen=True)
class Outcome:
    """What one attempt gave: the HTTP status (``None``: no answer), the error (``None``:
    a 2xx), the seconds it took and the start of the answer's body."""

    status_code: int | None
    error: str | None
    duration_ms: float
    response_body: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def dispatch_due(pool: ConnectionPool, send: Callable[[str, str], None],
                 policy: DeliveryPolicy, limit: int = 200) -> int:
    """Claim the due deliveries (:func:`rcll.store.webhooks.claim_due`), commit, then
    ``send(delivery_id, claim)`` each; a send that fails is logged and claimed again
    once its lease is over. Each run also deletes up to 1,000 ended deliveries older than
    ``policy.retention_days`` (:func:`rcll.store.webhooks.prune`). Returns how many were
    claimed."""
    with pool.connection() as conn, conn.transaction():
        claims = store.claim_due(conn, policy.lease_s, limit)
    with pool.connection() as conn, conn.transaction():
        store.prune(conn, policy.retention_days)
    for c in claims:
        try:
            send(c["id"], c["claim"])
        except Exception as exc:  # the lease brings it back
            log.warning("webhook delivery %s not sent to the queue: %s", c["id"], exc)
    return len(claims)


def _clean(text: str, limit: int) -> str:
    """``text`` storable in PostgreSQL (no NUL) and at most ``limit`` characters."""
    return text.replace("\x00", "\ufffd")[:limit]


def _non_global(host: str, port: int) -> str | None:
    """The first non-global address ``host`` resolves to, or ``None``; raises
    ``OSError`` when it does not resolve."""
    for info in socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM):
        addr = ipaddress.ip_address(info[4][0].split("%", 1)[0])
        if not addr.is_global:
            return str(addr)
    return None


def attempt(delivery: dict, policy: DeliveryPolicy, number: int,
            client: httpx.Client | None = None) -> Outcome:
    """Make attempt ``number`` of ``delivery`` (a row of
    :func:`rcll.store.webhooks.take`); never raises."""
    body = delivery["body"].encode("utf-8")
    http = delivery.get("http_config") or {}
    timeout = min(policy.timeout_s, float(http.get("timeout_seconds") or policy.timeout_s))
    url = delivery["url"]
    headers = {**(http.get("headers") or {}),
               "Content-Type": "application/json", "User-Agent": "rcll-webhooks",
               "X-Hindsight-Event": delivery["event_type"],
               "X-Hindsight-Signature": sign(delivery["secret"], body),
               "X-RCLL-Delivery": str(delivery["id"]), "X-RCLL-Attempt": str(number)}
    started = time.monotonic()

    def took() -> float:
        return (time.monotonic() - started) * 1000

    if not policy.allow_private:
        parts = urlsplit(url)
        try:
            blocked = _non_global(parts.hostname or "",
                                  parts.port or (443 if parts.scheme == "https" else 80))
        except (OSError, ValueError) as exc:
            return Outcome(None, _clean(f"cannot resolve the host: {exc}", MAX_ERROR_CHARS),
                           took())
        if blocked is not None:
            return Outcome(None, f"refused: the host resolves to {blocked}, not a global "
                           "address (RCLL_WEBHOOK_ALLOW_PRIVATE_NETWORKS is off)", took())
    client = client or shared_client()
    try:
        with client.stream("POST", url, content=body, headers=headers,
                           params=http.get("params") or None,
                           timeout=httpx.Timeout(timeout)) as resp:
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= MAX_RESPONSE_BYTES:
                    break
            text = _clean(b"".join(chunks)[:MAX_RESPONSE_BYTES].decode("utf-8", "replace"),
                          MAX_RESPONSE_BYTES)
            code = resp.status_code
    except httpx.TimeoutException as exc:
        return Outcome(None, f"timed out after {timeout:g} s ({type(exc).__name__})", took())
    except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
        return Outcome(None, _clean(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS), took())
    error = None if 200 <= code < 300 else f"HTTP {code}"
    return Outcome(code, error, took(), text or None)


def deliver(pool: ConnectionPool, policy: DeliveryPolicy, delivery_id: str, claim: str,
            client: httpx.Client | None = None) -> dict | None:
    """One attempt of the delivery ``delivery_id`` under ``claim``
    (:func:`rcll.store.webhooks.take`; ``None``, and nothing sent, when the claim is not
    the delivery's any more), recorded with its outcome and what comes next: ``{"id",
    "attempt", "status", "status_code", "error", "retry_in_s"}``. A webhook disabled since
    the event fails the delivery without sending it."""
    with pool.connection() as conn, conn.transaction():
        d = store.take(conn, delivery_id, claim)
    if d is None:
        return None
    number = d["attempts"]
    if not d["enabled"]:
        outcome = Outcome(None, "the webhook was disabled before this delivery", 0.0)
        status, retry = "failed", None
    else:
        outcome = attempt(d, policy, number, client)
        status, retry = ("completed", None) if outcome.ok else policy.after_failure(number)
    with pool.connection() as conn, conn.transaction():
        store.record_attempt(conn, d["id"], number, d["url"], outcome.status_code,
                             outcome.error, outcome.duration_ms, outcome.response_body,
                             status, retry)
    if not outcome.ok:
        log.info("webhook delivery %s attempt %d failed (%s); %s", d["id"], number,
                 outcome.error, f"retry in {retry:g} s" if retry is not None else status)
    return {"id": d["id"], "attempt": number, "status": status,
            "status_code": outcome.status_code, "error": outcome.error, "retry_in_s": retry}
