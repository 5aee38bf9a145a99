"""The read path never writes: no write SQL in rcll/search, and recall works SELECT-only."""

import re
from pathlib import Path

import psycopg
import pytest

from rcll.bootstrap import bootstrap
from rcll.dev.postgres import READER_ROLE
from rcll.search.models import RecallQuery
from rcll.search.recall import recall

SEARCH = Path(__file__).resolve().parents[2] / "rcll" / "search"
WRITE_SQL = re.compile(r"\b(insert\s+into|update\s+\w+\s+set|delete\s+from|truncate|"
                       r"create\s+table|drop\s+table|alter\s+table)\b", re.I)


def test_search_package_has_no_write_statements():
    files = list(SEARCH.glob("*.py"))
    assert len(files) >= 5
    found = [f"{f.name}: {m.group(0)}" for f in files for m in WRITE_SQL.finditer(f.read_text())]
    assert found == []


def test_recall_under_select_only_role(client, settings, worker):
    client.post("/v1/default/banks/ro-bank/memories", json={"items": [
        {"content": "Dana: the nightly backup runs at 02:00 UTC.", "document_id": "b"},
        {"content": "Eli: I adopted a cat named Miso.", "document_id": "c"}], "async": False})
    reader_url = f"postgresql://{READER_ROLE}@127.0.0.1:{settings.pg_port}/rcll_test"
    with psycopg.connect(reader_url) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('x', 'x')")
    ro = bootstrap(settings.model_copy(update={"readonly_database_url": reader_url}))
    try:
        assert ro.read_pool is not ro.pool
        res = recall(ro.recall_context(), "ro-bank", RecallQuery(query="when does the backup run?"))
        assert res.results[0]["document_id"] == "b"
        assert res.dense_available
    finally:
        ro.close()
