"""Issue 25 item 1: Hindsight compatibility faults fixed as kinds, each over every route it
touches, checked with the real ``hindsight-client`` package where it applies.

1. every answer of a Hindsight route validates against the response model the client
   declares for that route (read from the package: its API modules map each method and path
   to a pydantic model) — with a bank holding an uploaded file, whose units carry
   structured provenance (``metadata`` holds strings there; the file is in ``provenance``);
2. bank ids Hindsight accepts (an e-mail address, spaces, ``+``, accents, 200 characters)
   work on every route, Hindsight's and RCLL's, the CLI and MCP; ``/``, control
   characters, ``.``/``..`` and over 256 characters stay 400 ``invalid_bank_id``;
3. a Hindsight retain without ``async`` is synchronous (read right after), a large one too
   (in slices); RCLL's ``/banks/…/retain`` stays async;
4. every Hindsight fact type is accepted (``opinion``: matches nothing, as Hindsight);
5. DELETE of a bank that never existed is done (200) on Hindsight's path;
6. a recall result has the same fields whichever tier (hot, warm, cold) answered it.
"""

from __future__ import annotations

import inspect
import io
import re
from dataclasses import replace
from types import SimpleNamespace
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner

from tests.conftest import serving, wait_job

hindsight_client = pytest.importorskip("hindsight_client")
import hindsight_client_api.api as hs_api  # noqa: E402
import hindsight_client_api.models as hs_models  # noqa: E402
from hindsight_client import Hindsight  # noqa: E402

B = "/v1/default/banks/{}"


@pytest.fixture(autouse=True)
def hindsight_sync_default(services, monkeypatch):
    """These tests use Hindsight's path as Hindsight's clients do: its retain default
    (synchronous, RCLL_HINDSIGHT_SYNC_RETAIN on, the deployment default) — the suite's
    settings turn it off for the job and worker tests."""
    monkeypatch.setattr(services, "settings",
                        services.settings.model_copy(update={"hindsight_sync_retain": True}))


def seg(bank: str) -> str:
    return quote(bank, safe="")


# -- the client's route -> response model map ------------------------------------------------

def client_routes() -> dict[tuple[str, str], type]:
    """``{(METHOD, path template): response model}`` for every method of the client's API
    classes whose 200 answer is a model (read from the generated sources)."""
    out: dict[tuple[str, str], type] = {}
    for _, cls in inspect.getmembers(hs_api, inspect.isclass):
        src = inspect.getsource(inspect.getmodule(cls))
        models, routes = {}, []
        for chunk in re.split(r"\n    (?=(?:async )?def )", src):  # one method each
            head = re.match(r"(?:async )?def (\w+)\(", chunk)
            if head is None:
                continue
            name = head.group(1)
            answer = re.search(r"'200': \"(\w+)\"", chunk)
            where = re.search(r"method='(\w+)',\s*resource_path='([^']+)'", chunk)
            if answer and not name.startswith("_"):
                models[name] = answer.group(1)
            if where and name.startswith("_") and name.endswith("_serialize"):
                routes.append((name[1:-len("_serialize")], *where.groups()))
        for name, method, path in routes:
            model = getattr(hs_models, models.get(name, ""), None)
            if isinstance(model, type):
                out[(method, path)] = model
    return out


ROUTES = client_routes()


def validate(method: str, template: str, body) -> None:
    """``body`` parsed as the client does (``Model.from_dict``): raises on a type mismatch."""
    model = ROUTES[(method, template)]
    model.from_dict(body)


def test_the_route_map_is_read_from_the_package():
    assert ROUTES[("POST", "/v1/default/banks/{bank_id}/memories/recall")].__name__ == \
        "RecallResponse"
    assert len(ROUTES) > 40


# -- 1. declared types on every Hindsight route ----------------------------------------------

