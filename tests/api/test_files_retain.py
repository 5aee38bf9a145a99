"""POST /v1/default/banks/{bank}/files/retain on a real stack (PostgreSQL, Redis, Celery
worker): every supported type converted on the workers with its provenance on every unit, a
file that cannot be converted failing its own operation with the reason, the limits (413/415,
nothing stored), the recovery sweep re-sending a lost convert step, and the real
hindsight-client's retain_files."""

import io

import pytest

from api.app import create_app
from rcll.files.service import FileLimits, FileRetainService
from tests.conftest import db_counts, serving, wait_job
from tests.retain import file_docs as docs

PDF_PAGES = ["The harbour crane lifts forty tonnes on calm days.",
             "Page two: the night ferry to Skerry leaves at 22:40 from pier nine.",
             "Page three: lifeboat drills happen every second Tuesday."]


def _post(client, bank, files, request_json=None):
    data = {"files": [(io.BytesIO(b), name) for name, b in files]}
    if request_json is not None:
        data["request"] = request_json
    return client.post(f"/v1/default/banks/{bank}/files/retain", data=data,
                       content_type="multipart/form-data")


def _units(services, bank):
    with services.pool.connection() as conn:
        return conn.execute("SELECT text, metadata, tags FROM memory_units WHERE bank_id = %s "
                            "ORDER BY created_at, id", (bank,)).fetchall()


def test_every_type_is_converted_with_provenance_on_every_unit(client, services, worker):
    bank = "files-types"
    files = [("manual.pdf", docs.pdf(PDF_PAGES)),
             ("guide.docx", docs.docx({"Moorings": "Boats moor at the east jetty.",
                                       "Fuel": "Diesel is sold until 18:00."})),
             ("deck.pptx", docs.pptx({"Tides": "Spring tides reach 4.2 metres."})),
             ("rota.xlsx", docs.xlsx({"Rota": [["day", "keeper"], ["Monday", "Ines"]]})),
             ("book.epub", docs.epub({"Chapter One": "The lamp was first lit in 1871."})),
             ("page.html", b"<html><body><h1>Harbour fees</h1><p>Mooring costs 12 euro a night."
                           b"</p></body></html>"),
             ("notes.md", b"# Radio\nHarbour control listens on channel 14.")]
    meta = [{"tags": ["harbour"], "metadata": {"n": i}} for i in range(len(files))]
    resp = _post(client, bank, files, '{"parser": "markitdown", "files_metadata": %s}'
                 % __import__("json").dumps(meta))
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert len(body["operation_ids"]) == len(files) == len(set(body["operation_ids"]))
    ops = [wait_job(client, bank, op) for op in body["operation_ids"]]
    assert [o["state"] for o in ops] == ["succeeded"] * len(files), ops
    assert ops[0]["counts"]["pages"] == 3 and ops[0]["counts"]["sections"] == 3
    assert all(o["counts"]["units_created"] >= 1 for o in ops)

    units = _units(services, bank)
    assert all(u["tags"] == ["harbour"] for u in units)
    by_file: dict[str, list] = {}
    for u in units:
        f = u["metadata"]["file"]
        by_file.setdefault(f["name"], []).append(u)
        name = f["name"]
        size = dict(files)[name]
        assert (f["size"], u["metadata"]["n"]) == (len(size), [n for n, _ in files].index(name))
        assert f["type"] and len(f["sha256"]) == 64
    assert set(by_file) == {n for n, _ in files}
    pdf_units = {u["metadata"]["file"]["page"]: u for u in by_file["manual.pdf"]}
    assert sorted(pdf_units) == [1, 2, 3]
    assert "22:40" in pdf_units[2]["text"]
    assert all(u["metadata"]["file"]["pages"] == 3 for u in pdf_units.values())
    assert by_file["manual.pdf"][0]["metadata"]["file"]["type"] == "application/pdf"
    sections = {u["metadata"]["file"]["section"] for u in by_file["guide.docx"]}
    assert sections == {"Moorings", "Fuel"}
    assert by_file["deck.pptx"][0]["metadata"]["file"]["section"] == "slide 1: Tides"
    assert by_file["rota.xlsx"][0]["metadata"]["file"]["section"] == "Rota"
    assert "Ines" in by_file["rota.xlsx"][0]["text"]

    # recall answers from the PDF's page 2, and says so
    res = client.post(f"/v1/default/banks/{bank}/memories/recall",
                      json={"query": "When does the night ferry to Skerry leave?", "limit": 3})
    top = res.get_json()["results"][0]
    assert "22:40" in top["text"]
    # on Hindsight's path metadata values are strings; the file's provenance has its field
    assert top["provenance"]["file"]["name"] == "manual.pdf"
    assert top["provenance"]["file"]["page"] == 2 and "file" not in top["metadata"]


