"""Fault 9: every list route pages (limit, offset, total), validates its paging parameters and
orders stably (ties broken by id), so walking the pages yields every item exactly once."""

import pytest

from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from rcll.store import banks


def _walk(client, url: str, key: str, limit: int) -> tuple[list[str], int]:
    seen, offset, total = [], 0, None
    sep = "&" if "?" in url else "?"
    while True:
        r = client.get(f"{url}{sep}limit={limit}&offset={offset}")
        assert r.status_code == 200, r.get_json()
        body = r.get_json()
        assert body["limit"] == limit and body["offset"] == offset
        total = body["total"] if total is None else total
        assert body["total"] == total
        page = body[key]
        assert len(page) <= limit
        if not page:
            return seen, total
        seen += [row.get("id") or row.get("bank_id") for row in page]
        offset += limit


@pytest.fixture(scope="module")
def paged_jobs(services):
    """13 jobs created in one transaction: equal created_at, so only the id breaks ties."""
    with services.pool.connection() as conn, conn.transaction():
        ids = [str(submit_retain(conn, "paging-bank", [RetainItem(content=f"note {i}")],
                                 f"page-{i}")[0]["id"]) for i in range(13)]
    return ids


def test_operations_paging_walks_every_job_once(client, paged_jobs):
    for limit in (1, 5, 13, 50):
        seen, total = _walk(client, "/v1/default/banks/paging-bank/operations", "operations", limit)
        assert total == 13
        assert len(seen) == len(set(seen)) == 13
        assert set(seen) == set(paged_jobs)
    first = client.get("/v1/default/banks/paging-bank/operations?limit=5").get_json()
    second = client.get("/v1/default/banks/paging-bank/operations?limit=5&offset=5").get_json()
    assert not {o["id"] for o in first["operations"]} & {o["id"] for o in second["operations"]}


def test_jobs_paging_walks_every_job_once(client, paged_jobs):
    seen, total = _walk(client, "/jobs?bank_id=paging-bank", "jobs", 4)
    assert total == 13 and len(seen) == len(set(seen)) == 13 and set(seen) == set(paged_jobs)
    seen_all, total_all = _walk(client, "/jobs", "jobs", 7)
    assert len(seen_all) == len(set(seen_all)) == total_all >= 13


def test_banks_paging_walks_every_bank_once(client, services):
    with services.pool.connection() as conn, conn.transaction():
        mine = [f"paging-b{i:02d}" for i in range(9)]
        for b in mine:
            banks.ensure(conn, b)
    seen, total = _walk(client, "/v1/default/banks", "banks", 4)
    assert len(seen) == len(set(seen)) == total
    assert set(mine) <= set(seen)


@pytest.mark.parametrize("url", ["/v1/default/banks", "/jobs",
                                 "/v1/default/banks/paging-bank/operations"])
@pytest.mark.parametrize("query", ["limit=abc", "limit=0", "limit=1001", "limit=-1",
                                   "offset=-1", "offset=x", "limit=2.5", "offset=1e3"])
def test_bad_paging_is_400(client, paged_jobs, url, query):
    r = client.get(f"{url}?{query}")
    assert r.status_code == 400, r.get_json()
    err = r.get_json()["error"]
    assert err["code"] == "invalid_paging" and err["details"]["field"] in ("limit", "offset")
