"""Hindsight 1.1's graph views and ingest time series on RCLL — ``GET …/graph`` (units and
their links), ``GET …/entities/graph`` (entity co-occurrence) and ``GET
…/stats/memories-timeseries`` — through the real ``hindsight-client`` 1.1.0 over HTTP (each
answer parsed by the model it declares), checked against the rows in PostgreSQL; a member
who may not see a unit finds neither it nor an entity only it names; bad input is a 400."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.access.conftest import (  # noqa: F401  (fixtures)
    ADMIN,
    auth_app,
    auth_services,
    auth_settings,
    bearer,
    enqueued,
    make_member,
)
from tests.conftest import serving

pytest.importorskip("hindsight_client")
from hindsight_client import Hindsight  # noqa: E402
from hindsight_client.hindsight_client import _run_async  # noqa: E402

B = "/v1/default/banks/{}"
TEXTS = ["Marta Quill met Oren Vale at the Lisbon harbour office on Monday.",
         "Marta Quill and Oren Vale sailed the ketch Albatross to Porto.",
         "Oren Vale wrote a long letter to Ines Rook about the storm."]


@pytest.fixture(scope="module")
def hs(app):
    with serving(app, "hs-graph") as url:
        yield Hindsight(base_url=url, timeout=60)


@pytest.fixture(scope="module")
def bank(app):
    bank = f"graph-{uuid.uuid4().hex[:6]}"
    r = app.test_client().post(B.format(bank) + "/memories", json={
        "items": [{"content": t, "document_id": f"d{i}"} for i, t in enumerate(TEXTS)],
        "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()
    return bank


def _entity_ids(services, bank: str) -> dict[str, str]:
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT id::text AS id, name FROM entities WHERE bank_id = %s",
                            (bank,)).fetchall()
    return {r["name"]: r["id"] for r in rows}


def test_entity_graph_counts_units_that_mention_both(hs, bank, services):
    ids = _entity_ids(services, bank)
    assert {"Marta Quill", "Oren Vale", "Ines Rook"} <= set(ids), ids
    g = _run_async(hs.entities.get_entity_graph(bank, min_count=2))
    pair = sorted([ids["Marta Quill"], ids["Oren Vale"]])
    assert [(e.data.source, e.data.target, e.data.weight) for e in g.edges] == [(*pair, 2)]
    assert g.total_edges == 1
    assert {n.data.label: n.data.mention_count for n in g.nodes} == {"Marta Quill": 2,
                                                                     "Oren Vale": 3}
    every = _run_async(hs.entities.get_entity_graph(bank))
    weights = {(e.data.source, e.data.target): e.data.weight for e in every.edges}
    assert weights[tuple(sorted([ids["Oren Vale"], ids["Ines Rook"]]))] == 1
    assert every.total_edges == len(every.edges) >= 2
    assert every.total_entities == len(ids)
    one = _run_async(hs.entities.get_entity_graph(bank, limit=1))
    assert len(one.edges) == 1 and one.edges[0].data.weight == 2 and one.limit == 1


def test_memory_graph_is_the_units_and_the_links_among_them(hs, bank, services):
    g = _run_async(hs.memory.get_graph(bank))
    with services.pool.connection() as conn:
        units = {r["id"] for r in conn.execute(
            "SELECT id::text AS id FROM memory_units WHERE bank_id = %s AND forgotten_at IS NULL",
            (bank,))}
        links = {(r["f"], r["t"], r["type"]) for r in conn.execute(
            "SELECT from_unit::text AS f, to_unit::text AS t, type FROM memory_links "
            "WHERE bank_id = %s", (bank,))}
    assert {n.data.id for n in g.nodes} == units == {r.id for r in g.table_rows}
    assert g.total_units == len(units) == 3
    assert {(e.data.source, e.data.target, e.data.link_type) for e in g.edges} == links
    by_id = {r.id: r for r in g.table_rows}
    assert any("Marta Quill" in (r.entities or "") for r in by_id.values())
    assert all(r.fact_type == "world" for r in by_id.values())
    one = _run_async(hs.memory.get_graph(bank, limit=1, q="Albatross"))
    assert [n.data.text for n in one.nodes] == [TEXTS[1]] and one.total_units == 1
    assert one.edges == []


def test_timeseries_counts_todays_units(hs, bank):
    ts = _run_async(hs.banks.get_memories_timeseries(bank, period="1d"))
    assert ts.trunc == "hour" and ts.time_field == "created_at"
    assert 24 <= len(ts.buckets) <= 25
    assert sum(b.world for b in ts.buckets) == 3
    assert sum(b.experience + b.observation for b in ts.buckets) == 0
    assert ts.buckets[-1].world == 3 or sum(b.world for b in ts.buckets[-2:]) == 3
    week = _run_async(hs.banks.get_memories_timeseries(bank, period="7d", time_field="bogus"))
    assert week.trunc == "day" and week.time_field == "created_at"
    assert sum(b.world for b in week.buckets) == 3


@pytest.mark.parametrize("path", [
    "/stats/memories-timeseries?period=2d", "/graph?limit=-1", "/graph?limit=5000",
    "/graph?chunk_id=nope", "/graph?tags_match=some", "/entities/graph?min_count=0",
    "/entities/graph?tag_groups=" + json.dumps([{"tags": ["a"]}]),
    "/entities/graph?tags_match=some"])
def test_bad_input_is_400(client, bank, path):
    r = client.get(B.format(bank) + path)
    assert r.status_code == 400, r.get_json()
    assert r.get_json()["error"]["code"] in ("invalid_request", "invalid_paging",
                                             "unsupported_hindsight_value")


def test_unknown_bank_is_404(client):
    for path in ("/graph", "/entities/graph", "/stats/memories-timeseries"):
        r = client.get(B.format("graph-nobody") + path)
        assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found", path


def test_a_member_who_may_not_see_a_unit_finds_it_on_no_graph(auth_app):  # noqa: F811
    api = auth_app.test_client()
    bank = f"graph-vis-{uuid.uuid4().hex[:6]}"
    a, b = f"al{uuid.uuid4().hex[:6]}", f"bo{uuid.uuid4().hex[:6]}"
    ka = make_member(api, a, bank, "write")
    kb = make_member(api, b, bank, "read")
    units = {}
    for key, text, aud in (("pub", "Quentin Marsh met Oren Vale at the tea shop.", None),
                           ("priv", "Quentin Marsh told Ottilie Brandvold the vault code.", a)):
        body = {"text": text} | ({"audience": aud} if aud else {})
        r = api.post(f"/banks/{bank}/units", json=body, headers=bearer(ka))
        assert r.status_code == 201, r.get_json()
        units[key] = r.get_json()["id"]
    for path in ("/graph", "/entities/graph", "/stats/memories-timeseries?period=1h"):
        mine = api.get(B.format(bank) + path, headers=bearer(ka))
        theirs = api.get(B.format(bank) + path, headers=bearer(kb))
        assert mine.status_code == theirs.status_code == 200, (path, theirs.get_json())
        text = json.dumps(theirs.get_json())
        assert "Ottilie" not in text and units["priv"] not in text and "vault" not in text, path
        if path == "/graph":
            assert theirs.get_json()["total_units"] == 1 and mine.get_json()["total_units"] == 2
        elif path == "/entities/graph":
            assert "Ottilie Brandvold" in json.dumps(mine.get_json())
            assert theirs.get_json()["total_entities"] < mine.get_json()["total_entities"]
        else:
            count = lambda r: sum(x["world"] for x in r.get_json()["buckets"])  # noqa: E731
            assert (count(mine), count(theirs)) == (2, 1)