def test_a_file_that_cannot_be_converted_fails_its_operation_with_the_reason(client, services,
                                                                             worker):
    bank = "files-bad"
    resp = _post(client, bank, [("broken.pdf", b"%PDF-1.4 this is not really a pdf"),
                                ("fake.docx", b"plain text pretending"),
                                ("scan.pdf", docs.pdf(["", ""])),
                                ("ok.txt", b"The tower bell rings at noon.")])
    assert resp.status_code == 200, resp.get_json()
    ops = [wait_job(client, bank, op) for op in resp.get_json()["operation_ids"]]
    assert [o["state"] for o in ops] == ["failed", "failed", "failed", "succeeded"]
    assert ops[0]["error"].startswith("broken.pdf: cannot convert: cannot read the PDF")
    assert ops[1]["error"] == "fake.docx: cannot convert: not a DOCX file (not a ZIP container)"
    assert ops[2]["error"].startswith("scan.pdf: cannot convert: no text in the PDF")
    assert ops[0]["counts"]["files_failed"] == 1
    units = _units(services, bank)
    assert [u["metadata"]["file"]["name"] for u in units] == ["ok.txt"]


def test_limits_refuse_the_request_and_store_nothing(app, services, worker):
    limited = create_app(services=services, enqueue=lambda *_: None)
    limited.extensions["rcll_files"] = FileRetainService(
        limited.extensions["rcll_retain"], FileLimits(max_files=2, max_file_bytes=1000))
    c = limited.test_client()
    bank = "files-limits"
    cases = [
        (_post(c, bank, [("a.txt", b"x" * 1001)]), 413, "file_too_large"),
        (_post(c, bank, [("a.txt", b"a"), ("b.txt", b"b"), ("c.txt", b"c")]), 413,
         "too_many_files"),
        (_post(c, bank, [("a.exe", b"MZ"), ("b.txt", b"b")]), 415, "unsupported_file_type"),
        (_post(c, bank, [("a.txt", b"")]), 400, "empty_file"),
        (_post(c, bank, []), 400, "no_files"),
        (_post(c, bank, [("a.txt", b"a")], '{"files_metadata": [{}, {}]}'), 400,
         "files_metadata_mismatch"),
        (_post(c, bank, [("a.txt", b"a")], '{"parser": "iris"}'), 400, "invalid_request"),
        (_post(c, bank, [("a.txt", b"a")], '{"update_mode": "append"}'), 400, "invalid_request"),
        (_post(c, bank, [("a.txt", b"a")], "{not json"), 400, "malformed_json"),
        (c.post(f"/v1/default/banks/{bank}/files/retain", json={"files": []}), 415,
         "unsupported_media_type"),
    ]
    for resp, status, code in cases:
        assert (resp.status_code, resp.get_json()["error"]["code"]) == (status, code), \
            resp.get_json()
    assert db_counts(services, bank)["jobs"] == 0
    details = cases[2][0].get_json()["error"]["details"]
    assert details["files"] == [{"name": "a.exe", "content_type": "application/octet-stream"}] \
        or details["files"][0]["name"] == "a.exe"


def test_a_lost_convert_message_is_resent_by_the_sweep(services, worker, client):
    lost = create_app(services=services, enqueue=lambda *_: None)  # the broker "loses" it
    bank = "files-lost"
    resp = _post(lost.test_client(), bank, [("m.pdf", docs.pdf(PDF_PAGES[:1]))])
    assert resp.status_code == 200
    op = wait_job(client, bank, resp.get_json()["operation_ids"][0], timeout_s=60)
    assert op["state"] == "succeeded", op
    assert _units(services, bank)[0]["metadata"]["file"]["page"] == 1


