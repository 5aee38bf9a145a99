"""Vectors are a derived index: lose them and the rebuild restores them (spec §1.3)."""

from rcll.retain.pipeline import embed_missing
from tests.conftest import db_counts


def test_lost_vectors_cost_recall_not_correctness(client, services):
    bank = "rebuild-bank"
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": "Gus: my sister lives in Lisbon near the river.", "document_id": "g1"},
        {"content": "Hana: the quarterly tax filing is due in April.", "document_id": "h1"},
    ], "async": False})
    assert db_counts(services, bank)["embeddings"] == 2
    with services.pool.connection() as conn:
        conn.execute("DELETE FROM memory_embeddings WHERE bank_id = %s", (bank,))
    out = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "where does my sibling live?"}).get_json()
    assert out["counts"]["dense"] == 0  # recall still answers, from what is left
    progress = []
    assert embed_missing(services.retain_context(), bank_id=bank, on_batch=progress.append) == 2
    assert progress == [2]
    assert db_counts(services, bank)["embeddings"] == 2
    out = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "where does my sibling live?"}).get_json()
    assert out["results"][0]["document_id"] == "g1" and out["results"][0]["ranks"]["dense"] == 1
    assert embed_missing(services.retain_context(), bank_id=bank) == 0
