"""The web screens end to end in headless Chromium (tests/web/conftest.py): sign-in, a bank
and a memory with its provenance, forget with confirmation, what another member may not see,
CSRF, escaping, dedup review, a job; each screen saved to docs/screenshots/."""

from __future__ import annotations

import io
import re
import uuid

from playwright.sync_api import expect

from tests.access.conftest import ADMIN_KEY, make_member
from tests.web.conftest import BANK, OTHER, SCRIPT_TEXT, shot, sign_in


def test_sign_in_keeps_the_key_server_side(page, data, base_url):
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/ui/signin"))
    shot(page, "signin")
    page.get_by_label("API key").fill("rcll_000000000000_" + "x" * 43)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("error")).to_contain_text("not valid")
    sign_in(page, data["bob"])
    expect(page).to_have_url(re.compile(r"/ui/banks$"))
    expect(page.get_by_test_id("member")).to_have_text(data["bob_id"])
    expect(page.get_by_role("link", name=BANK, exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=OTHER, exact=True)).to_have_count(0)  # no grant
    cookies = {c["name"]: c for c in page.context.cookies()}
    c = cookies["rcll_session"]
    assert c["httpOnly"] and c["sameSite"] == "Lax"
    assert data["bob"] not in c["value"] and data["bob"].split("_")[1] not in c["value"]
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/ui/signin"))
    page.goto("/ui/banks")  # the old session is gone server-side
    expect(page).to_have_url(re.compile(r"/ui/signin"))


def test_bank_grid_and_a_memory_with_its_provenance(page, data):
    sign_in(page, ADMIN_KEY)
    shot(page, "banks")
    page.get_by_role("link", name=BANK, exact=True).click()
    expect(page.get_by_role("heading", name=f"Bank {BANK}")).to_be_visible()
    assert int(page.get_by_test_id("count-units").inner_text()) >= 5
    assert int(page.get_by_test_id("count-documents").inner_text()) >= 5
    shot(page, "bank")
    cells = page.locator("table.grid td a")
    assert cells.count() >= 1
    cells.first.click()
    expect(page.get_by_role("heading", name=re.compile("^Memories"))).to_be_visible()
    shot(page, "units")
    page.goto(f"/ui/banks/{BANK}/units/{data['ids']['deploy']}")
    expect(page.get_by_test_id("unit-text")).to_contain_text("deploy pipeline")
    prov = page.get_by_test_id("provenance-document")
    expect(prov).to_have_text("runbook")
    expect(page.get_by_test_id("provenance")).to_contain_text("Chunk")
    shot(page, "memory")
    prov.click()
    expect(page.get_by_role("heading", name="Document runbook")).to_be_visible()
    expect(page.locator("ol.doc-units li")).to_have_count(1)
    shot(page, "document")
    page.goto(f"/ui/banks/{BANK}/documents")
    shot(page, "documents")
    page.goto(f"/ui/banks/{BANK}/entities")
    shot(page, "entities")
    first = page.locator("table tbody a").first
    name = first.inner_text()
    first.click()
    expect(page.get_by_role("heading", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name=re.compile("^Mentioned in"))).to_be_visible()
    shot(page, "entity")


def test_forget_asks_first_and_the_unit_leaves_recall(page, data):
    sign_in(page, ADMIN_KEY)
    unit_id = data["ids"]["maya"]
    page.goto(f"/ui/banks/{BANK}/recall?query=Maya+dashboard+theme")
    results = page.get_by_test_id("recall-results")
    expect(results).to_contain_text("blue dashboard theme")
    expect(page.get_by_test_id("timings")).to_be_visible()
    shot(page, "recall")
    page.goto(f"/ui/banks/{BANK}/units/{unit_id}")
    page.get_by_role("link", name="Forget…").click()
    expect(page.get_by_role("heading", name="Forget this memory?")).to_be_visible()
    shot(page, "forget-confirm")
    page.get_by_label("Reason").fill("test: no longer true")
    page.get_by_role("button", name="Forget it").click()
    expect(page.get_by_role("status").first).to_contain_text("Forgotten")
    page.goto(f"/ui/banks/{BANK}/recall?query=Maya+dashboard+theme")
    expect(page.get_by_test_id("recall-summary")).to_be_visible()
    expect(page.get_by_test_id("recall-results")).not_to_contain_text("blue dashboard theme")
    page.goto(f"/ui/banks/{BANK}/units/{unit_id}")  # the tombstone
    expect(page.get_by_text("This memory was forgotten")).to_be_visible()