def test_every_hindsight_answer_validates_against_the_client_models(client, worker):
    bank = "hs-kinds-models"
    client.delete(B.format(bank))
    checked: list[str] = []

    def call(method, template, path, **kw):
        r = client.open(path, method=method, **kw)
        assert r.status_code == 200, (method, path, r.get_json())
        validate(method, template, r.get_json())
        checked.append(f"{method} {template}")
        return r.get_json()

    T = "/v1/default/banks/{bank_id}"
    P = B.format(bank)
    call("GET", "/version", "/version")
    call("PUT", T, P, json={"name": "Models", "mission": "m"})
    call("POST", T + "/memories", P + "/memories", json={"items": [
        {"content": "Gale repairs sails at the north dock.", "document_id": "gale",
         "metadata": {"source": "chat", "n": 3}, "tags": ["dock"]}]})
    up = client.post(P + "/files/retain", data={"files": [
        (io.BytesIO(b"# Sails\nGale stores the spare jib in shed four."), "sails.md")]},
        content_type="multipart/form-data")
    assert up.status_code == 200, up.get_json()
    validate("POST", T + "/files/retain", up.get_json())
    assert wait_job(client, bank, up.get_json()["operation_ids"][0])["state"] == "succeeded"

    rec = call("POST", T + "/memories/recall", P + "/memories/recall",
               json={"query": "Where is the spare jib stored?", "budget": "high"})
    by_text = {r["text"]: r for r in rec["results"]}
    filed = next(r for t, r in by_text.items() if "jib" in t)
    assert filed["provenance"]["file"]["name"] == "sails.md"  # structured, in its own field
    assert "file" not in filed["metadata"]
    assert all(isinstance(v, str) for r in rec["results"] for v in r["metadata"].values())
    chat = next(r for t, r in by_text.items() if "Gale repairs" in t)
    assert chat["metadata"] == {"source": "chat", "n": "3"}

    listed = call("GET", T + "/memories/list", P + "/memories/list")
    unit_id = next(i["id"] for i in listed["items"] if "jib" in i["text"])
    one = client.get(P + f"/memories/{unit_id}").get_json()
    assert one["provenance"]["file"]["name"] == "sails.md" and "file" not in one["metadata"]
    for template, path in (("/profile", "/profile"), ("/stats", "/stats"),
                           ("/config", "/config"), ("/tags", "/tags"),
                           ("/documents", "/documents"), ("/entities", "/entities"),
                           ("/operations", "/operations"), ("/documents/{document_id}",
                                                            "/documents/gale")):
        call("GET", T + template, P + path)
    call("GET", "/v1/default/banks", "/v1/default/banks")
    call("DELETE", T + "/documents/{document_id}", P + "/documents/gale")
    call("DELETE", T + "/memories", P + "/memories")
    call("DELETE", T, P)
    assert len(checked) >= 17

    # and the real client, over HTTP, on a bank with an uploaded file (the fault: it raised)
    with serving(client.application, "hs-kinds") as url:
        hs = Hindsight(base_url=url, timeout=60)
        try:
            hs.retain("hs-kinds-client", "Ivo keeps the harbour log.")
            up = client.post(B.format("hs-kinds-client") + "/files/retain", data={"files": [
                (io.BytesIO(b"# Log\nThe harbour log lives in the tower."), "log.md")]},
                content_type="multipart/form-data")
            wait_job(client, "hs-kinds-client", up.get_json()["operation_ids"][0])
            res = hs.recall("hs-kinds-client", "Where does the harbour log live?", budget="high")
            assert any("tower" in r.text for r in res.results)
            hs.delete_bank("hs-kinds-client")
        finally:
            hs.close()


# -- 2. bank ids -------------------------------------------------------------------------------

ACCEPTED = ["app::user@example.com", "kestrel ops", "team+kestrel", "équipe-kestrel",
            "50%off {x}", "k" * 200]
REFUSED = ["a/b", ".", "..", "a\x00b", "a\nb", "k" * 257]


@pytest.mark.parametrize("bank", ACCEPTED)
def test_hindsight_bank_ids_work_on_every_route(client, services, bank):
    P = B.format(seg(bank))
    client.delete(P)
    r = client.put(P, json={"name": "ids"})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["bank_id"] == bank
    r = client.post(P + "/memories", json={"items": [
        {"content": "Juno tunes the lighthouse radio on Fridays.", "document_id": "juno"}]})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()
    assert client.get(P + "/documents/juno").status_code == 200
    rec = client.post(P + "/memories/recall", json={"query": "lighthouse radio"}).get_json()
    assert rec["results"] and rec["results"][0]["text"].startswith("Juno")
    # RCLL's own routes
    own = f"/banks/{seg(bank)}"
    assert client.get(own + "/recall", query_string={"query": "lighthouse radio"}
                      ).get_json()["results"]
    u = client.post(own + "/units", json={"text": "Juno also paints buoys."})
    assert u.status_code in (200, 201), u.get_json()
    assert client.get(own + f"/units/{u.get_json()['id']}").status_code == 200
    assert client.get(own + "/context").status_code == 200
    assert client.post(own + "/retain", json={"items": [{"content": "x y z"}],
                                              "async": False}).status_code == 200
    for path in ("/profile", "/stats", "/memories/list", "/tags", "/operations", "/entities"):
        assert client.get(P + path).status_code == 200, path
    listed = client.get("/v1/default/banks?limit=500").get_json()["banks"]
    assert bank in {b["bank_id"] for b in listed}
    # tier 1 keys: the id percent-encoded inside the hash tag, never a brace or space
    key = services.hot_tier.key(bank, "z")
    inner = key.split("{", 1)[1].rsplit("}", 1)[0]
    assert "{" not in inner and "}" not in inner and " " not in inner
    with services.pool.connection() as conn:
        stored = conn.execute("SELECT id FROM memory_banks WHERE id = %s", (bank,)).fetchone()
    assert stored is not None
    assert client.delete(P).get_json()["existed"] is True


