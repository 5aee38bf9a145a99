"""Issue 25: Hindsight 1.1's route table. The list comes from the installed
``hindsight-client`` package (every method and path its generated API classes call), not
from a hand-written list; every route is served by RCLL or answers 400
``llm_not_configured`` / 501 ``not_implemented`` with a reason, never a 404 or 405 for a
route Hindsight has. The table goes to ``benchmarks/results/hindsight_routes.md``.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from pathlib import Path

import pytest

from api.hindsight_routes import HINDSIGHT_ROUTES, HINDSIGHT_VERSION
from api.routes import hindsight_unserved

hs_api = pytest.importorskip("hindsight_client_api.api")

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "benchmarks" / "results" / "hindsight_routes.md"
BANK = "hs-route-table"


def package_routes() -> set[tuple[str, str]]:
    """``{(METHOD, path template)}`` of every call in the client's generated API classes."""
    out = set()
    for _, module in inspect.getmembers(hs_api, inspect.ismodule):
        out.update(re.findall(r"method='([A-Z]+)',\s*resource_path='([^']+)'",
                              inspect.getsource(module)))
    return out


def test_the_route_list_is_the_installed_clients():
    import hindsight_client

    routes = package_routes()
    assert len(routes) == 101  # what hindsight-client 1.1.0 calls
    assert set(HINDSIGHT_ROUTES) == routes
    assert len(HINDSIGHT_ROUTES) == len(routes)  # no route listed twice
    assert getattr(hindsight_client, "__version__", HINDSIGHT_VERSION) == HINDSIGHT_VERSION


def _probe_path(path: str) -> str:
    filled = path.replace("{bank_id}", BANK)
    return re.sub(r"\{[^}]+\}", "00000000-0000-0000-0000-000000000000", filled)


def test_every_hindsight_route_is_served_or_says_why(app, client):
    assert client.put(f"/v1/default/banks/{BANK}", json={}).status_code in (200, 201)
    rows, statuses = [], Counter()
    # destructive probes last, so the bank the others read still exists
    order = sorted(package_routes(), key=lambda r: (r[0] == "DELETE", r[1], r[0]))
    for method, path in order:
        added = not hindsight_unserved.served_by_rcll(app, method, path)
        kwargs = {"json": {}} if method in ("POST", "PUT", "PATCH") else {}
        resp = client.open(_probe_path(path), method=method, **kwargs)
        body = resp.get_json(silent=True) or {}
        code = (body.get("error") or {}).get("code") if isinstance(body, dict) else None
        # a route Flask does not know answers 404 not_found / 405 method_not_allowed
        assert code not in ("not_found", "method_not_allowed"), (method, path, resp.status_code)
        assert resp.status_code != 405, (method, path)
        if added:
            llm, reason = hindsight_unserved.classify(method, path)
            expect = (400, "llm_not_configured") if llm else (501, "not_implemented")
            assert (resp.status_code, code) == expect, (method, path, resp.status_code, body)
            assert reason in body["error"]["message"]
            answer = f"{resp.status_code} `{code}`: {reason}"
            statuses["400 llm_not_configured" if llm else "501 not_implemented"] += 1
        else:
            answer = f"served (probe with empty input: {resp.status_code}" + (
                f" `{code}`)" if code else ")")
            statuses["served"] += 1
        rows.append((path, method, answer))
    # 28 served before this table (3 more only looked served: SHADOWED), + health/live, /ready
    assert statuses["served"] >= 30
    assert sum(statuses.values()) == 101
    rows.sort()
    lines = [f"# Hindsight {HINDSIGHT_VERSION}'s routes in RCLL", "",
             "Written by `tests/api/test_hindsight_routes.py` from the routes the installed "
             "`hindsight-client` package calls. A route RCLL does not serve answers 400 "
             "`llm_not_configured` (it needs an LLM and none is configured) or 501 "
             "`not_implemented`, with the reason below; the probe sends empty input, so a "
             "served route's status there is its answer to bad or missing input.", "",
             f"Served {statuses['served']}; 400 llm_not_configured "
             f"{statuses['400 llm_not_configured']}; 501 not_implemented "
             f"{statuses['501 not_implemented']}; of {sum(statuses.values())}.", "",
             "| path | method | RCLL |", "|---|---|---|"]
    lines += [f"| `{p}` | {m} | {a} |" for p, m, a in rows]
    TABLE.write_text("\n".join(lines) + "\n")


def test_an_llm_bound_route_with_an_llm_configured_is_501_with_its_reason(
        app, client, services, monkeypatch):
    monkeypatch.setattr(services.settings, "llm_provider", "offline")
    method, path = "GET", "/v1/default/banks/{bank_id}/knowledge-base/export"
    assert not hindsight_unserved.served_by_rcll(app, method, path)
    resp = client.get(_probe_path(path))
    # the family is not built whatever the LLM: 501 and the reason, with RCLL's nearest route
    assert resp.status_code == 501
    assert resp.get_json()["error"]["code"] == "not_implemented"
    assert "closets" in resp.get_json()["error"]["message"]
