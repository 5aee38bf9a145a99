"""The chunk stage stores each item of a job in a transaction of its own
(rcll.retain.pipeline.run_chunk): an item whose transaction fails fails alone: the items
before and after it are stored once each, and the job says which item failed."""

from rcll.store import units


def _items(n):
    return [{"content": f"Group note {i}: the lighthouse keeper logged storm {i} at dawn.",
             "document_id": f"note-{i}"} for i in range(n)]


def _fail_on(monkeypatch, document_id):
    """Every version of ``document_id`` hits a real PostgreSQL error (division by zero) in
    its transaction, after its documents row was written: what a bad item looks like."""
    real = units.apply_version

    def apply_version(conn, bank_id, job_id, version, drafts):
        result = real(conn, bank_id, job_id, version, drafts)
        if version.external_id == document_id:
            conn.execute("SELECT 1 / 0")
        return result
    monkeypatch.setattr(units, "apply_version", apply_version)


def _live(services, bank):
    with services.pool.connection() as conn:
        return [r["document_id"] for r in conn.execute(
            """SELECT d.document_id FROM memory_units u JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s AND u.invalidated_reason IS NULL
               ORDER BY d.document_id""", (bank,)).fetchall()]


def test_one_bad_item_fails_alone(client, services, monkeypatch):
    n = 30
    bad = 7
    _fail_on(monkeypatch, f"note-{bad}")
    r = client.post("/v1/default/banks/items-bad/memories",
                    json={"items": _items(n), "async": False})
    assert r.status_code == 200, r.get_json()
    op = r.get_json()["operation"]
    assert op["state"] == "partial", op
    assert op["counts"]["items_failed"] == 1
    assert op["counts"]["errors"][0].startswith(f"item {bad}: DivisionByZero")
    assert op["counts"]["units_created"] == n - 1
    live = _live(services, "items-bad")
    assert live == sorted(f"note-{i}" for i in range(n) if i != bad)  # each once


def test_every_item_is_stored_once(client, services):
    n = 32
    r = client.post("/v1/default/banks/items-good/memories",
                    json={"items": _items(n), "async": False})
    assert r.status_code == 200, r.get_json()
    op = r.get_json()["operation"]
    assert op["state"] == "succeeded", op
    assert op["counts"]["items_done"] == n and op["counts"]["units_created"] == n
    assert _live(services, "items-good") == sorted(f"note-{i}" for i in range(n))
