"""Bank export and import (issue 25 item 3) against the real stack: PostgreSQL, Redis, the
embedder and, for the re-embedding step, the Celery worker. A small bank with documents,
entities, links, a corrected, a superseded and a forgotten unit, feedback and a closet is
exported, imported, cloned; every recall question gets the same top 10."""

from __future__ import annotations

import gzip
import io
import json
import threading

import pytest

from rcll.store import neighbour_length
from rcll.transfer import format as fmt
from rcll.transfer.lines import Limits
from rcll.transfer.service import TransferService
from tests.access.conftest import auth_app, auth_services, auth_settings, enqueued  # noqa: F401
from tests.conftest import db_counts, free_port, wait_job

TURNS = [
    ("Melanie", "I ran a charity race for mental health last Saturday.", "2023-05-20T13:00:00"),
    ("Caroline", "I went to the LGBTQ support group yesterday and it was powerful.",
     "2023-05-08T13:56:00"),
    ("Melanie", "Never deploy the website on a Friday, the pipeline breaks.", "2023-05-09T09:00:00"),
    ("Caroline", "My mentor Dana from Lisbon is helping me apply to counseling programs.",
     "2023-05-10T18:30:00"),
    ("Melanie", "We took the kids camping at Lake Tahoe in June and saw a bear.",
     "2023-06-15T20:00:00"),
    ("Caroline", "I painted a sunrise over the ocean for my grandmother's birthday.",
     "2023-06-20T11:00:00"),
    ("Melanie", "The staging database moved to Frankfurt after the outage.",
     "2023-07-01T08:00:00"),
    ("Caroline", "Dana and I volunteered at the animal shelter in Portland on Sunday.",
     "2023-07-03T16:00:00"),
    ("Melanie", "My daughter started violin lessons with Mr. Okafor.", "2023-07-12T17:45:00"),
    ("Caroline", "I finally finished reading Becoming by Michelle Obama.", "2023-07-20T21:10:00"),
    ("Melanie", "Our team switched the API gateway to Envoy last sprint.", "2023-08-02T10:00:00"),
    ("Caroline", "I adopted a cat named Pixel from the shelter in Portland.", "2023-08-09T12:00:00"),
]
QUESTIONS = ["When did Caroline go to the support group?", "Where did Melanie go camping?",
             "Who is Dana?", "What did Caroline adopt?", "Where is the staging database?",
             "What instrument does Melanie's daughter play?", "charity race",
             "what did Caroline paint", "API gateway", "animal shelter Portland"]


