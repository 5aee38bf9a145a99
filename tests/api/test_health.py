def test_healthz_and_readyz(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    body = ready.get_json()
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["embedder"]["loaded"] is True and body["mode"] == "C"
