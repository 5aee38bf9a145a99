"""Every route declares a role; a route that does not is refused; every non-public route
refuses a caller without a key."""

from __future__ import annotations

import re

from flask import Blueprint

from api.auth import LEVELS, declared_role

from .conftest import bearer

PUBLIC = {"health.healthz", "health.readyz", "metrics.metrics",
          "hindsight.version", "hindsight.health",  # Hindsight's GET /version, /health
          "health.health_live", "health.health_ready",  # Hindsight's /health/live, /health/ready
          "openapi.openapi_json", "openapi.docs_page", "openapi.docs_asset"}


def concrete(rule) -> str:
    """The rule's path with each ``<arg>`` filled in."""
    return re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda m: f"x-{m.group(1)}", rule.rule)


def test_every_route_declares_a_role(auth_app):
    rules = list(auth_app.url_map.iter_rules())
    assert len(rules) >= 35
    missing = [r.endpoint for r in rules
               if declared_role(auth_app.view_functions[r.endpoint]) not in LEVELS]
    assert missing == []
    public = {r.endpoint for r in rules
              if declared_role(auth_app.view_functions[r.endpoint]) == "public"}
    assert public == PUBLIC


def test_every_non_public_route_needs_a_key(auth_app):
    api = auth_app.test_client()
    walked = 0
    for rule in auth_app.url_map.iter_rules():
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            r = api.open(concrete(rule), method=method, json={})
            if declared_role(auth_app.view_functions[rule.endpoint]) == "session":
                # a web screen (api/web): a bearer key opens none; without a session a GET
                # goes to the sign-in screen, a POST without its CSRF token is 403
                r = api.open(concrete(rule), method=method, headers=bearer("nope"))
                if method == "GET":  # /ui/static/x-name: no such file (404)
                    assert r.status_code in (200, 302, 404), rule.rule
                    if r.status_code == 302:
                        assert r.headers["Location"].startswith("/ui"), rule.rule
                else:
                    assert r.status_code == 403, (method, rule.rule)
                continue
            if rule.endpoint in PUBLIC:
                # /docs/x-asset: no such asset (404), but public all the same
                assert r.status_code in ((404,) if rule.endpoint == "openapi.docs_asset"
                                         else (200, 503)), rule.rule
                continue
            walked += 1
            assert r.status_code == 401, (method, rule.rule, r.get_json())
            assert r.get_json()["error"]["code"] == "missing_api_key"
            r = api.open(concrete(rule), method=method, json={}, headers=bearer("nope"))
            assert r.get_json()["error"]["code"] == "invalid_api_key", (method, rule.rule)
    assert walked >= 34  # every non-public (route, method) of this branch; more as others land
    # an unknown path does not tell a keyless caller whether it exists
    assert api.get("/no/such/route").status_code == 401


def test_undeclared_route_is_refused(auth_services):
    from api.app import create_app

    app = create_app(services=auth_services, enqueue=lambda *a: None)
    bp = Blueprint("undeclared", __name__)
    hits = []

    @bp.get("/v1/default/banks/<bank_id>/undeclared")
    def undeclared(bank_id):
        hits.append(bank_id)
        return {"ok": True}

    app.register_blueprint(bp)
    from .conftest import ADMIN
    r = app.test_client().get("/v1/default/banks/b/undeclared", headers=ADMIN)
    assert (r.status_code, r.get_json()["error"]["code"]) == (403, "route_not_declared")
    assert hits == []