def test_a_member_never_sees_a_unit_it_may_not(page, data):
    secret = data["secret_text"]
    sign_in(page, data["carol"])  # its owner sees it
    page.goto(f"/ui/banks/{BANK}/units/{data['secret']}")
    expect(page.get_by_test_id("unit-text")).to_contain_text(secret)
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, data["bob"])
    for url in (f"/ui/banks/{BANK}", f"/ui/banks/{BANK}/units", f"/ui/banks/{BANK}/documents",
                f"/ui/banks/{BANK}/recall?query=vault+combination+plant",
                f"/ui/banks/{BANK}/entities", f"/ui/banks/{BANK}/dedup", "/ui/jobs",
                f"/ui/banks/{BANK}/units?q=vault"):
        page.goto(url)
        assert secret not in page.content(), url
    resp = page.goto(f"/ui/banks/{BANK}/units/{data['secret']}")
    assert resp.status == 404 and secret not in page.content()
    resp = page.goto(f"/ui/banks/{OTHER}")
    assert resp.status == 403
    resp = page.goto("/ui/access")  # not a deployment admin
    assert resp.status == 403
    page.goto(f"/ui/banks/{BANK}/units/{data['ids']['deploy']}")  # read role: no actions
    expect(page.get_by_role("button", name="Correct")).to_have_count(0)


def test_a_form_without_its_csrf_token_is_refused(page, data):
    sign_in(page, ADMIN_KEY)
    unit_id = data["ids"]["deploy"]
    url = f"/ui/banks/{BANK}/units/{unit_id}/forget"
    for form in ({"confirm": "yes"}, {"confirm": "yes", "csrf_token": "forged"}):
        r = page.request.post(url, form=form, max_redirects=0)
        assert r.status == 403, r.status
        assert "CSRF" in r.text()
    page.goto(f"/ui/banks/{BANK}/units/{unit_id}")  # still there
    expect(page.get_by_test_id("unit-text")).to_contain_text("deploy pipeline")
    r = page.request.post("/ui/signin", form={"api_key": ADMIN_KEY}, max_redirects=0)
    assert r.status == 403  # sign-in too (login CSRF)


def test_a_script_in_a_memory_is_shown_as_text(page, data):
    sign_in(page, ADMIN_KEY)
    for url in (f"/ui/banks/{BANK}/units/{data['ids']['script']}",
                f"/ui/banks/{BANK}/units?q=script", f"/ui/banks/{BANK}/recall?query=script"):
        page.goto(url)
        expect(page.get_by_text("<script>window.__pwned = 1</script>").first).to_be_visible()
        assert page.evaluate("window.__pwned") is None
        assert page.locator("script").count() == 1  # only app.js
    page.goto(f"/ui/banks/{BANK}/units/{data['ids']['script']}")
    expect(page.get_by_test_id("unit-text")).to_have_text(SCRIPT_TEXT)


def test_dedup_review_decides_from_the_keyboard(page, data):
    sign_in(page, ADMIN_KEY)
    page.goto(f"/ui/banks/{BANK}/dedup")
    left = int(page.get_by_test_id("proposals-left").inner_text())
    assert left >= 1
    first = page.locator("[data-first-proposal]")
    expect(first).to_contain_text("Rotate the Redis password")
    expect(first.locator("del")).to_have_text(["the"])  # the words that differ, marked
    expect(first.locator("ins")).to_have_text(["all"])
    shot(page, "dedup")
    page.keyboard.press("k")  # keep both, from the keyboard
    expect(page.get_by_role("status").first).to_contain_text("kept apart")
    expect(page.get_by_test_id("proposals-left")).to_have_text(str(left - 1))
    decided = page.get_by_test_id("dedup-decided")
    expect(decided.locator("tr", has_text="Rotate the Redis")).to_contain_text("kept")
    expect(decided.locator("tr", has_text="Rotate the Redis")).to_contain_text("admin")


