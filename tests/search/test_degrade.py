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
        assert body["status"] == "partial"
        assert "embedder unavailable" in body["operation"]["error"]
        out = c.post("/v1/default/banks/no-emb/memories/recall",
                     json={"query": "march invoice"}).get_json()
        assert out["dense_available"] is False
        assert out["mode"] == "A"
        assert out["degraded"] and "embedder unavailable" in out["degraded"][0]
        assert [r["document_id"] for r in out["results"]] == ["i"]
        assert out["results"][0]["ranks"] == {"lexical": 1}
        ready = c.get("/readyz").get_json()
        assert ready["checks"]["embedder"]["ok"] is False and ready["mode"] == "A"
    finally:
        svc.close()
