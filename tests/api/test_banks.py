"""Banks: listed with unit counts, deleted with everything they hold."""

from tests.conftest import db_counts


def test_delete_bank_removes_everything(client, services):
    bank = "del-bank"
    client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": "Kim: the office moves to Berlin in May.", "document_id": "k"}],
        "async": False})
    listed = {b["bank_id"]: b["units"] for b in client.get("/v1/default/banks").get_json()["banks"]}
    assert listed[bank] == 1
    assert client.delete(f"/v1/default/banks/{bank}").status_code == 200
    assert db_counts(services, bank) == {"units": 0, "embeddings": 0, "documents": 0, "jobs": 0}
    # a bank that is gone is deleted already (Hindsight's answer; crewai and agno reset so)
    r = client.delete(f"/v1/default/banks/{bank}")
    assert r.status_code == 200 and r.get_json()["existed"] is False


def test_every_foreign_key_column_is_indexed(services):
    """A cascade delete checks each referencing column; unindexed it scans the table per row."""
    with services.pool.connection() as conn:
        unindexed = conn.execute(
            """SELECT c.conrelid::regclass::text AS tbl, a.attname AS col
               FROM pg_constraint c
               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
               WHERE c.contype = 'f' AND NOT EXISTS (
                   SELECT 1 FROM pg_index i
                   WHERE i.indrelid = c.conrelid AND i.indkey[0] = c.conkey[1])""").fetchall()
    assert unindexed == []
