"""The OpenAPI 3.1 document, generated: each view declares its request and response models
and the error codes it can give with :func:`doc`; :func:`build` walks ``app.url_map``, reads
those declarations and the role of :func:`api.auth.requires`, and turns the models into JSON
Schema with pydantic (one ``GenerateJsonSchema`` pass, so a model used by several routes is
one component). Nothing in the document is written by hand but the prose of each route (its
docstring).

Served at ``GET /openapi.json`` and ``GET /docs`` (Swagger UI from the ``flask-swagger-ui``
wheel, served from this process: no CDN). Both are ``public``.

Errors: every response of status ≥ 400 is the envelope component ``Error``
(``{"error": {"code", "message", "details"}}``) with ``code`` limited to the codes that
route can give at that status — the route's own (``errors=`` of :func:`doc`) plus the ones
every route of its kind gives (:func:`common_errors`: authentication, the bank id, JSON
bodies, paging, database outage).
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, abort, current_app, jsonify, send_from_directory
from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from api.auth import declared_role, requires
from rcll.banks.ids import BANK_ID_PATTERN  # the bank id rule (Hindsight's)

DOC_ATTR = "_rcll_doc"
REF = "#/components/schemas/{model}"
JSON = "application/json"
_ARG = re.compile(r"<(?:[^:>]+:)?([^>]+)>")
HTTP_REASONS = {200: "OK", 201: "Created", 202: "Accepted", 400: "Bad request",
                401: "Unauthorized", 403: "Forbidden", 404: "Not found", 409: "Conflict",
                413: "Payload too large", 422: "Unprocessable", 429: "Too many requests",
                501: "Not implemented", 503: "Service unavailable"}


@dataclass(frozen=True)
class Doc:
    """What a view declares for the document (see :func:`doc`)."""

    responses: Mapping[int, Any]
    body: Any = None
    body_required: bool = True
    query: Any = None
    errors: Mapping[int, Iterable[str]] = field(default_factory=dict)
    paged: bool = False
    content_type: str | tuple[str, ...] = JSON
    tags: tuple[str, ...] = ()
    summary: str | None = None
    body_content_type: str = JSON


def doc(responses: Mapping[int, Any], *, body: Any = None, body_required: bool = True,
        query: Any = None, errors: Mapping[int, Iterable[str]] | None = None,
        paged: bool = False, content_type: str | tuple[str, ...] = JSON,
        tags: Iterable[str] = (),
        summary: str | None = None, body_content_type: str = JSON) -> Callable:
    """Decorator: declare a view for the OpenAPI document.

    ``responses``: ``{status: type}`` for the success answers; ``type`` is a pydantic model,
    a ``TypedDict`` or any type pydantic can describe (``None``: no schema, e.g. a text
    body of ``content_type``; a tuple of media types: any of them). ``body``: the request
    body's model (``body_required=False`` when it may be left out); ``query``: a model
    whose fields are the query parameters (lists repeat the parameter); ``errors``:
    ``{status: [code, ...]}`` this route gives beyond :func:`common_errors`; ``paged``: the
    route takes ``limit``/``offset`` (400 ``invalid_paging``). Returns the view unchanged
    (the declaration is an attribute read by :func:`build`)."""
    d = Doc(responses=dict(responses), body=body, body_required=body_required, query=query,
            errors={int(k): tuple(v) for k, v in (errors or {}).items()}, paged=paged,
            content_type=content_type, tags=tuple(tags), summary=summary,
            body_content_type=body_content_type)

    def mark(view: Callable) -> Callable:
        setattr(view, DOC_ATTR, d)
        return view

    return mark


def declared_doc(view: Callable | None) -> Doc | None:
    """The :class:`Doc` a view declared with :func:`doc`, or ``None``."""
    return getattr(view, DOC_ATTR, None)


def openapi_path(rule: str) -> str:
    """A Flask rule as an OpenAPI path: ``/banks/<bank_id>/x/<path:doc>`` →
    ``/banks/{bank_id}/x/{doc}``."""
    return _ARG.sub(lambda m: "{" + m.group(1) + "}", rule)


def common_errors(role: str, rule: str, d: Doc) -> dict[int, set[str]]:
    """The error codes every route of this kind can give (``{status: {code}}``):

    - every route: 400 ``invalid_request`` (NUL or lone surrogate in the path or query),
      503 ``database_unavailable``;
    - not ``public``: 401 ``missing_api_key`` / ``invalid_api_key``; 403 ``forbidden``,
      ``read_only_deployment`` (a write in a read-only deployment), ``purpose_not_granted``
      (a purpose the key does not hold);
    - a ``bank_id`` in the path: 400 ``invalid_bank_id``, 404 ``bank_not_found``; a
      ``member_id``: 400 ``invalid_member_id``, 404 ``member_not_found``;
    - a JSON body: 400 ``malformed_json``, ``invalid_request``; 413 ``payload_too_large``;
    - ``paged``: 400 ``invalid_paging``."""
    out: dict[int, set[str]] = {400: {"invalid_request"}, 503: {"database_unavailable"}}
    if role != "public":
        out[401] = {"missing_api_key", "invalid_api_key"}
        out[403] = {"forbidden", "read_only_deployment", "purpose_not_granted"}
    if "<bank_id>" in rule:
        out[400].add("invalid_bank_id")
        out.setdefault(404, set()).add("bank_not_found")
    if "<member_id>" in rule:
        out[400].add("invalid_member_id")
        out.setdefault(404, set()).add("member_not_found")
    if d.body is not None:
        out[400] |= {"malformed_json", "invalid_request"}
        out[413] = {"payload_too_large"}
    if d.paged:
        out[400].add("invalid_paging")
    return out


class _Schemas:
    """Collects the types of every route and turns them into components in one pass."""

    def __init__(self) -> None:
        self._inputs: dict[tuple[int, str], tuple[Any, str]] = {}

    def want(self, tp: Any, mode: str) -> tuple[int, str]:
        """Ask for ``tp``'s schema in ``mode``; the key to look it up in the mapping."""
        self._inputs[(id(tp), mode)] = (tp, mode)
        return (id(tp), mode), mode

    def generate(self) -> tuple[dict, dict]:
        gen = GenerateJsonSchema(ref_template=REF)
        inputs = [(key, mode, TypeAdapter(tp).core_schema)
                  for key, (tp, mode) in self._inputs.items()]  # → mapping[(key, mode)]
        mapping, defs = gen.generate_definitions(inputs)
        return {k: v for k, v in mapping.items()}, defs