def test_dedup_cluster_is_one_decision_and_bulk_decisions(page, data, web_app):
    from tests.access.conftest import ADMIN

    api = web_app.test_client()
    texts = ["Backups of the billing database run nightly at two in the morning.",
             "Backups of the billing database run nightly at two in the morning.",  # again: another document
             "Backups of the billing database run nightly, at two in the morning.",
             "The lobby printer jams when duplex printing is on for long reports.",
             "The lobby printer jams when duplex printing is on for longer reports."]
    r = api.post(f"/v1/default/banks/{BANK}/memories", json={"items": [
        {"content": t, "document_id": f"bulk-{i}"} for i, t in enumerate(texts)],
        "async": False}, headers=ADMIN)
    assert r.get_json()["state"] == "succeeded", r.get_json()
    assert api.post(f"/v1/default/banks/{BANK}/dedup-proposals/scan",
                    headers=ADMIN).status_code == 200
    sign_in(page, ADMIN_KEY)
    page.goto(f"/ui/banks/{BANK}/dedup")
    left = int(page.get_by_test_id("proposals-left").inner_text())
    backups = page.get_by_test_id("proposal").filter(has_text="Backups of the billing")
    expect(backups).to_have_count(1)  # three near-identical memories: one decision
    expect(backups.get_by_role("heading")).to_contain_text("Cluster of 3")
    expect(backups.locator("li")).to_have_count(3)
    printer = page.get_by_test_id("proposal").filter(has_text="lobby printer")
    expect(printer).to_have_count(1)
    backups.get_by_role("checkbox").check()
    printer.get_by_role("checkbox").check()
    shot(page, "dedup-cluster")
    page.get_by_role("button", name="Keep the ticked apart").click()
    expect(page.get_by_role("status").first).to_contain_text("2 proposals kept apart")
    expect(page.get_by_test_id("proposals-left")).to_have_text(str(left - 2))
    expect(page.get_by_test_id("proposal").filter(has_text="lobby printer")).to_have_count(0)
    states = api.get(f"/v1/default/banks/{BANK}/dedup-proposals?state=kept&limit=100",
                     headers=ADMIN).get_json()["proposals"]
    kept = [p for p in states if "lobby printer" in p["unit_a"]["text"]
            or "Backups of the billing" in p["unit_a"]["text"]]
    assert len(kept) == 2 and {p["decided_by"] for p in kept} == {"admin"}, kept


def test_a_job_is_watched_until_it_succeeds(page, data, web_app):
    from tests.access.conftest import ADMIN

    r = web_app.test_client().post(f"/v1/default/banks/{BANK}/memories", json={"items": [
        {"content": "The on-call rotation changes every Monday at nine.",
         "document_id": "oncall"}], "async": True}, headers=ADMIN)
    assert r.status_code == 200, r.get_json()
    op = r.get_json()["operation_id"]
    sign_in(page, ADMIN_KEY)
    page.goto(f"/ui/banks/{BANK}/jobs/{op}")
    expect(page.get_by_test_id("job-state")).to_have_text("succeeded", timeout=120_000)
    shot(page, "job")
    expect(page.get_by_test_id("job-counts")).to_contain_text("units created")

    r = web_app.test_client().post(  # a file that cannot be converted: a failed job
        f"/v1/default/banks/{BANK}/files/retain", headers=ADMIN,
        data={"files": [(io.BytesIO(b"%PDF-1.4 this is not really a pdf"), "broken.pdf")]},
        content_type="multipart/form-data")
    assert r.status_code == 200, r.get_json()
    failed = r.get_json()["operation_ids"][0]
    page.goto(f"/ui/banks/{BANK}/jobs/{failed}")
    expect(page.get_by_test_id("job-state")).to_have_text("failed", timeout=120_000)
    expect(page.get_by_test_id("job-error")).to_contain_text("broken.pdf: cannot convert")
    # what the extract stage keeps when the LLM's reply does not parse (written here as the
    # stage writes it: no LLM is configured in these tests)
    svc = web_app.extensions["rcll"]
    from rcll.store import item_errors

    with svc.pool.connection() as conn, conn.transaction():
        item_errors.add(conn, failed, "extract", "LLMInvalidReply: reply is not valid JSON",
                        item_index=0, unit_id=data["ids"]["deploy"],
                        raw_reply='{"facts": [<b>unterminated')
    page.reload()
    errors = page.get_by_test_id("item-errors")
    expect(errors).to_contain_text("LLMInvalidReply")
    errors.locator("summary").first.click()
    expect(page.get_by_test_id("raw-reply")).to_have_text('{"facts": [<b>unterminated')
    shot(page, "job-failed")
    page.goto(f"/ui/jobs?bank_id={BANK}")
    expect(page.get_by_test_id("job-state").first).to_be_visible()
    expect(page.locator("table")).to_contain_text("failed")
    shot(page, "jobs")


