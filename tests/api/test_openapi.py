"""The OpenAPI document: generated from the routes' declarations, every route in it with its
errors, served with a docs page that needs no network; the Python client in step with it."""

from __future__ import annotations

import inspect
import re
import types
import typing
from urllib.parse import quote

import pytest
from openapi_spec_validator import validate
from pydantic import TypeAdapter

from api.openapi import declared_doc, openapi_path, plain_descriptions
from rcll import client as client_mod
from rcll.client import RCLLClient

METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def document(app):
    r = app.test_client().get("/openapi.json")
    assert r.status_code == 200
    return r.get_json()


def test_every_route_is_in_the_document(app, document):
    """Walk url_map: each (rule, method) is an operation of the document, with the role it
    declares, and the error envelope for each error status."""
    seen = 0
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        if view._rcll_role == "session":  # a web screen (api/web): HTML, not the API
            assert openapi_path(rule.rule) not in document["paths"], rule.rule
            continue
        assert declared_doc(view) is not None, rule.endpoint
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            op = document["paths"].get(openapi_path(rule.rule), {}).get(method.lower())
            assert op is not None, (method, rule.rule)
            assert op["x-rcll-role"] == view._rcll_role
            for status, resp in op["responses"].items():
                if int(status) >= 400 and "x-error-codes" in resp:
                    schema = resp["content"]["application/json"]["schema"]
                    schema = schema.get("anyOf", [None, schema])[-1]  # /readyz's 503
                    assert schema["allOf"][0] == {"$ref": "#/components/schemas/Error"}
                    assert resp["x-error-codes"], (rule.rule, status)
            seen += 1
    n_ops = sum(len(set(v) & METHODS) for v in document["paths"].values())
    assert seen == n_ops  # nothing in the document that is not a route
    assert seen >= 68


def test_document_is_valid_openapi_3_1(document):
    validate(document)  # raises OpenAPIValidationError naming the place


