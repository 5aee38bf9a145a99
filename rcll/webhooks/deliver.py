"""One webhook HTTP attempt, signed.

Signature (HMAC-SHA256, hex): ``X-Hindsight-Signature: sha256=<hex>`` where the digest is
``HMAC(secret, f"{timestamp}.{raw body}")`` and ``timestamp`` (Unix seconds) is sent as
``X-Hindsight-Timestamp`` — the scheme of Stripe's and Slack's webhooks: a receiver recomputes
it over the raw body and refuses an old timestamp (a replay). ``X-Hindsight-Event`` names the
event, ``X-Hindsight-Delivery`` the delivery id (stable across retries: a receiver drops a
duplicate by it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass

import httpx

BODY_KEEP = 2000  # characters of the receiver's answer kept in the delivery log


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


@dataclass
class Attempt:
    ok: bool
    status: int | None
    body: str | None
    error: str | None


def send(url: str, secret: str, payload: dict, *, event_type: str, delivery_id: str,
         http_config: dict | None = None) -> Attempt:
    """POST (or GET, ``http_config.method``) ``payload`` as JSON to ``url``; ``ok`` on a
    2xx answer. Never raises: a network error is ``Attempt(ok=False, status=None, …)``."""
    cfg = http_config or {}
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    ts = str(int(time.time()))
    headers = {**(cfg.get("headers") or {}), "Content-Type": "application/json",
               "User-Agent": "rcll-webhooks", "X-Hindsight-Event": event_type,
               "X-Hindsight-Delivery": delivery_id, "X-Hindsight-Timestamp": ts,
               "X-Hindsight-Signature": sign(secret, ts, body)}
    method = (cfg.get("method") or "POST").upper()
    try:
        with httpx.Client(timeout=float(cfg.get("timeout_seconds") or 30),
                          follow_redirects=False) as http:
            r = http.request(method, url, params=cfg.get("params") or None, headers=headers,
                             content=body if method == "POST" else None)
    except httpx.HTTPError as exc:
        return Attempt(False, None, None, f"{type(exc).__name__}: {exc}"[:1000])
    ok = 200 <= r.status_code < 300
    return Attempt(ok, r.status_code, r.text[:BODY_KEEP],
                   None if ok else f"HTTP {r.status_code}")
