"""Hindsight's directives on RCLL (issue 25): list, create, read, change and delete through
the HTTP routes and the real ``hindsight-client`` 1.1.0 (each answer parsed by the model
the client declares), bad input refused with a 4xx, ``admin`` to write and ``read`` to
read; and what they do — the reflect prompt the model receives (the scripted stand-in at
the litellm boundary records it) carries the active directives in scope, highest priority
first, and none of the inactive or out-of-scope ones."""

from __future__ import annotations

import json
import time

import pytest

from tests.access.conftest import (  # noqa: F401  (fixtures)
    ADMIN,
    auth_app,
    auth_services,
    auth_settings,
    bearer,
    enqueued,
    make_member,
    share_models,
)
from tests.conftest import serving

hindsight_client = pytest.importorskip("hindsight_client")
from hindsight_client import Hindsight  # noqa: E402
from hindsight_client.hindsight_client import _run_async  # noqa: E402
from hindsight_client_api import models as M  # noqa: E402
from hindsight_client_api.exceptions import ApiException  # noqa: E402

B = "/v1/default/banks/{}"


def make(client, bank: str, headers=None, **fields) -> dict:
    r = client.post(B.format(bank) + "/directives", json=fields, headers=headers or {})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def names(page: dict) -> list[str]:
    return [d["name"] for d in page["items"]]


# -- the routes ----------------------------------------------------------------------------

def test_directives_listed_by_priority_filtered_changed_and_deleted(client, services):
    bank = "dir-crud"
    client.delete(B.format(bank))
    first = make(client, bank, name="formal", content="Answer in formal English.")
    assert (first["priority"], first["is_active"], first["tags"], first["bank_id"]) == (
        0, True, [], bank)
    assert first["created_at"] and first["updated_at"]
    make(client, bank, name="privacy", content="Never reveal personal data.", priority=10)
    make(client, bank, name="ops-only", content="Cite the runbook.", priority=5, tags=["ops"])
    make(client, bank, name="fin-only", content="Quote amounts in EUR.", priority=7,
         tags=["finance", "eu"])
    make(client, bank, name="off", content="Shout.", priority=99, is_active=False)

    every = client.get(B.format(bank) + "/directives").get_json()
    # active only by default, highest priority first, then oldest
    assert names(every) == ["privacy", "fin-only", "ops-only", "formal"]
    assert (every["total"], every["limit"], every["offset"]) == (4, 100, 0)
    assert names(client.get(B.format(bank) + "/directives?active_only=false").get_json()) == [
        "off", "privacy", "fin-only", "ops-only", "formal"]
    # a tag filter keeps the global ones and the tagged ones in scope
    assert names(client.get(B.format(bank) + "/directives?tags=ops").get_json()) == [
        "privacy", "ops-only", "formal"]
    assert names(client.get(
        B.format(bank) + "/directives?tags=finance&tags=eu&tags_match=all").get_json()) == [
        "privacy", "fin-only", "formal"]
    assert names(client.get(
        B.format(bank) + "/directives?tags=finance&tags_match=exact").get_json()) == [
        "privacy", "formal"]
    assert names(client.get(
        B.format(bank) + "/directives?tags=finance&tags=ops&tags_match=any").get_json()) == [
        "privacy", "fin-only", "ops-only", "formal"]
    page = client.get(B.format(bank) + "/directives?limit=2&offset=1").get_json()
    assert (names(page), page["total"]) == (["fin-only", "ops-only"], 4)

    # PATCH: null leaves a field, tags [] makes it global
    d = first["id"]
    out = client.patch(B.format(bank) + f"/directives/{d}", json={
        "name": None, "content": "Answer in formal British English.", "priority": 20,
        "is_active": None, "tags": None})
    assert out.status_code == 200, out.get_json()
    body = out.get_json()
    assert (body["name"], body["content"], body["priority"], body["is_active"], body["tags"]) == (
        "formal", "Answer in formal British English.", 20, True, [])
    assert body["updated_at"] > first["updated_at"]
    ops = next(x for x in every["items"] if x["name"] == "ops-only")
    assert client.patch(B.format(bank) + f"/directives/{ops['id']}",
                        json={"tags": []}).get_json()["tags"] == []
    assert client.get(B.format(bank) + f"/directives/{d}").get_json()["priority"] == 20

    assert client.delete(B.format(bank) + f"/directives/{d}").get_json() == {"status": "deleted"}
    gone = client.get(B.format(bank) + f"/directives/{d}")
    assert (gone.status_code, gone.get_json()["error"]["code"]) == (404, "directive_not_found")
    again = client.delete(B.format(bank) + f"/directives/{d}")
    assert again.status_code == 404

    with services.pool.connection() as conn:
        actions = [r["action"] for r in conn.execute(
            "SELECT action FROM audit_log WHERE bank_id = %s AND action LIKE 'directive.%%' "
            "ORDER BY id", (bank,)).fetchall()]
        details = conn.execute(
            "SELECT details FROM audit_log WHERE bank_id = %s AND action = 'directive.update' "
            "ORDER BY id LIMIT 1", (bank,)).fetchone()["details"]
    assert actions == ["directive.create"] * 5 + ["directive.update"] * 2 + ["directive.delete"]
    assert details["fields"] == ["content", "priority"] and "content" not in details

    # deleting the bank deletes its directives
    assert client.delete(B.format(bank)).status_code == 200
    with services.pool.connection() as conn:
        left = conn.execute("SELECT count(*) AS n FROM directives WHERE bank_id = %s",
                            (bank,)).fetchone()["n"]
    assert left == 0


