"""Break9: a key with every role on bank A gets 403 ``forbidden`` on bank B through EVERY
route that names a bank (walked from the URL map, every method), and changes nothing."""

from __future__ import annotations

import uuid

from flask import url_for

from api.auth import declared_role
from tests.access.conftest import ADMIN, bearer, counts, make_member

BANK_A, BANK_B = "brk-own", "brk-foreign"


def test_every_bank_route_refuses_another_bank(auth_app, auth_services):
    api = auth_app.test_client()
    m = f"ob{uuid.uuid4().hex[:6]}"
    key = make_member(api, m, BANK_A, "admin")
    r = api.post(f"/banks/{BANK_B}/units", json={"text": "Foreign bank unit."}, headers=ADMIN)
    assert r.status_code == 201
    foreign_unit = r.get_json()["id"]
    before = counts(auth_services)
    tried, fails = 0, []
    for rule in auth_app.url_map.iter_rules():
        if "bank_id" not in rule.arguments:
            continue
        if declared_role(auth_app.view_functions[rule.endpoint]) == "session":
            continue  # a web screen: a bearer key opens none (tests/web, test_fail_closed)
        values = {a: foreign_unit for a in rule.arguments}
        values["bank_id"] = BANK_B
        if "member_id" in values:
            values["member_id"] = m
        with auth_app.test_request_context():
            path = url_for(rule.endpoint, **values)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            tried += 1
            r = api.open(path, method=method, json={} if method != "GET" else None,
                         headers=bearer(key))
            body = r.get_json(silent=True) or {}
            if r.status_code != 403 or body.get("error", {}).get("code") != "forbidden":
                fails.append((method, path, r.status_code, str(body)[:120]))
    assert tried >= 30, tried
    assert not fails, fails
    assert counts(auth_services) == before
