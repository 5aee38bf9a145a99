"""Liveness and readiness. Readiness reports each part (database, broker, embedder,
tokenizer, LLM, reranker) with bounded timeouts; 503 when the database or the broker is down
(the embedder, tokenizer and reranker degrade recall and token counts, they do not stop the
service)."""

from __future__ import annotations

import logging
import time

from flask import Blueprint, jsonify

import rcll
from api import contracts as C
from api.auth import requires
from api.deps import services
from api.openapi import doc

bp = Blueprint("health", __name__)
log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 2
_STARTED = time.monotonic()


@bp.get("/healthz")
@requires("public")
@doc({200: C.Status})
def healthz():
    """Liveness: ``{"status": "ok"}`` while the process serves."""
    return jsonify({"status": "ok"})


@bp.get("/health/live")
@requires("public")
@doc({200: C.Liveness})
def health_live():
    """Hindsight's liveness probe: ``{"status": "alive", "version", "uptime_seconds"}``
    while the process serves (nothing else is checked)."""
    return jsonify({"status": "alive", "version": rcll.__version__,
                    "uptime_seconds": round(time.monotonic() - _STARTED, 3)})


def _database_ok(svc) -> bool:
    try:
        with svc.pool.connection(timeout=CHECK_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
        return True
    except Exception as exc:
        log.warning("readyz: database unreachable: %s", exc)
        return False


def _broker_ok(url: str) -> bool:
    """Ping the broker: Redis with ``PING``, anything else through a kombu connection."""
    try:
        if url.startswith(("redis://", "rediss://", "unix://")):
            import redis

            client = redis.Redis.from_url(url, socket_timeout=CHECK_TIMEOUT_S,
                                          socket_connect_timeout=CHECK_TIMEOUT_S)
            try:
                return bool(client.ping())
            finally:
                client.close()
        from kombu import Connection

        with Connection(url, connect_timeout=CHECK_TIMEOUT_S) as conn:
            conn.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT_S)
        return True
    except Exception as exc:
        log.warning("readyz: broker unreachable: %s", exc)
        return False


def _hot_tier_status(svc) -> dict:
    cascade = svc.cascade
    try:
        ok = bool(svc.redis.ping())
    except Exception as exc:  # redis.RedisError and its kin
        log.warning("readyz: tier 1 Redis: %s", exc)
        ok = False
    out = {"ok": ok, "activation": svc.settings.activation,
           "breaker": cascade.redis_breaker.open_reason()}
    if not ok:
        out["error"] = "unreachable"
    return out


@bp.get("/readyz")
@bp.get("/health/ready", endpoint="health_ready")  # Hindsight's readiness probe
@requires("public")
@doc({200: C.Readiness, 503: C.Readiness})
def readyz():
    """``{"ready", "checks": {database, broker, embedder, tokenizer, llm, reranker, hot_tier},
    "mode"}``;
    200 when the database and the broker answer, else 503 with ``Retry-After``. Errors are
    logged, not returned. ``checks.reranker`` is ``{ok, configured, loaded, usable, model,
    runtime, reason}`` (``runtime``: torch | onnx once loaded; ``ok``: usable or not
    configured); it never makes the service unready, nor does ``checks.hot_tier``
    ``{ok, activation, breaker}`` (tier 1's Redis; ``breaker``: why recall skips tier 1
    right now, else null)."""
    svc = services()
    checks: dict = {"database": {"ok": _database_ok(svc)},
                    "broker": {"ok": _broker_ok(svc.settings.broker)}}
    for name in ("database", "broker"):
        if not checks[name]["ok"]:
            checks[name]["error"] = "unreachable"
    emb = svc.embedder
    emb.get()
    status = emb.status()
    checks["embedder"] = {"ok": status["loaded"], "loaded": status["loaded"],
                          "model": status.get("model")}
    if not status["loaded"]:
        log.warning("readyz: embedder not loaded: %s", status.get("error"))
        checks["embedder"]["error"] = "not loaded"
    checks["tokenizer"] = {"ok": svc.tokens.exact, "exact": svc.tokens.exact}
    checks["llm"] = svc.llm_health()  # cached probe; an LLM outage degrades, never unready
    # the reranker never makes the service unready: without it recall keeps the fused order
    rr = svc.reranker
    rr.load()
    checks["reranker"] = {"ok": rr.status()["usable"] or not rr.configured, **rr.status()}
    # tier 1 (Redis) never makes the service unready: without it tiers 2–3 answer
    checks["hot_tier"] = _hot_tier_status(svc)
    ready = checks["database"]["ok"] and checks["broker"]["ok"]
    resp = jsonify({"ready": ready, "checks": checks,
                    "mode": "C" if checks["embedder"]["ok"] else "A"})
    resp.status_code = 200 if ready else 503
    if not ready:
        resp.headers["Retry-After"] = "5"
    return resp