def test_access_screen_shows_a_new_key_once(page, data):
    dave = f"dave-{uuid.uuid4().hex[:6]}"  # the suite shares one database (an 'hm-dave' too)
    sign_in(page, ADMIN_KEY)
    page.goto("/ui/access")
    page.get_by_label("Member id").fill(dave)
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").first).to_contain_text("Member created")
    page.get_by_label("Label").last.fill("laptop")
    page.locator("tr", has_text=dave).get_by_role("button", name="Issue key").click()
    key = page.get_by_test_id("new-key").inner_text()
    assert key.startswith("rcll_")
    page.get_by_test_id("new-key").evaluate(  # no working-looking key in a committed image
        "el => el.textContent = 'rcll_0123456789ab_' + 'x'.repeat(43)")
    shot(page, "access")
    page.goto("/ui/access")
    assert key not in page.content()  # shown once
    page.goto(f"/ui/banks/{BANK}/access")
    expect(page.get_by_role("heading", name=f"Grants on {BANK}")).to_be_visible()
    page.get_by_label("Member id").fill(dave)
    page.get_by_label("Role").select_option("read")
    page.get_by_role("button", name="Set grant").click()
    expect(page.get_by_role("status").first).to_contain_text("Grant set")
    expect(page.locator("table").first).to_contain_text(dave)
    expect(page.locator("table").last).to_contain_text("grant.set")  # the audit log
    shot(page, "bank-access")
    page.get_by_role("button", name=f"Revoke the grant of {dave}").click()
    expect(page.get_by_role("status").first).to_contain_text("Grant revoked")
    expect(page.locator("table").first).not_to_contain_text(dave)


def test_auth_off_shows_the_banner_and_needs_no_sign_in(client):
    r = client.get("/ui/banks")
    assert r.status_code == 200
    assert b"Authentication is OFF" in r.data
    assert client.get("/").status_code == 302
    assert client.get("/admin").headers["Location"] == "/ui/access"


def test_correct_is_revision_checked_and_supersede_opens_the_new_memory(page, data):
    sign_in(page, data["carol"])  # write role
    unit_id = data["secret"]
    page.goto(f"/ui/banks/{BANK}/units/{unit_id}")
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    page.get_by_label(re.compile("Correct the text")).fill(
        "Carol's private note: the vault combination is under the plant (corrected).")
    page.get_by_role("button", name="Correct", exact=True).click()
    expect(page.get_by_role("status").first).to_contain_text("Corrected")
    expect(page.get_by_label(re.compile("Correct the text"))).to_be_visible()
    assert "revision 2" in page.content()
    expect(page.get_by_test_id("revisions")).to_contain_text("under the plant.")  # revision 1
    page.get_by_role("button", name="It helped").click()
    expect(page.get_by_test_id("feedback")).to_contain_text("1 helped")
    stale = page.request.post(f"/ui/banks/{BANK}/units/{unit_id}/correct", max_redirects=0,
                              form={"csrf_token": token, "revision": "1", "text": "stale"})
    assert stale.status == 409 and "revision_conflict" in stale.text()
    page.get_by_label("Supersede with a new memory").fill(
        "Carol's private note: the vault moved to the safe.")
    page.get_by_role("button", name="Supersede").click()
    expect(page.get_by_test_id("unit-text")).to_have_text(
        "Carol's private note: the vault moved to the safe.")
    page.goto(f"/ui/banks/{BANK}/units/{unit_id}")
    expect(page.get_by_text("Superseded by")).to_be_visible()