@pytest.fixture()
def http_url(app):
    with serving(app, "files-http") as url:
        yield url


def test_hindsight_client_retain_files(http_url, tmp_path, client, services, worker):
    from hindsight_client import Hindsight

    pdf = tmp_path / "rules.pdf"
    pdf.write_bytes(docs.pdf(["Visitors sign in at the gatehouse before 09:00."]))
    html = tmp_path / "faq.html"
    html.write_bytes(b"<h1>FAQ</h1><p>Dogs are welcome on the harbour wall.</p>")
    hs = Hindsight(base_url=http_url, timeout=60)
    res = hs.retain_files("files-hindsight", [pdf, html], files_metadata=[
        {"document_id": "rules", "context": "site rules", "tags": ["rules"]},
        {"document_id": "faq", "metadata": {"lang": "en"}}])
    assert len(res.operation_ids) == 2
    ops = [wait_job(client, "files-hindsight", op) for op in res.operation_ids]
    assert [o["state"] for o in ops] == ["succeeded", "succeeded"]
    with services.pool.connection() as conn:
        docs_ = conn.execute("SELECT document_id FROM documents WHERE bank_id = %s ORDER BY 1",
                             ("files-hindsight",)).fetchall()
    assert [d["document_id"] for d in docs_] == ["faq", "rules#p1"]
    units = _units(services, "files-hindsight")
    faq = next(u for u in units if u["metadata"]["file"]["name"] == "faq.html")
    assert faq["metadata"]["lang"] == "en"


def test_file_bombs_fail_fast_with_the_bound_and_do_not_hold_up_other_banks(client, services,
                                                                             worker):
    """Fault 9: a page-tree PDF bomb, a DOCX of a million empty paragraphs and a ZIP of
    20,000 entries each end ``failed`` naming the bound and its setting, on the real worker;
    a small Markdown file of another bank sent after them still finishes promptly."""
    import time

    bank = "files-bombs"
    started = time.monotonic()
    resp = _post(client, bank, [("tree.pdf", docs.pdf_fanout(4)),
                                ("paragraphs.docx", docs.docx_paragraph_bomb()),
                                ("entries.epub", docs.zip_many_entries(20_000,
                                                                       b"application/epub+zip"))])
    assert resp.status_code == 200, resp.get_json()
    later = _post(client, "files-after-bombs", [("note.md", b"# Bell\nThe bell rings at noon.")])
    assert later.status_code == 200, later.get_json()
    note = wait_job(client, "files-after-bombs", later.get_json()["operation_ids"][0],
                    timeout_s=60)
    assert note["state"] == "succeeded", note
    assert time.monotonic() - started < 60
    ops = [wait_job(client, bank, op, timeout_s=30) for op in resp.get_json()["operation_ids"]]
    assert [o["state"] for o in ops] == ["failed"] * 3, ops
    assert ops[0]["error"] == ("tree.pdf: cannot convert: the PDF has 10000 pages, more than "
                               "5000 (RCLL_FILE_MAX_PAGES=5000)")
    assert ops[1]["error"].startswith("paragraphs.docx: cannot convert: ZIP entry "
                                      "'word/document.xml' is compressed ")
    assert ops[1]["error"].endswith("more than 100:1 (RCLL_FILE_MAX_ZIP_RATIO=100)")
    assert ops[2]["error"] == ("entries.epub: cannot convert: the ZIP container has 20001 "
                               "entries, more than 10000 (RCLL_FILE_MAX_ZIP_ENTRIES=10000)")
    assert all(o["counts"]["files_failed"] == 1 and o["counts"]["convert_ms"] < 10_000
               for o in ops)
    assert db_counts(services, bank)["units"] == 0
    assert [u["text"] for u in _units(services, "files-after-bombs")] == [
        "# Bell\nThe bell rings at noon."]