def test_document_shapes(document):
    """Models become components; errors carry their codes; Hindsight's allow-listed fields
    are in its request bodies with the mapping as their description."""
    schemas = document["components"]["schemas"]
    assert document["openapi"] == "3.1.0"
    assert schemas["Error"]["required"] == ["error"]
    recall = document["paths"]["/v1/default/banks/{bank_id}/memories/recall"]["post"]
    body = recall["requestBody"]["content"]["application/json"]["schema"]
    name = body["$ref"].rsplit("/", 1)[1]
    props = schemas[name]["properties"]
    assert "budget" in props and "low = recipe hybrid" in props["budget"]["description"]
    assert "query" in schemas[name]["required"]
    assert schemas[name]["additionalProperties"] is False  # RCLL's strictness stays
    codes = recall["responses"]["400"]["x-error-codes"]
    assert {"unknown_recipe", "invalid_request", "malformed_json", "invalid_bank_id"} <= set(codes)
    assert set(recall["responses"]) >= {"200", "400", "401", "403", "404", "413", "503"}
    unit = document["paths"]["/v1/default/banks/{bank_id}/units/{unit_id}"]["patch"]
    assert unit["responses"]["409"]["x-error-codes"] == ["revision_conflict", "unit_forgotten"]
    health = document["paths"]["/healthz"]["get"]
    assert health["security"] == [] and "401" not in health["responses"]
    params = {p["name"]: p for p in document["paths"]["/jobs"]["get"]["parameters"]}
    assert params["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000}
    assert params["state"]["schema"]["enum"][0] == "queued"  # no null in a query


def test_docs_page_serves_its_assets_locally(client):
    page = client.get("/docs")
    assert page.status_code == 200 and "text/html" in page.content_type
    html = page.get_data(as_text=True)
    assert "http" not in html  # nothing from a CDN
    for asset in re.findall(r'(?:src|href)="(docs/[^"]+)"', html):
        r = client.get("/" + asset)
        assert r.status_code == 200, asset
        assert len(r.data) > 10_000
    assert client.get("/docs/../../etc/passwd").status_code == 404
    assert client.get("/docs/index.html").get_json()["error"]["code"] == "not_found"


def _client_routes() -> list[tuple[str, str, str]]:
    out = []
    for name, fn in inspect.getmembers(RCLLClient, inspect.isfunction):
        route = getattr(fn, "_rcll_route", None)
        if route is not None:
            out.append((name, *route))
    return out


def test_every_client_method_calls_a_documented_route(document):
    """Each public client method that calls the API names its route; the route is in the
    document and the method returns the very type the document was generated from."""
    routes = _client_routes()
    public = {n for n, fn in inspect.getmembers(RCLLClient, inspect.isfunction)
              if not n.startswith("_") and n not in {"close", "wait", "wait_many"}}
    assert {n for n, _, _ in routes} == public
    schemas = document["components"]["schemas"]
    for name, method, path in routes:
        op = document["paths"].get(path, {}).get(method.lower())
        assert op is not None, (name, method, path)
        hints = typing.get_type_hints(getattr(RCLLClient, name), vars(client_mod))
        ret = hints["return"]
        assert all(p in hints for p in inspect.signature(getattr(RCLLClient, name)).parameters
                   if p != "self"), name
        ok = [s for s in op["responses"] if s.startswith("2")]
        content = op["responses"][ok[0]]["content"]
        if "application/json" not in content:  # a download (a bank's export): streamed to a
            assert ret is int, (name, ret)  # file by the method, which returns the bytes
            continue
        documented = content["application/json"]["schema"]
        component = documented["$ref"].rsplit("/", 1)[1]
        args = [a for a in typing.get_args(ret) if a is not type(None)]
        if typing.get_origin(ret) in (typing.Union, types.UnionType):  # X | None (404 → None)
            ret = args[0]
        if typing.get_origin(ret) is list:  # the method returns the page's list
            ret = typing.get_args(ret)[0]
            arrays = [p for p in schemas[component]["properties"].values()
                      if p.get("items", {}).get("$ref", "").endswith("/" + ret.__name__)]
            assert arrays, (name, component, ret)
            component = ret.__name__
        assert component == ret.__name__, (name, component, ret)
        # the component is the type's own schema
        own = TypeAdapter(ret).json_schema(ref_template="#/components/schemas/{model}",
                                           mode="serialization")
        own.pop("$defs", None)
        assert schemas[component] == plain_descriptions(own), name


@pytest.mark.parametrize("value", [["calm"], "calm", 3, True])
def test_bank_update_refuses_a_disposition_that_is_not_an_object(client, value):
    """Found by schemathesis: a non-object ``disposition`` on PUT/PATCH bank, PUT profile
    and PATCH config was a 500; now 400 ``invalid_request`` naming the field, nothing
    stored."""
    bank = "oa-disposition"
    assert client.put(f"/v1/default/banks/{bank}", json={"name": "D"}).status_code == 200
    for method, path, body in (
            ("PUT", f"/v1/default/banks/{bank}", {"disposition": value}),
            ("PATCH", f"/v1/default/banks/{bank}", {"disposition": value}),
            ("PUT", f"/v1/default/banks/{bank}/profile", {"disposition": value}),
            ("PATCH", f"/v1/default/banks/{bank}/config", {"updates": {"disposition": value}})):
        r = client.open(path, method=method, json=body)
        assert r.status_code == 400, (method, path, r.get_json())
        assert r.get_json()["error"]["code"] == "invalid_request"
        assert r.get_json()["error"]["details"] == {"field": "disposition"}
    profile = client.get(f"/v1/default/banks/{bank}/profile").get_json()
    assert profile["disposition"] == {"skepticism": 3, "literalism": 3, "empathy": 3}


@pytest.mark.parametrize("budget", [["high"], {"level": "high"}, 3, True, "huge"])
def test_recall_budget_must_be_a_name(client, budget):
    """Found by schemathesis: a list as Hindsight's ``budget`` was a 500 (unhashable);
    any value but low, mid or high is a 400 ``invalid_request`` naming the field."""
    r = client.post("/v1/default/banks/oa-budget/memories/recall",
                    json={"query": "anything", "budget": budget})
    assert r.status_code == 400, r.get_json()
    assert r.get_json()["error"] == {"code": "invalid_request",
                                     "message": "budget must be low, mid or high",
                                     "details": {"field": "budget"}}


def test_a_document_id_with_a_newline_is_reachable(client):
    """Found by schemathesis: ``…/documents/{document_id}`` did not match an id holding a
    newline (404 ``not_found``), though retain accepts such an id; now GET and DELETE reach
    it, and an unknown one is 404 ``document_not_found``."""
    bank, doc_id = "oa-newline", "notes\nv2/part 1"
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"async": False, "items": [
        {"content": "The harbour opens at six.", "document_id": doc_id}]})
    assert r.status_code == 200, r.get_json()
    path = f"/v1/default/banks/{bank}/documents/" + quote(doc_id, safe="")
    got = client.get(path)
    assert got.status_code == 200, got.get_json()
    assert got.get_json()["id"] == doc_id and got.get_json()["memory_unit_count"] >= 1
    gone = client.delete(path)
    assert gone.status_code == 200 and gone.get_json()["memory_units_deleted"] >= 1
    again = client.get(path)
    assert again.status_code == 404
    assert again.get_json()["error"]["code"] == "document_not_found"