def test_revoking_the_key_ends_its_web_session(page, data, web_app):
    from tests.access.conftest import ADMIN

    api = web_app.test_client()
    key = make_member(api, "erin", BANK, "read")
    sign_in(page, key)
    expect(page.get_by_test_id("member")).to_have_text("erin")
    key_id = api.get("/members/erin/keys", headers=ADMIN).get_json()
    key_id = (key_id["keys"] if isinstance(key_id, dict) else key_id)[0]["key_id"]
    assert api.delete(f"/keys/{key_id}", headers=ADMIN).status_code == 200
    page.goto(f"/ui/banks/{BANK}")
    expect(page).to_have_url(re.compile(r"/ui/signin"))


def test_a_document_is_deleted_after_its_confirmation(page, data, web_app):
    from tests.access.conftest import ADMIN

    r = web_app.test_client().post(f"/v1/default/banks/{BANK}/memories", json={"items": [
        {"content": "Scratch note: the plotter on floor two is out of paper.",
         "document_id": "scratch"}], "async": False}, headers=ADMIN)
    assert r.get_json()["state"] == "succeeded", r.get_json()
    sign_in(page, ADMIN_KEY)
    page.goto(f"/ui/banks/{BANK}/documents/scratch")
    expect(page.locator("ol.doc-units")).to_contain_text("plotter on floor two")
    page.get_by_role("button", name="Delete document…").click()
    expect(page.get_by_role("alert")).to_contain_text("Delete this document")
    page.get_by_role("button", name="Delete it").click()
    expect(page.get_by_role("status").first).to_contain_text("Document deleted (1 units)")
    expect(page.locator("table")).not_to_contain_text("scratch")
    assert page.goto(f"/ui/banks/{BANK}/documents/scratch").status == 404


