"""Bank export and import (issue 25 item 3) through the API, a real worker, PostgreSQL and
Redis: a round trip into another bank gives the same recall results; a bad line is a 400
naming it; a non-empty bank is refused; an export by a member holds only what it may see,
and grants only for a bank admin; Hindsight's transfer routes and download."""

from __future__ import annotations

import gzip
import io
import json
import uuid

import pytest

from rcll.access.principal import Grant, Principal
from rcll.errors import Forbidden
from rcll.transfer import format as fmt
from tests.conftest import wait_job

QUERIES = ["charity race for mental health", "support group", "deploy the website",
           "Kestrel rotation of the keys", "what did Melanie paint"]


SENTENCES = [
    "Melanie: I ran a charity race for mental health last Saturday.",
    "Caroline: I went to the LGBTQ support group yesterday and it was powerful.",
    "Melanie: Never deploy the website on a Friday, the pipeline breaks.",
    "Ops: Kestrel rotates the signing keys every ninety days.",
    "Melanie: I painted a sunrise over the lake with my kids.",
    "Caroline: Counseling for trans youth is the career I want.",
    "Jon: The bakery on Elm street closes at six on weekdays.",
    "Gina: My dance studio opened its second room in March.",
    "Ops: The Postgres replica in Frankfurt lags by two seconds at peak.",
    "Nate: I adopted a grey tabby cat called Pixel.",
    "Joanna: I finished writing the screenplay about the lighthouse keeper.",
    "Ops: Backups of the billing database run nightly at 02:00 UTC.",
    "Melanie: We camped at the beach and roasted marshmallows.",
    "Caroline: I am reading Becoming Nicole, a book about a trans girl.",
    "Jon: Losing my banking job pushed me to open the dance studio.",
    "Nate: My tournament team won the regional video game final.",
    "Audrey: My dogs love the new agility course in the park.",
    "Andrew: We hiked to the waterfall with my girlfriend on Sunday.",
    "Ops: The search cluster upgrade is scheduled for the third of June.",
    "Evan: I broke my ankle skiing and the cast comes off in May.",
    "Sam: My doctor asked me to cut sugar after the checkup.",
    "John: I volunteer at the homeless shelter on Tuesdays.",
    "Maria: I took my first pottery class and made a blue bowl.",
    "Tim: I am learning the violin to join the town orchestra.",
]


def _items(n: int = 24) -> list[dict]:
    return [{"content": SENTENCES[i], "timestamp": f"2023-05-{1 + i:02d}T13:00:00",
             "document_id": f"conv/D{i // 6}:{i}", "metadata": {"dia_id": f"D{i}"},
             "tags": ["locomo"] if i % 2 else []} for i in range(n)]


def _uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _seed(client, bank: str, items: list[dict]) -> None:
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items})
    assert r.status_code == 200, r.get_json()
    op = wait_job(client, bank, r.get_json()["operation_id"])
    assert op["state"] == "succeeded", op


def _top(client, bank: str, q: str) -> list[tuple]:
    r = client.post(f"/v1/default/banks/{bank}/memories/recall",
                    json={"query": q, "limit": 10, "tiers": ["cold"]})
    assert r.status_code == 200, r.get_json()
    return [(x["text"], x["document_id"], json.dumps(x["metadata"], sort_keys=True))
            for x in r.get_json()["results"]][:10]


def _export(client, bank: str, **args) -> bytes:
    qs = "&".join(f"{k}={str(v).lower()}" for k, v in args.items())
    r = client.get(f"/banks/{bank}/export?{qs}")
    assert r.status_code == 200, r.get_data(as_text=True)[:500]
    assert r.is_streamed
    return r.get_data()


def _import(client, bank: str, body: bytes, **args) -> dict:
    qs = "&".join(f"{k}={v}" for k, v in args.items())
    r = client.post(f"/banks/{bank}/import?{qs}", data=body,
                    content_type="application/x-ndjson")
    assert r.status_code == 202, r.get_json()
    op = wait_job(client, bank, r.get_json()["operation_id"])
    return op


