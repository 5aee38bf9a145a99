"""Issue 25: bank aliases (Hindsight's ``…/aliases``). An alias reaches its bank on every
bank-scoped route (resolved once, before the access check); it never shadows a bank id,
in either order; the real ``hindsight-client`` 1.1.0 calls the family over HTTP; a change
is seen by its process at once and by another within ``RCLL_BANK_ALIAS_CACHE_S``."""

from __future__ import annotations

import time

import psycopg
import pytest

from rcll.bootstrap import Services
from rcll.retain.models import RetainItem
from rcll.retain.submit import submit_retain
from tests.access.conftest import (  # noqa: F401 (fixtures)
    ADMIN,
    api,
    auth_app,
    auth_services,
    auth_settings,
    bearer,
    enqueued,
    make_member,
)
from tests.conftest import db_counts, serving

hs_models = pytest.importorskip("hindsight_client_api.models")


def _retain(client, bank: str, text: str, doc: str) -> dict:
    r = client.post(f"/v1/default/banks/{bank}/memories",
                    json={"async": False, "items": [{"content": text, "document_id": doc}]})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def _banks_named(services, *ids: str) -> set[str]:
    with services.pool.connection() as conn:
        return {r["id"] for r in conn.execute(
            "SELECT id FROM memory_banks WHERE id = ANY(%s)", (list(ids),)).fetchall()}


def test_an_alias_reaches_its_bank_on_every_bank_scoped_route(client, services):
    bank, alias = "alias-home", "team+kestrel ops@example.com"
    client.delete(f"/v1/default/banks/{bank}")
    _retain(client, bank, "Kestrel: the night shift hands over at 06:00.", "handover")
    r = client.post(f"/v1/default/banks/{bank}/aliases", json={"alias": alias})
    assert r.status_code == 201, r.get_json()
    body = r.get_json()
    assert body == {"bank_id": bank, "aliases": [{"alias": alias, "primary": False}]}
    hs_models.BankAliasesResponse.from_dict(body)  # Hindsight's model reads it

    quoted = alias.replace("@", "%40").replace(" ", "%20").replace("+", "%2B")
    # a read, a recall, a write, a list and the family itself, each by the alias
    profile = client.get(f"/v1/default/banks/{quoted}/profile")
    assert profile.status_code == 200 and profile.get_json()["bank_id"] == bank
    hits = client.post(f"/v1/default/banks/{quoted}/memories/recall",
                       json={"query": "When does the night shift hand over?"}).get_json()
    assert "06:00" in hits["results"][0]["text"]
    before = db_counts(services, bank)["units"]
    wrote = _retain(client, quoted, "Kestrel: the radio check is at 06:15.", "radio")
    assert wrote["bank_id"] == bank  # answers name the bank's own id
    assert db_counts(services, bank)["units"] == before + 1
    assert _banks_named(services, alias) == set()  # no bank was made under the alias
    docs = client.get(f"/v1/default/banks/{quoted}/documents").get_json()
    assert {d["id"] for d in docs["items"]} == {"handover", "radio"}
    assert client.get(f"/v1/default/banks/{quoted}/aliases").get_json() == body
    ops = client.get(f"/v1/default/banks/{quoted}/operations").get_json()
    assert ops["bank_id"] == bank and ops["total"] == 2
    # MCP: a tool's bank_id is resolved the same way
    from mcp_server import server

    rt = server.Runtime(services=services, retain=services.retain_service(lambda *_: None))
    assert rt.bank(alias) == bank
    rt_default = server.Runtime(services=services, retain=rt.retain, default_bank=alias)
    assert rt_default.bank(None) == bank