def build_bank(client, bank: str) -> dict:
    """The small bank: 12 conversation turns, a document of three chunks, a remembered note
    corrected once, a unit superseded, one forgotten, feedback on one, all synchronous."""
    client.delete(f"/v1/default/banks/{bank}")
    items = [{"content": f"{who}: {text}", "timestamp": ts, "document_id": f"conv/D1:{i}",
              "metadata": {"dia_id": f"D1:{i}"}, "tags": ["locomo"]}
             for i, (who, text, ts) in enumerate(TURNS, 1)]
    items.append({"content": "# Runbook\n\nRestart the ingest workers before a deploy.\n\n"
                  "## Rollback\n\nKeep the previous image for a day; roll back with the "
                  "deploy tool.\n\n## Contacts\n\nThe on-call engineer is Priya.",
                  "document_id": "runbook.md", "context": "ops runbook"})
    r = client.post(f"/banks/{bank}/retain", json={"items": items, "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()
    note = client.post(f"/banks/{bank}/units", json={"text": "Pixel the cat is allergic to fish.",
                                                      "kind": "note"}).get_json()
    fixed = client.patch(f"/banks/{bank}/units/{note['id']}",
                         json={"revision": 1, "text": "Pixel the cat is allergic to salmon."})
    assert fixed.status_code == 200, fixed.get_json()
    old = client.post(f"/banks/{bank}/units", json={"text": "The office wifi password rotates "
                                                             "monthly.", "kind": "fact"}).get_json()
    sup = client.post(f"/banks/{bank}/units/{old['id']}/supersede",
                      json={"revision": 1, "text": "The office wifi password rotates weekly."})
    assert sup.status_code in (200, 201), sup.get_json()
    gone = client.post(f"/banks/{bank}/units", json={"text": "Temporary note to forget."}).get_json()
    assert client.delete(f"/banks/{bank}/units/{gone['id']}").status_code == 200
    fb = client.post(f"/v1/default/banks/{bank}/memories/{note['id']}/feedback",
                     json={"outcome": "success"})
    assert fb.status_code == 200, fb.get_json()
    return {"note": note["id"], "superseded": old["id"]}


def top10(client, bank: str, question: str) -> list[tuple[str, str]]:
    r = client.post(f"/v1/default/banks/{bank}/memories/recall",
                    json={"query": question, "max_tokens": 100_000, "limit": 10,
                          "tiers": ["cold"]})
    assert r.status_code == 200, r.get_json()
    return [(h["id"], h["text"]) for h in r.get_json()["results"]]


def export(client, bank: str, **query) -> bytes:
    r = client.get(f"/banks/{bank}/export", query_string=query)
    assert r.status_code == 200, r.get_data()[:500]
    return r.get_data()


def records(data: bytes) -> list[dict]:
    return [json.loads(ln) for ln in data.splitlines() if ln.strip()]


def import_(client, bank: str, data: bytes, **query):
    return client.post(f"/banks/{bank}/import", query_string=query, data=data,
                       content_type=fmt.MEDIA_TYPE)


def rows(services, sql: str, *params) -> list[dict]:
    with services.pool.connection() as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture(scope="module")
def source(app, services):
    client = app.test_client()
    bank = "tr-source"
    ids = build_bank(client, bank)
    with services.pool.connection() as conn:  # a closet row (the LLM path is not run here)
        unit = conn.execute("SELECT id FROM memory_units WHERE bank_id = %s AND kind = 'chunk' "
                            "ORDER BY id LIMIT 2", (bank,)).fetchall()
        conn.execute("""INSERT INTO closets (bank_id, room, hall, summary, unit_id,
                            source_unit_ids) VALUES (%s, 'general', 'fact', 'A summary.', %s,
                            %s::uuid[])""", (bank, unit[0]["id"], [unit[0]["id"], unit[1]["id"]]))
        conn.commit()
    return {"bank": bank, **ids, "answers": {q: top10(client, bank, q) for q in QUESTIONS}}


def test_export_holds_the_bank(client, services, source):
    data = export(client, source["bank"])
    recs = records(data)
    head, end = recs[0], recs[-1]
    assert head["type"] == "header" and head["format"] == "rcll-bank" and head["version"] == 1
    assert head["bank"]["id"] == source["bank"] and head["vectors"] is True
    assert head["embedding"]["model"] == services.settings.embedder_model
    assert head["embedding"]["dim"] == services.settings.embedding_dim == 384
    assert head["scope"]["full"] is True
    kinds = [r["type"] for r in recs[1:-1]]
    assert kinds == sorted(kinds, key=fmt.ORDER.index)  # in the format's order
    counts = db_counts(services, source["bank"])
    assert end == {"type": "end", "counts": {k: kinds.count(k) for k in dict.fromkeys(kinds)}}
    assert end["counts"]["unit"] == counts["units"] and end["counts"]["document"] == counts["documents"]
    assert end["counts"]["link"] > 0 and end["counts"]["mention"] > 0 and end["counts"]["entity"] > 0
    assert end["counts"]["closet"] == 1
    units = {r["id"]: r for r in recs if r["type"] == "unit"}
    assert all(len(u["vector"]) == 384 for u in units.values() if u["forgotten_at"] is None)
    note = units[source["note"]]
    assert note["revision"] == 2 and [v["revision"] for v in note["revisions"]] == [1]
    assert note["feedback"]["success"] == 1
    assert units[source["superseded"]]["superseded_by_id"] in units
    assert "grant" not in end["counts"]  # only when asked for


def test_restore_gives_the_same_top10(client, services, source):
    """Export, delete the bank, import the export under its own id: the same ids (kept), the
    same rows, the same top 10 for every question."""
    bank = "tr-restore"
    build_bank(client, bank)
    before = {q: top10(client, bank, q) for q in QUESTIONS}
    data = export(client, bank)
    neighbour_length.drain_all(services.pool)  # stored lengths the source left stale: current
    snapshot = _table_rows(services, bank)
    assert client.delete(f"/v1/default/banks/{bank}").status_code == 200
    r = import_(client, bank, data)
    assert r.status_code == 201, r.get_json()
    body = r.get_json()
    assert body["state"] == "succeeded" and body["ids"] == "keep"
    assert body["units_to_embed"] == 0 and body["vectors_reused"] == snapshot["embeddings"]
    assert _table_rows(services, bank) == snapshot
    assert {q: top10(client, bank, q) for q in QUESTIONS} == before
    op = client.get(f"/v1/default/banks/{bank}/operations/{body['operation_id']}").get_json()
    assert op["status"] == "completed" and op["task_type"] == "import"
    assert op["result_metadata"]["counts"]["unit"] == snapshot["units"]
    audit = rows(services, "SELECT action, details FROM audit_log WHERE bank_id = %s "
                           "AND action = 'bank.import'", bank)
    assert len(audit) == 1 and audit[0]["details"]["counts"]["unit"] == snapshot["units"]


def _table_rows(services, bank: str) -> dict:
    """Counts and the comparable content of a bank: what an import with kept ids must give
    back exactly (mentions in their order)."""
    one = rows(services, """SELECT
        (SELECT count(*) FROM memory_units WHERE bank_id = %(b)s) AS units,
        (SELECT count(*) FROM memory_embeddings WHERE bank_id = %(b)s) AS embeddings,
        (SELECT count(*) FROM documents WHERE bank_id = %(b)s) AS documents,
        (SELECT count(*) FROM memory_links WHERE bank_id = %(b)s) AS links,
        (SELECT count(*) FROM entities WHERE bank_id = %(b)s) AS entities,
        (SELECT count(*) FROM memory_unit_revisions r JOIN memory_units u ON u.id = r.unit_id
         WHERE u.bank_id = %(b)s) AS revisions,
        (SELECT count(*) FROM unit_feedback WHERE bank_id = %(b)s) AS feedback""".replace(
        "%(b)s", "%s"), *([bank] * 7))[0]
    one["unit_rows"] = [tuple(r.values()) for r in rows(services, """
        SELECT id, text, kind, room, hall, layer, superseded_by_id, invalidated_reason,
               revision, created_at, mentioned_at, tsv_len, sample_key, nb_len, document_id
        FROM memory_units WHERE bank_id = %s ORDER BY id""", bank)]
    one["mentions"] = [tuple(r.values()) for r in rows(services, """
        SELECT unit_id, entity_id, mention FROM unit_entities WHERE bank_id = %s
        ORDER BY seq""", bank)]
    one["vectors"] = [tuple(r.values()) for r in rows(services, """
        SELECT unit_id, embedding::text FROM memory_embeddings WHERE bank_id = %s
        ORDER BY unit_id""", bank)]
    return one


def test_import_as_a_new_bank_gives_the_same_top10_texts(client, services, source):
    """Beside its source in one database: new ids (auto), the same texts in the same order."""
    bank = "tr-copy"
    client.delete(f"/v1/default/banks/{bank}")
    r = import_(client, bank, export(client, source["bank"]))
    assert r.status_code == 201, r.get_json()
    body = r.get_json()
    assert body["ids"] == "new" and body["source_bank_id"] == source["bank"]
    for q in QUESTIONS:
        assert [t for _, t in top10(client, bank, q)] == [t for _, t in source["answers"][q]], q
    ids = {i for q in QUESTIONS for i, _ in top10(client, bank, q)}
    assert not ids & {i for q in QUESTIONS for i, _ in source["answers"][q]}
    # a second import into the now full bank is refused, nothing changes
    again = import_(client, bank, export(client, source["bank"]))
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "bank_not_empty"
    # keeping the ids of a bank that lives here is refused, nothing stored
    client.delete("/v1/default/banks/tr-keep")
    keep = import_(client, "tr-keep", export(client, source["bank"]), ids="keep")
    assert keep.status_code == 409 and keep.get_json()["error"]["code"] == "ids_in_use"
    assert not rows(services, "SELECT 1 FROM memory_banks WHERE id = 'tr-keep'")


def test_vectors_absent_are_re_embedded(client, services, worker, source):
    bank = "tr-reembed"
    client.delete(f"/v1/default/banks/{bank}")
    data = export(client, source["bank"], vectors="false")
    recs = records(data)
    assert recs[0]["vectors"] is False and all("vector" not in r for r in recs if r["type"] == "unit")
    r = import_(client, bank, data)
    assert r.status_code == 202, r.get_json()
    body = r.get_json()
    live = sum(1 for r in recs if r["type"] == "unit" and r["forgotten_at"] is None)
    assert body["state"] == "queued" and body["units_to_embed"] == live
    assert db_counts(services, bank)["embeddings"] == 0  # searchable lexically meanwhile
    op = wait_job(client, bank, body["operation_id"])
    assert op["state"] == "succeeded", op
    assert op["counts"]["units_embedded"] == live == db_counts(services, bank)["embeddings"]
    for q in QUESTIONS:
        assert [t for _, t in top10(client, bank, q)] == [t for _, t in source["answers"][q]], q


def test_another_embedder_is_re_embedded(client, services, source):
    """An export whose header names another embedder: its vectors are not used."""
    recs = records(export(client, source["bank"]))
    recs[0]["embedding"] = {"model": "another/model", "dim": 384, "input_stamp": "x"}
    data = b"\n".join(json.dumps(r).encode() for r in recs)
    bank = "tr-other-model"
    client.delete(f"/v1/default/banks/{bank}")
    body = import_(client, bank, data).get_json()
    live = sum(1 for r in recs if r["type"] == "unit" and r["forgotten_at"] is None)
    assert body["vectors_reused"] == 0 and body["units_to_embed"] == live  # not the forgotten
    assert body["state"] == "queued"


def _bad(data: bytes, line: int, why: str):
    return pytest.param(data, line, why, id=why)


def _valid(client, source) -> list[bytes]:
    return export(client, source["bank"]).splitlines()


def test_malformed_input_is_400_and_stores_nothing(client, services, source):
    lines = _valid(client, source)
    first_unit = next(i for i, ln in enumerate(lines) if b'"type":"unit"' in ln)
    first_link = next(i for i, ln in enumerate(lines) if b'"type":"link"' in ln)
    unit = json.loads(lines[first_unit])
    cases = {
        "not JSON": (lines[:3] + [b"{not json"] + lines[4:], 4),
        "unknown type": (lines[:2] + [b'{"type": "gadget"}'] + lines[3:], 3),
        "bad kind": (lines[:first_unit] + [json.dumps({**unit, "kind": "rumour"}).encode()]
                     + lines[first_unit + 1:], first_unit + 1),
        "NUL in text": (lines[:first_unit] + [json.dumps({**unit, "text": "a\u0000b"}).encode()]
                        + lines[first_unit + 1:], first_unit + 1),
        "link to nothing": (lines[:first_link] + [json.dumps(
            {**json.loads(lines[first_link]), "to_unit": "00000000-0000-4000-8000-000000000001"}
        ).encode()] + lines[first_link + 1:], first_link + 1),
        "out of order": (lines[:1] + [lines[first_unit]] + lines[1:first_unit]
                         + lines[first_unit + 1:], None),
        "cut short": (lines[:-5], len(lines) - 4),
        "end counts wrong": (lines[:-1] + [b'{"type": "end", "counts": {"unit": 1}}'],
                             len(lines)),
        "no header": (lines[1:], 1),
        "a zip": ([b"PK\x03\x04 not an export"], 1),
        "empty": ([], 1),
    }
    before = db_counts(services, "tr-bad")
    for why, (body, line) in cases.items():
        data = b"\n".join(body)
        for payload in (data, gzip.compress(data)):
            r = import_(client, "tr-bad", payload)
            assert r.status_code == 400, (why, r.get_json())
            err = r.get_json()["error"]
            assert err["code"] == "invalid_export", (why, err)
            if line is not None:
                assert err["details"]["line"] == line, (why, err)
            assert db_counts(services, "tr-bad") == before, why
            assert not rows(services, "SELECT 1 FROM memory_banks WHERE id = 'tr-bad'"), why
    # a purpose this deployment does not configure: the retain rule's own answer, the line
    body = lines[:first_unit] + [json.dumps({**unit, "purposes": ["spying"]}).encode()] \
        + lines[first_unit + 1:]
    r = import_(client, "tr-bad", b"\n".join(body))
    err = r.get_json()["error"]
    assert r.status_code == 400 and err["code"] == "unknown_purpose", err
    assert err["details"]["line"] == first_unit + 1
    assert not rows(services, "SELECT 1 FROM memory_banks WHERE id = 'tr-bad'")
    # a gzip stream cut short
    cut = gzip.compress(b"\n".join(lines))[:-200]
    r = import_(client, "tr-bad", cut)
    assert r.status_code == 400 and "gzip" in r.get_json()["error"]["message"]
    assert not rows(services, "SELECT 1 FROM memory_banks WHERE id = 'tr-bad'")


def test_import_bounds(services, source, client):
    """Past the line limit: 400 naming the line; past the size limit: 413 (after gzip too)."""
    data = b"\n".join(_valid(client, source))
    longest = max(len(ln) for ln in data.splitlines())
    small = TransferService(services, lambda *_: None,
                            Limits(max_bytes=len(data) * 4, max_line_bytes=longest - 1))
    from rcll.access.principal import Principal
    from rcll.errors import Rejected

    with pytest.raises(Rejected) as e:
        small.import_stream(Principal.unrestricted(), "tr-bounds", io.BytesIO(data))
    assert e.value.code == "invalid_export" and "longer than" in e.value.message
    tiny = TransferService(services, lambda *_: None, Limits(max_bytes=len(data) // 2))
    for payload in (data, gzip.compress(data)):
        with pytest.raises(Rejected) as e:
            tiny.import_stream(Principal.unrestricted(), "tr-bounds", io.BytesIO(payload))
        assert e.value.status == 413 and e.value.code == "payload_too_large"
    assert not rows(services, "SELECT 1 FROM memory_banks WHERE id = 'tr-bounds'")


def test_gzip_both_ways(client, services, source):
    plain = records(export(client, source["bank"]))
    r = client.get(f"/banks/{source['bank']}/export?gzip=true")
    assert r.status_code == 200 and r.mimetype == "application/gzip"
    assert "attachment" in r.headers["Content-Disposition"]
    zipped = records(gzip.decompress(r.get_data()))
    for a, b in ((plain, zipped),):
        a[0].pop("exported_at"), b[0].pop("exported_at")
        assert a == b
    bank = "tr-gzip"
    client.delete(f"/v1/default/banks/{bank}")
    r = import_(client, bank, r.get_data())
    assert r.status_code == 201 and r.get_json()["counts"]["unit"] == sum(
        1 for x in plain if x["type"] == "unit")


def test_clone(client, services, source):
    target = "tr-clone"
    client.delete(f"/v1/default/banks/{target}")
    r = client.post(f"/v1/default/banks/{source['bank']}/clone?target_bank_id={target}")
    assert r.status_code == 202, r.get_json()
    body = r.get_json()
    assert body["status"] == "completed" and body["bank_id"] == target and body["ids"] == "new"
    assert body["units_to_embed"] == 0
    op = client.get(f"/v1/default/banks/{source['bank']}/operations/{body['operation_id']}")
    assert op.status_code == 200 and op.get_json()["task_type"] == "clone"
    assert db_counts(services, target)["units"] == db_counts(services, source["bank"])["units"]
    for q in QUESTIONS:
        assert [t for _, t in top10(client, target, q)] == [t for _, t in source["answers"][q]], q
    # the clone lives on its own: a unit retained into it is not in the source
    client.post(f"/banks/{target}/units", json={"text": "Only the clone knows this."})
    assert db_counts(services, target)["units"] == db_counts(services, source["bank"])["units"] + 1
    again = client.post(f"/v1/default/banks/{source['bank']}/clone?target_bank_id={target}")
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "bank_exists"
    missing = client.post(f"/v1/default/banks/{source['bank']}/clone")
    assert missing.status_code == 400
    # an alias names a bank: no clone under it, and an import into it is into its bank
    client.delete(f"/v1/default/banks/{target}/aliases/tr-clone-alias")
    r = client.post(f"/v1/default/banks/{target}/aliases", json={"alias": "tr-clone-alias"})
    assert r.status_code == 201, r.get_json()
    r = client.post(f"/v1/default/banks/{source['bank']}/clone?target_bank_id=tr-clone-alias")
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "bank_exists"
    r = import_(client, "tr-clone-alias", export(client, source["bank"]))
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "bank_not_empty"
    assert r.get_json()["error"]["details"]["bank_id"] == target


def test_roles_and_visibility(auth_app, services):  # noqa: F811 (the fixture imported above)
    """Only a bank admin exports or imports; an export holds what its caller may see; an
    import is held to the retain rule for audiences (another member's private unit needs a
    deployment admin)."""
    from tests.access.conftest import ADMIN, bearer, make_member

    api = auth_app.test_client()
    bank = "tr-auth"
    api.delete(f"/v1/default/banks/{bank}", headers=ADMIN)
    writer = bearer(make_member(api, "tr-writer", bank, "write"))
    admin = bearer(make_member(api, "tr-bank-admin", bank, "admin"))
    api.post(f"/banks/{bank}/units", json={"text": "A shared fact about the VPN."},
             headers=ADMIN)
    r = api.post(f"/banks/{bank}/units", json={"text": "The writer's own VPN reminder.",
                                               "audience": "tr-writer"}, headers=writer)
    assert r.status_code == 201, r.get_json()
    r = api.get(f"/banks/{bank}/export", headers=writer)
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"
    mine = records(api.get(f"/banks/{bank}/export", headers=admin).get_data())
    assert mine[0]["scope"]["full"] is False and mine[0]["scope"]["member"] == "tr-bank-admin"
    assert [u["text"] for u in mine if u["type"] == "unit"] == ["A shared fact about the VPN."]
    # a deployment admin does not see members' private units either (rcll.access.principal)
    deployment = records(api.get(f"/banks/{bank}/export", headers=ADMIN).get_data())
    assert [u["text"] for u in deployment if u["type"] == "unit"] == [
        "A shared fact about the VPN."]
    # the unrestricted principal (auth off, rcll bank export --direct) exports everything
    from rcll.access.principal import Principal

    stream = TransferService(services, lambda *_: None).export(Principal.unrestricted(), bank)
    everything = b"".join(stream)
    texts = [u["text"] for u in records(everything) if u["type"] == "unit"]
    assert sorted(texts) == ["A shared fact about the VPN.", "The writer's own VPN reminder."]
    # a writer may not import; a bank admin may not import elsewhere (no grant there)
    for who, target in ((writer, bank), (admin, "tr-auth-elsewhere")):
        r = api.post(f"/banks/{target}/import", data=everything, headers=who,
                     content_type=fmt.MEDIA_TYPE)
        assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"
    # a bank admin may import, but not plant another member's private unit
    target = "tr-auth-copy"
    api.delete(f"/v1/default/banks/{target}", headers=ADMIN)
    api.put(f"/banks/{target}/grants/tr-bank-admin", json={"role": "admin"}, headers=ADMIN)
    r = api.post(f"/banks/{target}/import", data=everything, headers=admin,
                 content_type=fmt.MEDIA_TYPE)
    err = r.get_json()["error"]
    assert r.status_code == 403 and err["code"] == "audience_not_allowed", err
    assert not rows(services, "SELECT 1 FROM memory_banks WHERE id = %s", target)
    r = api.post(f"/banks/{target}/import", data=b"\n".join(
        json.dumps(x).encode() for x in mine), headers=admin, content_type=fmt.MEDIA_TYPE)
    assert r.status_code == 201, r.get_json()
    r = api.post(f"/banks/{target}-2/import", data=everything, headers=ADMIN,
                 content_type=fmt.MEDIA_TYPE)  # the deployment admin restores everything
    assert r.status_code == 201 and r.get_json()["counts"]["unit"] == 2, r.get_json()
    for path in (f"/v1/default/banks/{bank}/clone?target_bank_id=tr-auth-x",
                 f"/v1/default/banks/{bank}/transfer/export"):
        r = api.post(path, headers=writer)
        assert r.status_code == 403, path
    # Hindsight's export: the download is the asking member's only
    r = api.post(f"/v1/default/banks/{bank}/transfer/export", headers=admin)
    assert r.status_code == 202, r.get_json()
    url = r.get_json()["result_metadata"]["download_url"]
    for who in (writer, ADMIN):
        r = api.get(url, headers=who)
        assert r.status_code == 404 and r.get_json()["error"]["code"] == "export_not_found"
    assert api.get(url.replace("-", "0", 1), headers=admin).status_code == 404
    r = api.get(url, headers=admin)
    assert r.status_code == 200 and r.mimetype == "application/gzip"
    assert records(gzip.decompress(r.get_data()))[0]["scope"]["member"] == "tr-bank-admin"


def test_hindsight_client_export_import_clone(app, services, source):
    """The real hindsight-client 1.1.0 calls: export_bank (submit, poll, download),
    import_bank (multipart restore into a new bank), clone_bank."""
    hindsight_client = pytest.importorskip("hindsight_client")
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hs = hindsight_client.Hindsight(base_url=f"http://127.0.0.1:{server.server_port}")
        archive = hs.export_bank(source["bank"], poll_interval=0.1, timeout=60)
        recs = records(gzip.decompress(archive))
        assert recs[0]["bank"]["id"] == source["bank"] and recs[-1]["type"] == "end"
        for bank in ("tr-hs-restored", "tr-hs-clone"):
            app.test_client().delete(f"/v1/default/banks/{bank}")
        op_id = hs.import_bank(source["bank"], archive, target_bank_id="tr-hs-restored")
        status = hs.operations  # the generated API: its status model must parse our answer
        from hindsight_client.hindsight_client import _run_async

        st = _run_async(status.get_operation_status(source["bank"], op_id))
        assert st.status == "completed" and st.result_metadata["counts"]["unit"] > 0
        op_id = hs.clone_bank(source["bank"], "tr-hs-clone")
        st = _run_async(status.get_operation_status(source["bank"], op_id))
        assert st.status == "completed"
        for bank in ("tr-hs-restored", "tr-hs-clone"):
            assert db_counts(services, bank)["units"] == db_counts(services, source["bank"])["units"]
    finally:
        server.shutdown()


def test_cli_export_then_import(app, services, source, monkeypatch, tmp_path):
    """``rcll bank export BANK -o FILE`` (plain and .gz) and ``rcll bank import FILE --bank
    NEW`` through the HTTP client."""
    import httpx
    from click.testing import CliRunner

    from rcll.cli import main as cli_main
    from rcll.client import RCLLClient

    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    run = CliRunner()
    units = db_counts(services, source["bank"])["units"]
    for name, extra in (("bank.jsonl", []), ("bank.jsonl.gz", []),
                        ("novec.jsonl", ["--no-vectors"])):
        path = tmp_path / name
        r = run.invoke(cli_main.cli, ["bank", "export", source["bank"], "-o", str(path), *extra])
        assert r.exit_code == 0, r.output
        data = path.read_bytes()
        assert (data[:2] == b"\x1f\x8b") is name.endswith(".gz")
        bank = f"tr-cli-{name.split('.')[0]}-{len(name)}"
        app.test_client().delete(f"/v1/default/banks/{bank}")
        r = run.invoke(cli_main.cli, ["bank", "import", str(path), "--bank", bank, "--no-wait"])
        assert r.exit_code == 0, r.output
        assert f"imported into {bank}" in r.output and "ids new" in r.output
        assert db_counts(services, bank)["units"] == units
    # a bad file: a one-line error, nothing stored
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type": "header"}\n')
    r = run.invoke(cli_main.cli, ["bank", "import", str(bad), "--bank", "tr-cli-bad"])
    assert r.exit_code != 0 and "invalid_export" in r.output
    assert not rows(services, "SELECT 1 FROM memory_banks WHERE id = 'tr-cli-bad'")


def test_cli_direct_export_and_import_embeds_in_process(services, source, monkeypatch,
                                                        tmp_path):
    """``--direct``: on the database as the internal principal (every audience), and the
    import's embedding run in the CLI's own process (no worker)."""
    from click.testing import CliRunner

    from rcll.access.principal import Principal
    from rcll.cli import bank as bank_cli
    from rcll.cli import main as cli_main

    class Shared:  # the session's services, not closed by the command
        def __getattr__(self, name):
            return getattr(services, name)

        def close(self):
            pass

    monkeypatch.setattr(bank_cli, "_direct", lambda: (
        Shared(), TransferService(services, lambda *_: None),
        Principal.unrestricted(tuple(services.settings.purposes))))
    run = CliRunner()
    path = tmp_path / "direct.jsonl.gz"
    r = run.invoke(cli_main.cli, ["bank", "export", source["bank"], "-o", str(path),
                                  "--no-vectors", "--direct"])
    assert r.exit_code == 0, r.output
    bank = "tr-cli-direct"
    with services.pool.connection() as conn:
        conn.execute("DELETE FROM memory_banks WHERE id = %s", (bank,))
    r = run.invoke(cli_main.cli, ["bank", "import", str(path), "--bank", bank, "--direct"])
    assert r.exit_code == 0, r.output
    live = rows(services, "SELECT count(*) AS n FROM memory_units WHERE bank_id = %s "
                          "AND forgotten_at IS NULL", bank)[0]["n"]
    assert f"embedded {live} units" in r.output
    assert db_counts(services, bank)["embeddings"] == live
    job = rows(services, "SELECT state FROM jobs WHERE bank_id = %s AND kind = 'import'", bank)
    assert [j["state"] for j in job] == ["succeeded"]


def test_hindsight_export_of_some_documents_and_a_config_only_restore(client, services, source):
    r = client.post(f"/v1/default/banks/{source['bank']}/transfer/export"
                    "?document_id=runbook.md&vectors=false")
    assert r.status_code == 202, r.get_json()
    body = r.get_json()
    op = client.get(f"/v1/default/banks/{source['bank']}/operations/{body['operation_id']}")
    assert op.get_json()["status"] == "completed" and op.get_json()["task_type"] == "export"
    data = client.get(body["result_metadata"]["download_url"]).get_data()
    recs = records(gzip.decompress(data))
    assert recs[0]["documents"] == ["runbook.md"] and recs[0]["vectors"] is False
    assert {r["document_id"] for r in recs if r["type"] == "document"} == {"runbook.md"}
    units = [r for r in recs if r["type"] == "unit"]
    assert units and all("Runbook" in u["text"] or "roll back" in u["text"] or "Priya" in u["text"]
                         for u in units), [u["text"] for u in units]
    # restore only the bank's config (include_data=false), through the multipart route
    target = "tr-config-only"
    client.delete(f"/v1/default/banks/{target}")
    r = client.post(f"/v1/default/banks/{source['bank']}/transfer/import"
                    f"?target_bank_id={target}&include_data=false",
                    data={"file": (io.BytesIO(data), "bank.jsonl.gz")},
                    content_type="multipart/form-data")
    assert r.status_code == 202, r.get_json()
    assert r.get_json()["status"] == "completed" and r.get_json()["bank_id"] == target
    assert rows(services, "SELECT 1 FROM memory_banks WHERE id = %s", target)
    assert db_counts(services, target)["units"] == 0
    merge = client.post(f"/v1/default/banks/{source['bank']}/transfer/import?mode=merge",
                        data={"file": (io.BytesIO(data), "bank.jsonl.gz")},
                        content_type="multipart/form-data")
    assert merge.status_code == 400
    assert merge.get_json()["error"]["code"] == "unsupported_hindsight_value"