def _counts(services, bank: str) -> dict:
    with services.pool.connection() as conn:
        return conn.execute(
            """SELECT (SELECT count(*) FROM memory_units WHERE bank_id = %(b)s) AS units,
                      (SELECT count(*) FROM memory_embeddings WHERE bank_id = %(b)s) AS vectors,
                      (SELECT count(*) FROM documents WHERE bank_id = %(b)s) AS documents,
                      (SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id
                        WHERE d.bank_id = %(b)s) AS chunks,
                      (SELECT count(*) FROM memory_links WHERE bank_id = %(b)s) AS links,
                      (SELECT count(*) FROM entities WHERE bank_id = %(b)s) AS entities,
                      (SELECT count(*) FROM unit_entities WHERE bank_id = %(b)s) AS mentions""",
            {"b": bank}).fetchone()


@pytest.fixture(scope="module")
def source(app, worker, services):
    bank = _uid("xfer-src")
    _seed(app.test_client(), bank, _items())
    return bank


def test_round_trip_into_another_bank_gives_the_same_recall(client, services, source):
    body = _export(client, source)
    lines = body.decode().splitlines()
    head = json.loads(lines[0])
    assert head["type"] == "header" and head["format"] == "rcll-bank" and head["version"] == 1
    assert head["bank"]["id"] == source and head["vectors"] is True
    assert head["embedding"]["model"] == services.embedder.model_name
    end = json.loads(lines[-1])
    before = _counts(services, source)
    assert end["type"] == "end" and end["counts"]["unit"] == before["units"] == 24
    assert end["counts"]["document"] == before["documents"]
    units = [json.loads(x) for x in lines if '"type":"unit"' in x]
    assert all(len(u["vector"]) == 384 for u in units)

    target = _uid("xfer-dst")
    op = _import(client, target, body)  # same deployment: ids=auto takes new ids
    assert op["state"] == "succeeded", op
    assert op["counts"]["vectors_imported"] == 24 and op["counts"]["units_to_embed"] == 0
    assert _counts(services, target) == before
    with services.pool.connection() as conn:
        shared = conn.execute("""SELECT count(*) AS n FROM memory_units a JOIN memory_units b
                                 ON a.id = b.id WHERE a.bank_id = %s AND b.bank_id = %s""",
                              (source, target)).fetchone()["n"]
    assert shared == 0
    for q in QUERIES:
        assert _top(client, target, q) == _top(client, source, q), q


def test_without_vectors_the_import_re_embeds(client, services, source):
    body = _export(client, source, vectors=False, gzip=True)
    assert body[:2] == b"\x1f\x8b"
    assert '"vector"' not in gzip.decompress(body).decode()
    target = _uid("xfer-emb")
    op = _import(client, target, body)
    assert op["state"] == "succeeded", op
    assert op["counts"]["vectors_imported"] == 0
    assert op["counts"]["units_to_embed"] == 24 and op["counts"]["units_embedded"] == 24
    assert _counts(services, target)["vectors"] == 24
    for q in QUERIES[:3]:
        assert _top(client, target, q) == _top(client, source, q), q