def test_an_alias_never_shadows_a_bank(client, services):
    for b in ("shadow-a", "shadow-b"):
        client.delete(f"/v1/default/banks/{b}")
        assert client.put(f"/v1/default/banks/{b}", json={}).status_code in (200, 201)
    # the name of a bank
    r = client.post("/v1/default/banks/shadow-a/aliases", json={"alias": "shadow-b"})
    assert r.status_code == 409 and r.get_json()["error"]["code"] == "bank_alias_taken"
    # an alias of this bank or of another one
    assert client.post("/v1/default/banks/shadow-a/aliases",
                       json={"alias": "shadow-x"}).status_code == 201
    for owner in ("shadow-a", "shadow-b"):
        r = client.post(f"/v1/default/banks/{owner}/aliases", json={"alias": "shadow-x"})
        assert r.status_code == 409 and r.get_json()["error"]["code"] == "bank_alias_taken"
    # the other order: a bank made under an alias's id is refused by the database itself
    # (a retain by HTTP resolves the alias first, so only a write that skips it gets here)
    with pytest.raises(psycopg.errors.UniqueViolation) as err:
        with services.pool.connection() as conn:
            submit_retain(conn, "shadow-x", [RetainItem(content="Not a bank of its own.")])
    assert err.value.diag.constraint_name == "bank_alias_id_conflict"
    assert _banks_named(services, "shadow-x") == set()
    # what the rule refuses, with a code
    for bad, code, status in (({"alias": "a/b"}, "invalid_bank_alias", 400),
                              ({"alias": ""}, "invalid_bank_alias", 400),
                              ({"alias": 7}, "invalid_request", 400),
                              ({"alias": "ok", "extra": 1}, "invalid_request", 400)):
        r = client.post("/v1/default/banks/shadow-a/aliases", json=bad)
        assert (r.status_code, r.get_json()["error"]["code"]) == (status, code), bad
    r = client.post("/v1/default/banks/shadow-none/aliases", json={"alias": "shadow-y"})
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"
    r = client.delete("/v1/default/banks/shadow-b/aliases/shadow-x")  # not shadow-b's
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_alias_not_found"


def test_primary_alias_and_delete(client, services):
    bank = "alias-primary"
    client.delete(f"/v1/default/banks/{bank}")
    assert client.put(f"/v1/default/banks/{bank}", json={}).status_code in (200, 201)
    for a in ("ap-one", "ap-two"):
        assert client.post(f"/v1/default/banks/{bank}/aliases",
                           json={"alias": a}).status_code == 201
    r = client.patch(f"/v1/default/banks/{bank}/aliases/ap-two", json={"primary": True})
    assert r.get_json()["aliases"] == [{"alias": "ap-two", "primary": True},
                                       {"alias": "ap-one", "primary": False}]
    # the primary alias moves: at most one per bank
    r = client.patch("/v1/default/banks/ap-two/aliases/ap-one", json={"primary": True})
    assert r.status_code == 200
    assert r.get_json()["aliases"] == [{"alias": "ap-one", "primary": True},
                                       {"alias": "ap-two", "primary": False}]
    r = client.patch(f"/v1/default/banks/{bank}/aliases/ap-one", json={"primary": "yes"})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_request"
    # removed: the id reaches nothing, and may become a bank of its own
    r = client.delete(f"/v1/default/banks/{bank}/aliases/ap-one")
    assert r.get_json()["aliases"] == [{"alias": "ap-two", "primary": False}]
    r = client.get("/v1/default/banks/ap-one/profile")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"
    _retain(client, "ap-one", "A bank of its own now.", "own")
    assert _banks_named(services, "ap-one") == {"ap-one"}
    # deleting the bank takes its aliases with it
    client.delete(f"/v1/default/banks/{bank}")
    r = client.get("/v1/default/banks/ap-two/aliases")
    assert r.status_code == 404 and r.get_json()["error"]["code"] == "bank_not_found"
    with services.pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM bank_aliases WHERE bank_id = %s",
                            (bank,)).fetchone()["n"] == 0