def test_merge_two_entities_then_split_one_off(page, data, web_app):
    from tests.access.conftest import ADMIN

    api = web_app.test_client()
    r = api.post(f"/v1/default/banks/{BANK}/memories", json={"items": [
        {"content": "Priya Raman leads the billing migration this quarter.",
         "document_id": "ent-1"},
        {"content": "The invoice schema was reviewed by Priya with the finance team.",
         "document_id": "ent-2"}], "async": False}, headers=ADMIN)
    assert r.get_json()["state"] == "succeeded", r.get_json()
    ents = api.get(f"/v1/default/banks/{BANK}/entities?q=priya", headers=ADMIN).get_json()
    names = {e["name"].lower(): e["id"] for e in ents["entities"]}
    assert {"priya", "priya raman"} <= set(names), names
    proposals = api.get(f"/v1/default/banks/{BANK}/entities/merge-proposals?state=open",
                        headers=ADMIN).get_json()["proposals"]
    assert any({p["entity_a"]["id"], p["entity_b"]["id"]} == set(names.values())
               for p in proposals)  # "one name starts the other": proposed, not merged

    sign_in(page, ADMIN_KEY)
    page.goto(f"/ui/banks/{BANK}/entities")
    left = int(page.get_by_test_id("entity-proposals-left").inner_text())
    expect(page.get_by_test_id("entity-proposals")).to_contain_text("Priya Raman")
    shot(page, "entities")
    row = page.get_by_test_id("entity-proposals").locator("tr", has_text="Priya Raman")
    row.get_by_role("button", name=re.compile("^Keep .* apart$")).click()
    expect(page.get_by_role("status").first).to_contain_text("Proposal rejected")
    expect(page.get_by_test_id("entity-proposals-left")).to_have_text(str(left - 1))
    expect(page.get_by_test_id("entity-proposals-decided")).to_contain_text("rejected")

    # a person merges them anyway: tick both, keep "Priya Raman"
    page.goto(f"/ui/banks/{BANK}/entities?q=priya")
    for e_id in names.values():
        page.locator(f"#m-{e_id}").check()
    page.get_by_role("radio", name="Keep Priya Raman").check()
    shot(page, "entities-merge")
    page.get_by_role("button", name="Merge the ticked entities").click()
    expect(page.get_by_role("status").first).to_contain_text("Merged 2 entities into Priya Raman")
    expect(page.get_by_role("heading", name="Priya Raman", exact=True)).to_be_visible()
    mentions = page.get_by_test_id("mentions").locator("li")
    expect(mentions).to_have_count(2)
    expect(page.get_by_test_id("entity-history")).to_contain_text("merge")
    kept = page.url.rsplit("/", 1)[1]
    assert kept == names["priya raman"]
    after = api.get(f"/v1/default/banks/{BANK}/entities/{names['priya']}", headers=ADMIN)
    assert after.status_code == 404  # the other one is gone into the kept one (no mention left)
    listed = api.get(f"/v1/default/banks/{BANK}/entities?q=priya", headers=ADMIN).get_json()
    assert [e["id"] for e in listed["entities"]] == [kept]
    shot(page, "entity-merged")

    # split the invoice mention back off as its own entity
    mentions.filter(has_text="invoice schema").get_by_role("checkbox").check()
    page.get_by_label(re.compile("^Name of the new entity")).fill("Priya Nair")
    page.get_by_role("button", name="Split off the ticked mentions").click()
    expect(page.get_by_role("status").first).to_contain_text("Split off as Priya Nair")
    expect(page.get_by_role("heading", name="Priya Nair", exact=True)).to_be_visible()
    expect(page.get_by_test_id("mentions").locator("li")).to_have_count(1)
    expect(page.get_by_test_id("mentions")).to_contain_text("invoice schema")
    shot(page, "entity-split")
    page.goto(f"/ui/banks/{BANK}/entities/{kept}")
    expect(page.get_by_test_id("mentions").locator("li")).to_have_count(1)
    expect(page.get_by_test_id("mentions")).to_contain_text("billing migration")
    log = api.get(f"/banks/{BANK}/audit?limit=20", headers=ADMIN).get_json()
    actions = [e["action"] for e in (log["entries"] if isinstance(log, dict) else log)]
    assert {"entity.merge", "entity.split", "entity.proposal_reject"} <= set(actions), actions


def test_entity_screens_are_read_only_for_a_reader_and_hide_unseen_units(page, data, web_app):
    api = web_app.test_client()
    r = api.post(f"/banks/{BANK}/units", json={  # carol's own; bob may not see it
        "text": "The spare badge is kept by Zephyrine Okafor in the locked drawer.",
        "audience": data["carol_id"]}, headers={"Authorization": f"Bearer {data['carol']}"})
    assert r.status_code == 201, r.get_json()
    hidden = r.get_json()["id"]
    sign_in(page, data["carol"])  # the owner finds the entity and the unit
    page.goto(f"/ui/banks/{BANK}/entities?q=zephyrine")
    link = page.get_by_role("link", name="Zephyrine Okafor")
    href = link.get_attribute("href")
    link.click()
    expect(page.get_by_test_id("mentions")).to_contain_text("spare badge")
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, data["bob"])
    page.goto(f"/ui/banks/{BANK}/entities?q=zephyrine")
    expect(page.get_by_role("link", name="Zephyrine Okafor")).to_have_count(0)
    assert page.goto(href).status == 404
    for url in (f"/ui/banks/{BANK}/entities", href):
        page.goto(url)
        assert "spare badge" not in page.content() and hidden not in page.content(), url
    page.goto(f"/ui/banks/{BANK}/entities")
    expect(page.get_by_role("button", name="Merge the ticked entities")).to_have_count(0)
    expect(page.get_by_role("button", name="Merge")).to_have_count(0)
    r = page.request.post(f"/ui/banks/{BANK}/entities/merge", max_redirects=0, form={
        "csrf_token": page.locator("input[name=csrf_token]").first.get_attribute("value"),
        "entity_ids": ["a", "b"]})
    assert r.status == 403, r.status