def test_a_bad_line_is_a_400_naming_it_and_nothing_is_stored(client, services, source):
    lines = _export(client, source).decode().splitlines()
    bad = list(lines)
    unit_at = next(i for i, x in enumerate(bad) if '"type":"unit"' in x)
    rec = json.loads(bad[unit_at])
    rec["layer"] = "high"
    bad[unit_at] = json.dumps(rec)
    target = _uid("xfer-bad")
    r = client.post(f"/banks/{target}/import", data="\n".join(bad) + "\n")
    assert r.status_code == 400
    err = r.get_json()["error"]
    assert err["code"] == "invalid_export" and err["details"]["line"] == unit_at + 1
    assert f"line {unit_at + 1}" in err["message"] and "layer" in err["message"]
    # a cut stream (no end record) and a foreign file
    r = client.post(f"/banks/{target}/import", data="\n".join(lines[:-3]) + "\n")
    assert r.status_code == 400 and r.get_json()["error"]["details"]["line"] == len(lines) - 2
    r = client.post(f"/banks/{target}/import", data=b'{"version": "1", "bank": {}}\n')
    assert r.status_code == 400 and r.get_json()["error"]["details"]["line"] == 1
    r = client.post(f"/banks/{target}/import", data=b"not json\n")
    assert r.status_code == 400 and "not valid JSON" in r.get_json()["error"]["message"]
    assert client.get(f"/v1/default/banks/{target}/profile").status_code == 404
    assert _counts(services, target)["units"] == 0


def test_a_bank_that_holds_memories_is_refused(client, source):
    body = _export(client, source)
    r = client.post(f"/banks/{source}/import", data=body)
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "bank_not_empty"


def test_a_reference_to_a_missing_unit_fails_the_job_and_leaves_the_bank_empty(
        client, services, source):
    lines = _export(client, source).decode().splitlines()
    link_at = next(i for i, x in enumerate(lines) if '"type":"link"' in x)
    rec = json.loads(lines[link_at])
    rec["to_unit"] = str(uuid.uuid4())
    lines[link_at] = json.dumps(rec)
    target = _uid("xfer-ref")
    op = _import(client, target, ("\n".join(lines) + "\n").encode())
    assert op["state"] == "failed"
    assert f"line {link_at + 1}" in op["error"] and rec["to_unit"] in op["error"]
    assert _counts(services, target)["units"] == 0
    # the empty bank takes the import once the export is right
    op = _import(client, target, _export(client, source))
    assert op["state"] == "succeeded", op
    assert _counts(services, target)["units"] == 24


def test_an_export_by_a_member_holds_only_what_it_may_see(client, services, worker):
    bank = _uid("xfer-vis")
    alice, dave = _uid("mv-alice"), _uid("mv-dave")
    with services.pool.connection() as conn:
        for m in (alice, dave):
            conn.execute("INSERT INTO members (id, name) VALUES (%s, %s)", (m, m))
    items = _items(6)
    items[0] = {**items[0], "audience": alice}
    items[1] = {**items[1], "purposes": ["audit"]}
    _seed(client, bank, items)
    from rcll.transfer.service import TransferService

    svc = TransferService(services, lambda *_: None)
    bob = Principal("mv-bob", {bank: Grant(bank, "read", ("assist",))})
    lines = [json.loads(x) for x in b"".join(svc.export(bob, bank)).decode().splitlines()]
    texts = {x["text"] for x in lines if x["type"] == "unit"}
    assert len(texts) == 4
    assert items[0]["content"] not in texts and items[1]["content"] not in texts
    assert lines[0]["scope"] == "member"
    hidden = {x["document_id"] for x in lines if x["type"] == "document"}
    assert items[0]["document_id"] not in hidden and items[1]["document_id"] not in hidden
    assert all(x["type"] != "grant" for x in lines)
    with pytest.raises(Forbidden):
        svc.export(bob, bank, grants=True)
    admin = Principal("mv-carol", {bank: Grant(bank, "admin", ("assist", "audit"))})
    with services.pool.connection() as conn:
        conn.execute("""INSERT INTO bank_grants (member_id, bank_id, role, purposes)
                        VALUES (%s, %s, 'read', ARRAY['assist'])""", (dave, bank))
    lines = [json.loads(x) for x in
             b"".join(svc.export(admin, bank, grants=True)).decode().splitlines()]
    assert [x["member_id"] for x in lines if x["type"] == "grant"] == [dave]
    assert len([x for x in lines if x["type"] == "unit"]) == 5  # alice's private one stays out