def test_a_change_is_seen_at_once_here_and_within_the_cache_time_elsewhere(client, services,
                                                                            settings):
    bank = "alias-cache"
    client.delete(f"/v1/default/banks/{bank}")
    assert client.put(f"/v1/default/banks/{bank}", json={}).status_code in (200, 201)
    other = Services(settings.model_copy(update={"bank_alias_cache_s": 1.0}))
    other.__dict__["pool"], other.__dict__["read_pool"] = services.pool, services.read_pool
    assert other.bank_aliases.resolve("alias-cache-b") == "alias-cache-b"  # cached: no alias
    assert services.bank_aliases.resolve("alias-cache-b") == "alias-cache-b"
    assert client.post(f"/v1/default/banks/{bank}/aliases",
                       json={"alias": "alias-cache-b"}).status_code == 201
    assert services.bank_aliases.resolve("alias-cache-b") == bank  # this process: at once
    assert other.bank_aliases.resolve("alias-cache-b") == "alias-cache-b"  # not yet
    time.sleep(1.1)
    assert other.bank_aliases.resolve("alias-cache-b") == bank  # within the cache time
    assert client.delete(f"/v1/default/banks/{bank}/aliases/alias-cache-b").status_code == 200
    assert services.bank_aliases.resolve("alias-cache-b") == "alias-cache-b"


def test_access_applies_to_the_resolved_bank(api):  # noqa: F811 (the fixture imported above)
    for b in ("acl-open", "acl-secret"):
        api.delete(f"/v1/default/banks/{b}", headers=ADMIN)
        assert api.put(f"/v1/default/banks/{b}", json={}, headers=ADMIN).status_code in (200, 201)
    key = make_member(api, "alias-reader", "acl-open", "read")
    who = bearer(key)
    # an alias of the bank the member may not read: the check is on that bank
    r = api.post("/v1/default/banks/acl-secret/aliases", json={"alias": "acl-door"},
                 headers=ADMIN)
    assert r.status_code == 201, r.get_json()
    r = api.get("/v1/default/banks/acl-door/profile", headers=who)
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"
    assert api.get("/v1/default/banks/acl-door/aliases", headers=who).status_code == 403
    # an alias of the bank it may read: allowed by the alias too; changing aliases is admin
    assert api.post("/v1/default/banks/acl-open/aliases", json={"alias": "acl-window"},
                    headers=ADMIN).status_code == 201
    r = api.get("/v1/default/banks/acl-window/profile", headers=who)
    assert r.status_code == 200 and r.get_json()["bank_id"] == "acl-open"
    r = api.post("/v1/default/banks/acl-window/aliases", json={"alias": "acl-other"},
                 headers=who)
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"
    # a grant set through an alias is a grant on the bank
    r = api.put("/banks/acl-door/grants/alias-reader", json={"role": "read"}, headers=ADMIN)
    assert r.status_code == 200 and r.get_json()["bank_id"] == "acl-secret"
    assert api.get("/v1/default/banks/acl-secret/profile", headers=who).status_code == 200


@pytest.fixture(scope="module")
def base_url(app):
    with serving(app, "alias-http") as url:
        yield url


def test_the_hindsight_client_manages_aliases(base_url, client):
    from hindsight_client import Hindsight
    from hindsight_client.hindsight_client import _run_async

    bank = "alias-client"
    client.delete(f"/v1/default/banks/{bank}")
    assert client.put(f"/v1/default/banks/{bank}", json={}).status_code in (200, 201)
    hs = Hindsight(base_url=base_url, timeout=30)
    try:
        made = _run_async(hs.banks.create_bank_alias(
            bank, hs_models.CreateBankAliasRequest(alias="alias-client-2", primary=True)))
        assert made.bank_id == bank
        assert [(a.alias, a.primary) for a in made.aliases] == [("alias-client-2", True)]
        listed = _run_async(hs.banks.list_bank_aliases("alias-client-2"))
        assert listed.bank_id == bank and listed.aliases[0].alias == "alias-client-2"
        unset = _run_async(hs.banks.set_bank_alias_primary(
            bank, "alias-client-2", hs_models.SetBankAliasPrimaryRequest(primary=False)))
        assert unset.aliases[0].primary is False
        gone = _run_async(hs.banks.delete_bank_alias(bank, "alias-client-2"))
        assert gone.aliases == []
    finally:
        hs.close()