def test_a_deep_request_part_or_a_nul_in_any_stored_text_is_a_400_and_stores_nothing(
        app, services):
    """Fault 10: a ``request`` part nested 50,000 deep and a file named ``notes\\x00.md`` were
    500s (RecursionError; UntranslatableCharacter on the job insert)."""
    c = create_app(services=services, enqueue=lambda *_: None).test_client()
    bank = "files-bad-text"
    deep = "[" * 50_000 + "]" * 50_000
    resp = _post(c, bank, [("a.md", b"# A\ntext")], f'{{"files_metadata": {deep}}}')
    assert (resp.status_code, resp.get_json()["error"]["code"]) == (400, "malformed_json")
    assert "nested deeper than 64 levels" in resp.get_json()["error"]["message"]
    resp = _post(c, bank, [("a.md", b"# A\ntext")], "{" * 50_000)
    assert (resp.status_code, resp.get_json()["error"]["code"]) == (400, "malformed_json")

    resp = _post(c, bank, [("ok.md", b"# A\ntext"), ("notes\x00.md", b"# B\ntext")])
    err = resp.get_json()["error"]
    assert (resp.status_code, err["code"]) == (400, "invalid_request"), err
    assert err["message"] == "files.1.filename: must not contain NUL (\\u0000) characters"
    assert err["details"]["errors"][0]["loc"] == ["files", 1, "filename"]

    for meta in ({"document_id": "d\x00"}, {"context": "c\x00"}, {"tags": ["t\x00"]},
                 {"metadata": {"k\x00": 1}}, {"metadata": {"k": "v\x00"}},
                 {"metadata": {"k": ["\ud83d"]}}):
        resp = _post(c, bank, [("a.md", b"# A\ntext")],
                     __import__("json").dumps({"files_metadata": [meta]}))
        assert (resp.status_code, resp.get_json()["error"]["code"]) == (400, "invalid_request"), \
            (meta, resp.get_json())
    # the JSON body of every other route goes through the same parser
    resp = c.post(f"/v1/default/banks/{bank}/memories", data='{"items":' + deep + "}",
                  content_type="application/json")
    assert (resp.status_code, resp.get_json()["error"]["code"]) == (400, "malformed_json")
    assert db_counts(services, bank)["jobs"] == 0


def test_a_refused_enqueue_fails_the_files_job_with_503(services):
    """The broker refuses the convert step: 503 ``queue_unavailable`` naming the job (and
    every job of the request), which stays visible as ``failed`` with ``enqueue failed``."""
    def broken(*_):
        raise ConnectionError("broker down")

    c = create_app(services=services, enqueue=broken).test_client()
    bank = "files-queue-down"
    r = _post(c, bank, [("notes.md", b"# Radio\nHarbour control listens on channel 16.")])
    assert r.status_code == 503, r.get_json()
    err = r.get_json()["error"]
    assert err["code"] == "queue_unavailable"
    assert err["message"] == "could not enqueue the file's job; retry later"
    op_id = err["details"]["operation_id"]
    assert err["details"]["operation_ids"] == [op_id]
    op = c.get(f"/v1/default/banks/{bank}/operations/{op_id}").get_json()
    assert op["state"] == "failed" and op["error"].startswith("enqueue failed: broker down")


def test_a_new_version_of_a_file_retires_the_pages_and_sections_it_no_longer_has(
        client, services, worker):
    """Stop 36 finding: each page or section of a file is its own document
    (``manual.pdf#p3``, ``guide.html#s2``), so a new version with fewer pages, or with one
    section where there were three, left the old parts live and recalled. The file's newest
    version is now its only live one; a retired part keeps its history."""
    bank = "files-versions"

    def html(sections):
        return ("<html><body>" + "".join(f"<h1>{t}</h1><p>{body}</p>" for t, body in sections)
                + "</body></html>").encode()

    def live():
        with services.pool.connection() as conn:
            return sorted((r["document_id"], r["text"]) for r in conn.execute(
                """SELECT d.document_id, u.text FROM memory_units u
                   JOIN documents d ON d.id = u.document_id
                   WHERE u.bank_id = %s AND u.invalidated_reason IS NULL
                     AND u.superseded_by_id IS NULL""", (bank,)).fetchall())

    sections = [("Moorings", "Boats moor at the east jetty."),
                ("Fuel", "Diesel is sold until six in the evening."),
                ("Radio", "Harbour control listens on channel fourteen.")]
    ids = '{"files_metadata": [{"document_id": "three.pdf"}, {"document_id": "guide.html"}]}'
    resp = _post(client, bank, [("three.pdf", docs.pdf(PDF_PAGES)),
                                ("guide.html", html(sections))], ids)
    ops = [wait_job(client, bank, op) for op in resp.get_json()["operation_ids"]]
    assert [o["state"] for o in ops] == ["succeeded"] * 2, ops
    assert [d for d, _ in live()] == ["guide.html#s1", "guide.html#s2", "guide.html#s3",
                                      "three.pdf#p1", "three.pdf#p2", "three.pdf#p3"]
    assert [o["counts"]["file_parts_retired"] for o in ops] == [0, 0]

    resp = _post(client, bank, [("three.pdf", docs.pdf(PDF_PAGES[:2])),
                                ("guide.html", html(sections[2:]))], ids)
    ops = [wait_job(client, bank, op) for op in resp.get_json()["operation_ids"]]
    assert [o["state"] for o in ops] == ["succeeded"] * 2, ops
    assert [o["counts"]["file_parts_retired"] for o in ops] == [1, 3]
    now = live()
    assert [d for d, _ in now] == ["guide.html", "three.pdf#p1", "three.pdf#p2"]
    assert not any("lifeboat" in t or "Diesel" in t for _, t in now)
    with services.pool.connection() as conn:
        gone = conn.execute(
            """SELECT d.document_id, d.revision, u.invalidated_reason FROM memory_units u
               JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s AND d.document_id = 'three.pdf#p3'""", (bank,)).fetchall()
    assert [(g["revision"], g["invalidated_reason"]) for g in gone] == [(2, "document_replaced")]


