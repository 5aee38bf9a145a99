"""Embedder down → recall answers lexically and says so; the retain job says so too."""

from api.app import create_app
from rcll.bootstrap import bootstrap


def test_recall_and_retain_without_embedder(settings):
    svc = bootstrap(settings.model_copy(update={"embedder_enabled": False}))
    app = create_app(services=svc, enqueue=lambda *_: None)
    c = app.test_client()
    try:
        body = c.post("/v1/default/banks/no-emb/memories", json={"items": [
            {"content": "Fay: the invoice for March was paid late.", "document_id": "i"}],
            "async": False}).get_json()
        assert body["state"] == "partial"
        assert "embedder unavailable" in body["operation"]["error"]
        out = c.post("/v1/default/banks/no-emb/memories/recall",
                     json={"query": "march invoice"}).get_json()
        assert out["dense_available"] is False
        assert out["mode"] == "A"
        assert out["degraded"] and "embedder unavailable" in out["degraded"][0]
        assert [r["document_id"] for r in out["results"]] == ["i"]
        # no time named, no entity of the bank named: only the lexical channel found it
        assert out["results"][0]["ranks"] == {"lexical": 1, "graph": None, "temporal": None}
        ready = c.get("/readyz").get_json()
        assert ready["checks"]["embedder"]["ok"] is False and ready["mode"] == "A"
    finally:
        svc.close()


def test_dense_only_recall_with_embedder_down_answers_lexically(settings):
    """Fault 10: `channels: dense` with the embedder down returned nothing with mode A."""
    svc = bootstrap(settings.model_copy(update={"embedder_enabled": False}))
    c = create_app(services=svc, enqueue=lambda *_: None).test_client()
    try:
        c.post("/v1/default/banks/no-emb-dense/memories", json={"items": [
            {"content": "Gus: the staging database password rotates every 30 days.",
             "document_id": "pw"},
            {"content": "Hal: lunch is at noon on Fridays.", "document_id": "lunch"}],
            "async": False})
        out = c.post("/v1/default/banks/no-emb-dense/memories/recall",
                     json={"query": "when does the database password rotate", "channels": "dense",
                           "trace": True}).get_json()
        assert [r["document_id"] for r in out["results"]] == ["pw"]
        assert out["mode"] == "A" and out["channels"] == ["lexical"]
        assert out["dense_available"] is False
        assert any("embedder unavailable" in d for d in out["degraded"])
        assert any("fallback" in d for d in out["degraded"])
        assert out["counts"]["lexical"] == 1 and "dense" not in out["counts"]
    finally:
        svc.close()