@pytest.mark.parametrize("bank", REFUSED)
def test_unroutable_or_unstorable_bank_ids_are_refused(client, bank):
    r = client.put(B.format(seg(bank)), json={"name": "x"})
    if bank == "a/b" or bank in (".", ".."):  # decoded before routing: no bank route matches
        assert r.status_code in (400, 404, 405)
        if r.status_code == 400:
            assert r.get_json()["error"]["code"] == "invalid_bank_id"
        return
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_bank_id"


def test_bank_ids_through_the_cli_and_mcp(app, services, monkeypatch):
    from mcp_server.server import Runtime
    from rcll.cli import main as cli_main
    from rcll.client import RCLLClient
    from rcll.errors import RCLLError

    bank = "app::user@example.com"
    c = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    monkeypatch.setattr(cli_main, "_client", lambda: c)
    c.retain(bank, [{"content": "Kai sorts the mail at dawn."}], async_=False) \
        if "async_" in inspect.signature(c.retain).parameters else \
        app.test_client().post(B.format(seg(bank)) + "/memories",
                               json={"items": [{"content": "Kai sorts the mail at dawn."}]})
    out = CliRunner().invoke(cli_main.cli, ["recall", "mail at dawn", "--bank", bank, "--json"],
                             env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    assert "Kai sorts the mail" in out.output
    rt = SimpleNamespace(default_bank=None, services=services)
    assert Runtime.bank(rt, bank) == bank and Runtime.bank(rt, "kestrel ops") == "kestrel ops"
    with pytest.raises(RCLLError) as exc:
        Runtime.bank(rt, "a/b")
    assert exc.value.code == "invalid_bank_id"
    app.test_client().delete(B.format(seg(bank)))


# -- 3. retain defaults ------------------------------------------------------------------------

def test_hindsight_retain_defaults_to_sync_rcll_to_async(app, client, services, monkeypatch):
    # the deployment default (RCLL_HINDSIGHT_SYNC_RETAIN on); the suite's settings turn it off
    assert type(services.settings)().hindsight_sync_retain is True
    monkeypatch.setattr(services, "settings",
                        services.settings.model_copy(update={"hindsight_sync_retain": True}))
    bank = "hs-kinds-sync"
    client.delete(B.format(bank))
    r = client.post(B.format(bank) + "/memories",
                    json={"items": [{"content": "Lena bakes rye bread.", "document_id": "lena"}]})
    assert r.status_code == 200 and r.get_json()["async"] is False
    assert r.get_json()["state"] == "succeeded"
    assert client.get(B.format(bank) + "/documents/lena").status_code == 200  # read right after
    # RCLL's route keeps its default: queued (202); the test app's enqueue sends to no worker
    assert client.post(f"/banks/{bank}/retain",
                       json={"items": [{"content": "queued"}]}).status_code == 202

    # a batch over the sync cap still runs synchronously, in slices of the cap
    svc = app.extensions["rcll_retain"]
    old = svc.limits
    svc.limits = replace(old, sync_max_items=2)
    try:
        items = [{"content": f"Harbour note {i}: crate {i} goes to pier {i}.",
                  "document_id": f"note-{i}"} for i in range(5)]
        r = client.post(B.format(bank) + "/memories", json={"items": items})
        body = r.get_json()
        assert r.status_code == 200, body
        assert body["async"] is False and body["items_count"] == 5 and body["success"]
        assert len(body["operation_ids"]) == 3 and body["state"] == "succeeded"
        for i in range(5):
            assert client.get(B.format(bank) + f"/documents/note-{i}").status_code == 200
        # RCLL's route: an explicit sync batch over the cap is still refused
        r = client.post(f"/banks/{bank}/retain", json={"items": items, "async": False})
        assert r.status_code == 400 and r.get_json()["error"]["code"] == "sync_batch_too_large"
    finally:
        svc.limits = old
    client.delete(B.format(bank))


# -- 4. fact types -----------------------------------------------------------------------------

def test_every_hindsight_fact_type_is_accepted(client):
    from api.hindsight import TYPE_KINDS

    bank = "hs-kinds-types"
    client.post(B.format(bank) + "/memories",
                json={"items": [{"content": "Mira prefers the early ferry."}]})
    assert {"world", "experience", "observation", "opinion"} <= set(TYPE_KINDS)
    for types in (["opinion"], ["world", "experience", "opinion"], ["observation"],
                  ["world"], ["experience"]):
        r = client.post(B.format(bank) + "/memories/recall",
                        json={"query": "early ferry", "types": types})
        assert r.status_code == 200, (types, r.get_json())
        validate("POST", "/v1/default/banks/{bank_id}/memories/recall", r.get_json())
    only = client.post(B.format(bank) + "/memories/recall",
                       json={"query": "early ferry", "types": ["opinion"]}).get_json()
    assert only["results"] == []  # Hindsight: a removed type, matching nothing
    mixed = client.post(B.format(bank) + "/memories/recall",
                        json={"query": "early ferry", "types": ["world", "opinion"]}).get_json()
    assert mixed["results"]
    assert client.get(B.format(bank) + "/memories/list?type=opinion").get_json()["total"] == 0
    gone = client.delete(B.format(bank) + "/memories?type=opinion").get_json()
    assert gone["deleted_count"] == 0  # never "every kind"
    assert client.get(B.format(bank) + "/memories/list").get_json()["total"] == 1
    client.delete(B.format(bank))


# -- 5. DELETE of a missing bank -----------------------------------------------------------

def test_delete_of_a_bank_that_never_existed_is_done(client):
    r = client.delete(B.format("hs-kinds-never-made"))
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert body["success"] is True and body["existed"] is False and body["deleted_count"] == 0
    validate("DELETE", "/v1/default/banks/{bank_id}", body)
    assert client.delete(B.format("hs-kinds-never-made")).status_code == 200  # twice too


# -- 6. the same fields from every tier ----------------------------------------------------

def test_a_result_has_the_same_fields_whichever_tier_answers(client, services):
    bank = "hs-kinds-tiers"
    client.delete(B.format(bank))
    client.post(B.format(bank) + "/memories", json={"items": [
        {"content": "Oskar repairs the Lisbon tram in the Alfama depot.", "document_id": "o",
         "metadata": {"source": "chat"}, "tags": ["trams"]}]})
    q = "Who repairs the Lisbon tram?"
    # the cold answer promotes its top results into tier 1 (the work after the response)
    client.post(B.format(bank) + "/memories/recall", json={"query": q})
    assert services.after_recall.flush(10)
    fields: dict[str, set[str]] = {}
    names: dict[str, list[str]] = {}
    for tier in ("hot", "warm", "cold"):
        for route in ("hindsight", "rcll"):
            if route == "hindsight":
                ans = client.post(B.format(bank) + "/memories/recall",
                                  json={"query": q, "tiers": [tier]}).get_json()
            else:
                ans = client.get(f"/banks/{bank}/recall",
                                 query_string={"query": q, "tiers": tier}).get_json()
            hits = [r for r in ans["results"] if r["text"].startswith("Oskar")]
            assert hits, (tier, route, ans.get("tiers"), ans.get("tier_reason"))
            assert ans["tiers"] == [tier], ans["tiers"]  # that tier answered
            assert "entities" in hits[0], (tier, route)  # tier 1 once had none
            fields[f"{route}:{tier}"] = set(hits[0])
            names[f"{route}:{tier}"] = sorted(str(e) for e in hits[0]["entities"])
            if route == "hindsight":
                validate("POST", "/v1/default/banks/{bank_id}/memories/recall", ans)
    for route in ("hindsight", "rcll"):
        cold = fields[f"{route}:cold"]
        for tier in ("hot", "warm"):
            assert fields[f"{route}:{tier}"] == cold, (
                route, tier, fields[f"{route}:{tier}"] ^ cold)
            # and the same values: the entities the unit mentions, not an empty list
            assert names[f"{route}:{tier}"] == names[f"{route}:cold"], (route, tier, names)
        assert names[f"{route}:cold"], names
    client.delete(B.format(bank))