def test_retiring_parts_touches_only_older_parts_of_the_file_never_a_newer_write(
        client, services, worker):
    """Stop 36, second test agent: the first rule took the file's newest version as the
    largest version of any document naming the file, so a newer half-done upload, a
    reprocess of one page, or a plain memo claiming the file in its metadata made an
    upload retire its own fresh pages (149 of 150 in one run). A job now retires only
    parts older than itself, among the file's part ids, that it did not write."""
    from rcll.store import units

    bank = "files-retire-rule"
    part = lambda doc, text: {"content": text, "document_id": doc,  # noqa: E731
                              "metadata": {"file": {"document_id": "F.pdf"}}}

    def retain(items):
        op = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items}).get_json()
        job = wait_job(client, bank, op["operation_id"])
        assert job["state"] == "succeeded", job
        with services.pool.connection() as conn:
            return job["id"], conn.execute("SELECT seq FROM jobs WHERE id = %s",
                                           (job["id"],)).fetchone()["seq"]

    retain([part("F.pdf#p1", "Page one, first version: the crane lifts forty tonnes."),
            part("F.pdf#p2", "Page two, first version: the ferry leaves at 22:40."),
            part("F.pdf#p3", "Page three, first version: lifeboat drills on Tuesdays."),
            part("memo-1", "A memo that names the file in its metadata."),
            part("F.pdf#pX", "Not a part id: no page number.")])
    job_b, seq_b = retain([{"content": "An unrelated note about mooring fees."}])
    retain([part("F.pdf#p1", "Page one, rewritten later by a newer job.")])
    template = units.DocumentVersion(
        external_id="F.pdf", content_hash="", audience="bank",
        purposes=("assist", "operate", "audit", "personal"), metadata={}, tags=[],
        context=None, mentioned_at=None, version_seq=seq_b, version_item=10)
    with services.pool.connection() as conn, conn.transaction():
        retired = units.retire_file_parts(conn, bank, job_b, "F.pdf", ["F.pdf#p2"], template)
    assert [r.superseded for r in retired] == [False] and len(retired[0].left) == 1
    with services.pool.connection() as conn:
        live = sorted((r["document_id"], r["text"]) for r in conn.execute(
            """SELECT d.document_id, u.text FROM memory_units u
               JOIN documents d ON d.id = u.document_id
               WHERE u.bank_id = %s AND u.invalidated_reason IS NULL
                 AND u.superseded_by_id IS NULL AND d.document_id <> ''""", (bank,)))
    docs_live = [d for d, _ in live]
    assert "F.pdf#p3" not in docs_live  # older, a part id, not written by job B: retired
    assert ("F.pdf#p1", "Page one, rewritten later by a newer job.") in live  # newer: kept
    assert {"F.pdf#p2", "memo-1", "F.pdf#pX"} <= set(docs_live)