def _error_schema(codes: Iterable[str]) -> dict:
    return {"allOf": [{"$ref": REF.format(model="Error")},
                      {"type": "object", "properties": {"error": {
                          "type": "object",
                          "properties": {"code": {"type": "string",
                                                  "enum": sorted(set(codes))}}}}}]}


ERROR_COMPONENT = {
    "type": "object", "required": ["error"], "additionalProperties": False,
    "description": "Every error answer: a code (stable, for programs), a message (for "
                   "people) and details (the field, the allowed values, …).",
    "properties": {"error": {"type": "object", "required": ["code", "message", "details"],
                             "additionalProperties": False, "properties": {
                                 "code": {"type": "string"}, "message": {"type": "string"},
                                 "details": {"type": "object"}}}}}


def _query_params(schemas: dict, query_schema: dict) -> list[dict]:
    """Query parameters from a model's object schema (its properties, ``required``)."""
    schema = query_schema
    if "$ref" in schema:
        schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
    required = set(schema.get("required", ()))
    out = []
    for name, prop in schema.get("properties", {}).items():
        prop = copy.deepcopy(prop)
        desc = prop.pop("description", None)
        prop.pop("title", None)
        prop.pop("default", None)
        if "anyOf" in prop:  # a query parameter is absent or a value, never null
            rest = [s for s in prop["anyOf"] if s != {"type": "null"}]
            prop.pop("anyOf")
            prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
        p = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if desc:
            p["description"] = desc
        out.append(p)
    return out