def test_bad_directive_input_is_a_4xx(client):
    bank = "dir-bad"
    ok = make(client, bank, name="n", content="c")
    url = B.format(bank) + "/directives"
    for body in ({}, {"name": "n"}, {"content": "c"}, {"name": "", "content": "c"},
                 {"name": "  ", "content": "c"}, {"name": "n", "content": "\u200b"},
                 {"name": "n", "content": "c", "priority": "5"},
                 {"name": "n", "content": "c", "priority": 1.5},
                 {"name": "n", "content": "c", "priority": 10**12},
                 {"name": "n", "content": "c", "is_active": 1},
                 {"name": "n", "content": "c", "tags": "ops"},
                 {"name": "n", "content": "c", "tags": [""]},
                 {"name": "n", "content": "c", "tags": ["x" * 201]},
                 {"name": "n", "content": "c", "colour": "red"},
                 {"name": "n\u0000", "content": "c"}, {"name": "x" * 257, "content": "c"}):
        r = client.post(url, json=body)
        assert r.status_code == 400, (body, r.get_json())
        assert r.get_json()["error"]["code"] == "invalid_request"
    assert client.post(url, data="{", content_type="application/json").status_code == 400
    for query in ("tags_match=some", "active_only=maybe", "limit=0", "limit=1001",
                  "offset=-1"):
        r = client.get(f"{url}?{query}")
        assert r.status_code == 400, (query, r.get_json())
    for bad in ({"priority": "high"}, {"is_active": "yes"}, {"name": ""}, {"tags": [""]},
                {"unknown": 1}):
        r = client.patch(f"{url}/{ok['id']}", json=bad)
        assert r.status_code == 400, (bad, r.get_json())
    for missing in ("not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        for method in ("GET", "PATCH", "DELETE"):
            r = client.open(f"{url}/{missing}", method=method,
                            json={"name": "x"} if method == "PATCH" else None)
            assert (r.status_code, r.get_json()["error"]["code"]) == (404, "directive_not_found")
    # another bank's directive is not found in this one
    other = make(client, "dir-bad-other", name="n", content="c")
    assert client.get(f"{url}/{other['id']}").status_code == 404
    r = client.get(B.format("dir-never-made") + "/directives")
    assert (r.status_code, r.get_json()["error"]["code"]) == (404, "bank_not_found")
    # nothing of the refused ones was stored
    assert client.get(url + "?active_only=false").get_json()["total"] == 1


def test_directive_roles_admin_writes_read_lists(auth_app):  # noqa: F811
    api = auth_app.test_client()
    bank = "dir-roles"
    tag = str(time.monotonic_ns())[-6:]
    admin_key = make_member(api, f"da{tag}", bank, "admin")
    writer_key = make_member(api, f"dw{tag}", bank, "write")
    reader_key = make_member(api, f"dr{tag}", bank, "read")
    stranger_key = make_member(api, f"ds{tag}")
    A, W, R, S = (bearer(k) for k in (admin_key, writer_key, reader_key, stranger_key))
    d = make(api, bank, headers=A, name="rule", content="Be brief.")
    url = B.format(bank) + "/directives"
    for who in (A, W, R):
        assert api.get(url, headers=who).get_json()["total"] == 1
        assert api.get(f"{url}/{d['id']}", headers=who).status_code == 200
    for who in (W, R):
        for method, path, body in (("POST", url, {"name": "x", "content": "y"}),
                                   ("PATCH", f"{url}/{d['id']}", {"priority": 3}),
                                   ("DELETE", f"{url}/{d['id']}", None)):
            r = api.open(path, method=method, json=body, headers=who)
            assert (r.status_code, r.get_json()["error"]["code"]) == (403, "forbidden"), method
    for method, path in (("GET", url), ("GET", f"{url}/{d['id']}"), ("POST", url),
                         ("DELETE", f"{url}/{d['id']}")):
        r = api.open(path, method=method, json={"name": "x", "content": "y"}, headers=S)
        assert r.status_code == 403
    assert api.get(url, headers={}).status_code == 401
    # nothing changed; the admin's own changes go through
    assert api.get(f"{url}/{d['id']}", headers=R).get_json()["priority"] == 0
    assert api.patch(f"{url}/{d['id']}", json={"priority": 3}, headers=A).status_code == 200
    entry = api.get(B.format(bank) + "/audit-logs?action=directive.create",
                    headers=ADMIN).get_json()["items"][0]
    assert entry["actor"] == f"da{tag}"
    assert api.get(f"{url}/{d['id']}", headers=A).get_json()["created_by"] == f"da{tag}"


# -- through the real hindsight-client -----------------------------------------------------

@pytest.fixture(scope="module")
def hs(app):
    with serving(app, "hs-directives") as url:
        yield Hindsight(base_url=url, timeout=60)


def test_hindsight_client_directive_methods(hs, client):
    bank = "dir-client"
    client.delete(B.format(bank))
    made = hs.create_directive(bank, name="tone", content="Be kind.", priority=3,
                               tags=["support"])
    assert isinstance(made, M.DirectiveResponse)
    assert (made.name, made.priority, made.is_active, made.tags) == ("tone", 3, True, ["support"])
    hs.create_directive(bank, name="global", content="No secrets.", priority=9)
    hs.create_directive(bank, name="paused", content="x", is_active=False)
    listed = hs.list_directives(bank)
    assert isinstance(listed, M.DirectiveListResponse)
    assert [d.name for d in listed.items] == ["global", "tone"] and listed.total == 2
    scoped = _run_async(hs.directives.list_directives(bank, tags=["billing"],
                                                      tags_match="any_strict",
                                                      active_only=False, limit=10))
    assert [d.name for d in scoped.items] == ["global", "paused"] and scoped.limit == 10
    one = hs.get_directive(bank, made.id)
    assert isinstance(one, M.DirectiveResponse) and one.content == "Be kind."
    changed = hs.update_directive(bank, made.id, content="Be very kind.", is_active=False)
    assert (changed.content, changed.is_active, changed.priority, changed.tags) == (
        "Be very kind.", False, 3, ["support"])
    hs.delete_directive(bank, made.id)
    with pytest.raises(ApiException) as err:
        hs.get_directive(bank, made.id)
    assert err.value.status == 404
    with pytest.raises(ApiException) as err:
        _run_async(hs.directives.list_directives(bank, tags_match="sometimes"))
    assert err.value.status == 400


# -- what they do: the reflect prompt ------------------------------------------------------

@pytest.fixture(scope="module")
def llm_served(settings, services, tmp_path_factory):
    """An app whose LLM is the scripted stand-in (``rcll-replay``) recording every prompt,
    served over HTTP for the real client; ``(app, Hindsight client, script path)``."""
    from api.app import create_app
    from rcll.bootstrap import Services

    path = tmp_path_factory.mktemp("replay-dir") / "replay.json"
    path.write_text(json.dumps({"record": True, "default": "empty", "scripts": [
        {"match": "Question: ", "replies": [{"json": {"answer": "Kestrel owns the boat.",
                                                      "used": [1]}}]}]}))
    s = settings.model_copy(update={"llm_provider": "litellm", "llm_model": "rcll-replay/dir",
                                    "llm_replay_path": path, "llm_backoff_s": 0.01,
                                    "llm_max_retries": 0})
    svc = share_models(Services(s), services)
    app = create_app(settings=s, services=svc, enqueue=lambda *_: None)
    with serving(app, "hs-dir-llm") as url:
        yield app, Hindsight(base_url=url, timeout=60), path
    svc.close()


def _last_prompt(path, query: str) -> tuple[str, str]:
    from rcll.llm.replay import recorded_calls

    calls = [c for c in recorded_calls(path) if f"Question: {query}" in c["messages"][-1]["content"]]
    assert calls, f"no LLM call for {query!r}"
    msgs = calls[-1]["messages"]
    return msgs[0]["content"], msgs[-1]["content"]


def _directive_lines(system: str) -> list[str]:
    from rcll.llm.prompts import DIRECTIVES_CLOSE, DIRECTIVES_OPEN

    if DIRECTIVES_OPEN not in system:
        return []
    inner = system.split(DIRECTIVES_OPEN, 1)[1].split(DIRECTIVES_CLOSE, 1)[0]
    return [ln for ln in inner.splitlines() if ln.strip()]


def test_reflect_prompt_carries_active_directives_in_scope_by_priority(llm_served):
    app, hs, path = llm_served
    c = app.test_client()
    bank = "dir-reflect"
    c.delete(B.format(bank))
    r = c.post(B.format(bank) + "/memories", json={"async": False, "items": [
        {"content": "Kestrel owns the blue boat in the harbour.", "document_id": "boat",
         "tags": ["ops"]}]})
    assert r.status_code == 200, r.get_json()
    ids = {}
    for name, content, priority, active, tags in (
            ("brief", "Answer in at most two sentences.", 10, True, []),
            ("sources", "Name the memory each claim rests on.", 5, True, []),
            ("runbook", "Point to the ops runbook.", 7, True, ["ops"]),
            ("shout", "ANSWER IN CAPITALS.", 100, False, []),
            ("euro", "Quote amounts in euros.", 50, True, ["finance"]),
            ("ops-eu", "Mention the EU on-call rota.", 8, True, ["ops", "eu"])):
        ids[name] = make(c, bank, name=name, content=content, priority=priority,
                         is_active=active, tags=tags)["id"]

    # tags ["ops"], any: the global ones and the ops ones, highest priority first
    out = hs.reflect(bank, "Who owns the boat?", tags=["ops"], include_facts=True)
    assert out.text == "Kestrel owns the boat."
    system, user = _last_prompt(path, "Who owns the boat?")
    assert _directive_lines(system) == [
        "1. brief: Answer in at most two sentences.", "2. ops-eu: Mention the EU on-call rota.",
        "3. runbook: Point to the ops runbook.", "4. sources: Name the memory each claim rests on."]
    assert "CAPITALS" not in system + user and "euros" not in system + user
    assert "obey all 4 directives" in user
    assert [d.name for d in out.based_on.directives] == ["brief", "ops-eu", "runbook", "sources"]
    assert [d.id for d in out.based_on.directives][0] == ids["brief"]

    # all_strict over ["ops", "eu"]: only a directive holding both tags, besides the global
    hs.reflect(bank, "Who owns it in the EU?", tags=["ops", "eu"], tags_match="all_strict")
    system, _ = _last_prompt(path, "Who owns it in the EU?")
    assert [ln.split(":")[0] for ln in _directive_lines(system)] == [
        "1. brief", "2. ops-eu", "3. sources"]

    # no tags: the global ones only (a tagged directive never leaks into an untagged reflect)
    r = c.post(B.format(bank) + "/reflect", json={"query": "Who owns a boat?"})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["directives_applied"] == [ids["brief"], ids["sources"]]
    system, _ = _last_prompt(path, "Who owns a boat?")
    assert [ln.split(":")[0] for ln in _directive_lines(system)] == ["1. brief", "2. sources"]

    # apply_all_directives: every active one, tags aside; still not the inactive one
    hs.reflect(bank, "Whose boat is blue?", apply_all_directives=True)
    system, _ = _last_prompt(path, "Whose boat is blue?")
    assert [ln.split(":")[0] for ln in _directive_lines(system)] == [
        "1. euro", "2. brief", "3. ops-eu", "4. runbook", "5. sources"]
    assert "CAPITALS" not in system

    # a change is seen by the next reflect: deactivated, reprioritised, deleted
    c.patch(B.format(bank) + f"/directives/{ids['brief']}", json={"is_active": False})
    c.patch(B.format(bank) + f"/directives/{ids['sources']}", json={"priority": 60})
    c.delete(B.format(bank) + f"/directives/{ids['euro']}")
    hs.reflect(bank, "Is the boat blue?", apply_all_directives=True)
    system, _ = _last_prompt(path, "Is the boat blue?")
    assert [ln.split(":")[0] for ln in _directive_lines(system)] == [
        "1. sources", "2. ops-eu", "3. runbook"]

    # a bank without directives: the prompt has no directive section
    c.post(B.format("dir-reflect-none") + "/memories", json={"async": False, "items": [
        {"content": "Nobody owns the red boat."}]})
    hs.reflect("dir-reflect-none", "Who owns the red boat?")
    system, user = _last_prompt(path, "Who owns the red boat?")
    assert _directive_lines(system) == [] and "directive" not in (system + user).lower()


# -- migration 0029 ------------------------------------------------------------------------

def test_migration_0029_up_and_down(settings):
    import psycopg
    from alembic import command

    from rcll.dev import postgres
    from rcll.store import migrate

    db = "rcll_mig29"
    postgres.create_database(settings, db, drop=True)
    url = f"postgresql://rcll@127.0.0.1:{settings.pg_port}/{db}"
    migrate.upgrade(settings, url, "0029")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO memory_banks (id, name) VALUES ('m', 'm')")
        conn.execute("INSERT INTO directives (bank_id, name, content) VALUES ('m', 'n', 'c')")
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO llm_requests (bank_id, status, outcome, started_at, "
                         "ended_at, duration_ms) VALUES ('m', 'maybe', 'ok', now(), now(), 1)")
        conn.execute("DELETE FROM memory_banks WHERE id = 'm'")
        assert conn.execute("SELECT count(*) FROM directives").fetchone()[0] == 0
    command.downgrade(migrate.alembic_config(url), "0026")
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute("SELECT to_regclass('directives'), to_regclass('llm_requests')"
                              ).fetchone()
    assert tables == (None, None)