def test_hindsight_transfer_export_download_and_import(client, services, source):
    r = client.post(f"/v1/default/banks/{source}/transfer/export")
    assert r.status_code == 202, r.get_json()
    body = r.get_json()
    assert set(body) == {"operation_id", "status"} and body["status"] == "pending"
    op = wait_job(client, source, body["operation_id"])
    assert op["state"] == "succeeded", op
    meta = op["result_metadata"]
    assert meta["download_url"] == f"/v1/default/files/download/{meta['storage_key']}"
    got = client.get(meta["download_url"])
    assert got.status_code == 200 and len(got.get_data()) == meta["byte_size"]
    text = gzip.decompress(got.get_data()).decode()
    assert json.loads(text.splitlines()[-1])["counts"]["unit"] == 24
    assert client.get("/v1/default/files/download/nope.jsonl.gz").status_code == 404

    target = _uid("xfer-hs")
    r = client.post(f"/v1/default/banks/{source}/transfer/import?target_bank_id={target}",
                    data={"file": (io.BytesIO(got.get_data()), "bank.jsonl.gz")},
                    content_type="multipart/form-data")
    assert r.status_code == 202, r.get_json()
    op = wait_job(client, target, r.get_json()["operation_id"])
    assert op["state"] == "succeeded", op
    assert _top(client, target, QUERIES[0]) == _top(client, source, QUERIES[0])
    r = client.post(f"/v1/default/banks/{source}/transfer/import?mode=merge",
                    data={"file": (io.BytesIO(got.get_data()), "bank.jsonl.gz")},
                    content_type="multipart/form-data")
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unsupported_hindsight_value"


def test_the_hindsight_client_submits_an_export(app, services, source):
    """The real ``hindsight-client`` 1.1 call (``BankTransferApi.export_bank_transfer``)
    against the app served on a local port."""
    pytest.importorskip("hindsight_client_api")
    import asyncio
    import threading

    from werkzeug.serving import make_server

    import hindsight_client_api as hc
    from tests.conftest import free_port

    port = free_port()
    server = make_server("127.0.0.1", port, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        async def call():
            async with hc.ApiClient(hc.Configuration(host=f"http://127.0.0.1:{port}")) as api:
                return await hc.BankTransferApi(api).export_bank_transfer(source)
        out = asyncio.run(call())
    finally:
        server.shutdown()
    assert out.operation_id and out.status == "pending"


def test_format_reader_checks_order_and_counts():
    head = json.dumps({"type": "header", "format": "rcll-bank", "version": 1,
                       "bank": {"id": "b", "name": "b"}})
    link = json.dumps({"type": "link", "from_unit": str(uuid.uuid4()),
                       "to_unit": str(uuid.uuid4()), "link_type": "temporal",
                       "created_at": "2024-01-01T00:00:00Z"})
    doc = json.dumps({"type": "document", "id": str(uuid.uuid4()), "document_id": "d",
                      "content_hash": "h", "created_at": "2024-01-01T00:00:00Z",
                      "updated_at": "2024-01-01T00:00:00Z", "purposes": ["assist"]})
    with pytest.raises(fmt.ExportLineError) as e:
        list(fmt.read_stream([head, link, doc]))
    assert e.value.line == 3 and "after link" in e.value.message
    with pytest.raises(fmt.ExportLineError) as e:
        list(fmt.read_stream([head, doc, json.dumps({"type": "end", "counts": {"document": 2}})]))
    assert e.value.line == 3
    with pytest.raises(fmt.ExportLineError) as e:
        list(fmt.read_stream([head.replace('"version": 1', '"version": 9')]))
    assert "version 9" in e.value.message
    got = list(fmt.read_stream([head, doc, json.dumps({"type": "end",
                                                       "counts": {"document": 1}})]))
    assert [r.type for _, r in got] == ["header", "document", "end"]