def test_operation_status_filter_is_checked_beside_state(client):
    """Found by schemathesis: ``?state=queued&status=5`` ignored the bad ``status``; it is
    a 400 now, and ``state`` with ``status`` must name the same state."""
    for path in ("/jobs", "/v1/default/banks/oa-ops/operations"):
        bad = client.get(path + "?state=queued&status=5")
        assert bad.status_code == 400 and bad.get_json()["error"]["details"] == {"field": "status"}
        clash = client.get(path + "?state=queued&status=completed")
        assert clash.status_code == 400
        assert clash.get_json()["error"]["details"] == {"state": "queued", "status": "completed"}
    assert client.get("/jobs?state=succeeded&status=completed").status_code == 200
    assert client.get("/jobs?status=pending").status_code == 200


@pytest.mark.parametrize("confidence, stored", [(5e-324, 0.0), (1e-300, 0.0), (0.25, 0.25)])
def test_unit_confidence_too_small_for_a_real_is_zero(client, confidence, stored):
    """Found by schemathesis: remembering a unit with ``confidence`` 5e-324 was a 500
    (PostgreSQL ``real`` underflow); it is stored as the column holds it."""
    r = client.post("/banks/oa-confidence/units",
                    json={"text": "The ferry leaves at noon.", "confidence": confidence})
    assert r.status_code == 201, r.get_json()
    got = client.get(f"/banks/oa-confidence/units/{r.get_json()['id']}").get_json()
    assert got["confidence"] == stored
    fixed = client.patch(f"/banks/oa-confidence/units/{got['id']}",
                         json={"revision": got["revision"], "confidence": 1e-310})
    assert fixed.status_code == 200, fixed.get_json()
    assert fixed.get_json()["confidence"] == 0.0


ROLE = re.compile(r":[a-z]+:`")


def _texts(node, where=""):
    """Every (place, text) of a ``summary`` or ``description`` in the document."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("summary", "description") and isinstance(v, str):
                yield f"{where}/{k}", v
            else:
                yield from _texts(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _texts(v, f"{where}/{i}")


def test_summaries_and_descriptions_are_plain_text(document):
    """No reStructuredText in what Swagger UI shows: no double-backtick literal, no
    ``:func:``-style role, in any summary or description (operations, parameters,
    components); summaries carry no markup at all."""
    texts = list(_texts(document))
    assert len(texts) > 300
    bad = [(w, t[:80]) for w, t in texts if "``" in t or ROLE.search(t)]
    assert bad == []
    summaries = [t for w, t in texts if w.endswith("/summary")]
    assert len(summaries) >= 68 and not [t for t in summaries if "`" in t]
    recall = document["paths"]["/v1/default/banks/{bank_id}/memories/recall"]["post"]
    assert "api.hindsight.recall_body" in recall["summary"]  # the role's target, as text


def test_root_points_to_the_docs_and_the_web_ui(app):
    """``GET /``: a browser goes to the web UI (with the links in ``Link``); a JSON client
    gets the links."""
    c = app.test_client()
    r = c.get("/", headers={"Accept": "text/html"})
    assert r.status_code == 302 and r.headers["Location"] == "/ui"
    assert '</docs>; rel="service-doc"' in r.headers["Link"]
    assert b"/docs" in r.data and b"/ui" in r.data
    r = c.get("/", headers={"Accept": "application/json"})
    assert r.status_code == 200
    links = r.get_json()["links"]
    assert links["ui"] == "/ui" and links["api_docs"] == "/docs"
    assert links["openapi"] == "/openapi.json"
    assert c.get(links["api_docs"]).status_code == 200
    assert c.get(links["openapi"]).status_code == 200
