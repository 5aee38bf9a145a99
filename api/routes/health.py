"""Liveness and readiness: readiness reports each part (database, broker, embedder)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api.deps import services

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz():
    svc = services()
    checks: dict = {}
    try:
        with svc.pool.connection(timeout=3) as conn:
            conn.execute("SELECT 1")
        checks["database"] = {"ok": True}
    except Exception as exc:
        checks["database"] = {"ok": False, "error": str(exc)}
    emb = svc.embedder
    emb.get()
    checks["embedder"] = {"ok": emb.status()["loaded"], **emb.status()}
    checks["tokenizer"] = {"ok": svc.tokens.exact, "exact": svc.tokens.exact}
    ready = checks["database"]["ok"]
    return jsonify({"ready": ready, "checks": checks,
                    "mode": "B" if checks["embedder"]["ok"] else "A"}), (200 if ready else 503)