_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(?:([^`<]*?)\s*<[^`>]*>|~?([^`]*))`")
_LITERAL = re.compile(r"``(.+?)``", re.S)


def _role_text(m: re.Match) -> str:
    if m.group(1) is not None:  # :func:`the text <target>`
        return m.group(1)
    target = m.group(2)
    return "`" + (target.rsplit(".", 1)[-1] if m.group(0).find("`~") >= 0 else target) + "`"


def plain_text(text: str, *, code: bool = True) -> str:
    """A docstring as OpenAPI text (CommonMark, which Swagger UI renders): reStructuredText
    roles (``:func:`x.y```, ``:class:`~x.Y```) become the name in single backticks and
    double-backtick literals single-backtick code; ``code=False`` (a summary, shown as
    plain text) drops the backticks too."""
    out = _LITERAL.sub(lambda m: "`" + m.group(1) + "`", _ROLE.sub(_role_text, text))
    return out if code else out.replace("`", "")


def plain_descriptions(node: Any) -> Any:
    """``node`` (a schema, an operation, the document) with every ``description`` string
    in plain text (:func:`plain_text`); a new object, ``node`` unchanged."""
    if isinstance(node, dict):
        return {k: (plain_text(v) if k == "description" and isinstance(v, str)
                    else plain_descriptions(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [plain_descriptions(v) for v in node]
    return node


def _summary(docstring: str) -> str:
    """The first sentence of a view's docstring, on one line (≤ 120 characters), in plain
    text (no markup: OpenAPI summaries are not rendered)."""
    first = plain_text(" ".join(docstring.split("\n\n")[0].split()), code=False)
    m = re.match(r"(.+?\.)(\s|$)", first)
    out = m.group(1) if m else first
    return out if len(out) <= 120 else out[:117].rsplit(" ", 1)[0] + " …"


def build(app: Flask, title: str = "RCLL", version: str | None = None) -> dict:
    """The OpenAPI 3.1 document of ``app``: one operation per (rule, method) of
    ``app.url_map`` except HEAD/OPTIONS, Flask's own and the web screens (role
    ``session``, :mod:`api.web`). Raises ``LookupError`` naming a
    view that declared no :func:`doc` (a route the document would miss)."""
    import rcll

    schemas = _Schemas()
    ops: list[tuple[str, str, str, Doc, Callable, Any]] = []
    missing = []
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if rule.endpoint == "static":
            continue
        view = app.view_functions[rule.endpoint]
        if declared_role(view) == "session":
            continue  # a web screen (api/web): HTML for browsers, not part of the API
        d = declared_doc(view)
        if d is None:
            missing.append(rule.endpoint)
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            keys = {"responses": {s: schemas.want(t, "serialization")
                                  for s, t in d.responses.items() if t is not None}}
            if d.body is not None:
                keys["body"] = schemas.want(d.body, "validation")
            if d.query is not None:
                keys["query"] = schemas.want(d.query, "validation")
            ops.append((rule.rule, rule.endpoint, method, d, view, keys))
    if missing:
        raise LookupError(f"routes without an OpenAPI declaration (api.openapi.doc): {missing}")
    mapping, defs = schemas.generate()
    defs["Error"] = ERROR_COMPONENT
    paths: dict[str, dict] = {}
    for rule, endpoint, method, d, view, keys in ops:
        role = declared_role(view) or "undeclared"
        op: dict[str, Any] = {"operationId": f"{endpoint}.{method.lower()}",
                              "tags": list(d.tags) or [endpoint.split(".", 1)[0]],
                              "x-rcll-role": role}
        text = inspect.cleandoc(view.__doc__ or "")
        op["summary"] = plain_text(d.summary or _summary(text) or endpoint, code=False)
        if text:
            op["description"] = text
        if role != "public":
            op["security"] = [{"bearer": []}]
        else:
            op["security"] = []
        params = [{"name": name, "in": "path", "required": True,
                   "schema": ({"type": "string", "pattern": BANK_ID_PATTERN}
                              if name == "bank_id" else {"type": "string", "minLength": 1})}
                  for name in _ARG.findall(rule)]
        if d.query is not None:
            params += _query_params(defs, mapping[keys["query"]])
        if d.paged:
            names = {p["name"] for p in params}
            if "limit" not in names:
                params.append({"name": "limit", "in": "query", "required": False,
                               "schema": {"type": "integer", "minimum": 1, "maximum": 1000}})
            if "offset" not in names:
                params.append({"name": "offset", "in": "query", "required": False,
                               "schema": {"type": "integer", "minimum": 0,
                                          "maximum": 10_000_000}})
        if params:
            op["parameters"] = params
        if d.body is not None:
            op["requestBody"] = {"required": d.body_required, "content": {
                d.body_content_type: {"schema": mapping[keys["body"]]}}}
        responses: dict[str, Any] = {}
        media = d.content_type if isinstance(d.content_type, tuple) else (d.content_type,)
        for status, tp in d.responses.items():
            entry: dict[str, Any] = {"description": HTTP_REASONS.get(status, str(status))}
            body = ({"schema": mapping[keys["responses"][status]]} if tp is not None
                    else {"schema": {"type": "string"}})
            entry["content"] = {m: body for m in media}
            responses[str(status)] = entry
        errs = common_errors(role, rule, d)
        for status, codes in d.errors.items():
            errs.setdefault(status, set()).update(codes)
        for status in sorted(errs):
            codes = sorted(errs[status])
            schema = _error_schema(codes)
            if status in d.responses:  # e.g. /readyz: 503 with its own body, or the envelope
                schema = {"anyOf": [responses[str(status)]["content"][media[0]]["schema"],
                                    schema]}
            responses[str(status)] = {
                "description": f"{HTTP_REASONS.get(status, status)}: {', '.join(codes)}",
                "x-error-codes": codes,
                "content": {JSON: {"schema": schema}}}
        op["responses"] = responses
        paths.setdefault(openapi_path(rule), {})[method.lower()] = op
    return plain_descriptions({
        "openapi": "3.1.0",
        "info": {"title": title, "version": version or rcll.__version__,
                 "description": "RCLL's HTTP API, with Hindsight's routes under /v1/default "
                                "(documentation: docs/reference/http.md). "
                                "Generated from the request and response models."},
        "paths": paths,
        "components": {"schemas": dict(sorted(defs.items())),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                                      "description": "an RCLL API key"}}},
    })


# -- serving -------------------------------------------------------------------------------

bp = Blueprint("openapi", __name__)
_DOCS_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>RCLL API</title>
<link rel="stylesheet" href="docs/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({url: "openapi.json", dom_id: "#swagger-ui"});</script>
</body></html>
"""


def _swagger_dir() -> Path:
    """Swagger UI 5's built files, shipped in the ``flask-swagger-ui`` wheel (its blueprint
    is not used: every route here declares a role)."""
    import flask_swagger_ui

    return Path(flask_swagger_ui.__file__).parent / "dist"


@bp.get("/openapi.json")
@requires("public")
@doc({200: dict[str, Any]}, tags=["docs"])
def openapi_json():
    """This document (OpenAPI 3.1), generated from the routes' declarations; built once
    per process."""
    app = current_app
    cached = app.extensions.get("rcll_openapi")
    if cached is None:
        cached = app.extensions["rcll_openapi"] = build(app)
    return jsonify(cached)


@bp.get("/docs")
@requires("public")
@doc({200: None}, content_type="text/html", tags=["docs"])
def docs_page():
    """Swagger UI over ``/openapi.json`` (assets from the ``flask-swagger-ui`` wheel)."""
    return _DOCS_HTML, 200, {"Content-Type": "text/html; charset=utf-8"}


_ASSETS = {"swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js",
           "favicon-32x32.png", "favicon-16x16.png"}


@bp.get("/docs/<asset>")
@requires("public")
@doc({200: None}, content_type="*/*", errors={404: ["not_found"]},
     tags=["docs"])
def docs_asset(asset: str):
    """One Swagger UI asset (CSS, JavaScript, icons); 404 ``not_found`` for anything else."""
    if asset not in _ASSETS:
        abort(404)
    return send_from_directory(_swagger_dir(), asset, max_age=3600)
