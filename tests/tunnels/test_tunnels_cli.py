"""``rcll tunnels add|list|rm`` and ``rcll bridge`` through the Python client (over the
app in-process: httpx's WSGI transport)."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from rcll.cli import main as cli_main
from rcll.client import RCLLClient, RCLLHTTPError
from tests.tunnels.support import BANK_A, BANK_B


@pytest.fixture()
def api(app, monkeypatch):
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=app))
    monkeypatch.setattr(cli_main, "_client", lambda: client)
    return client


def test_cli_and_client(api, banks):
    a, b, ids_a, ids_b = banks
    run = CliRunner().invoke
    r = run(cli_main.cli, ["tunnels", "add", ids_a[BANK_A[2]], ids_b[BANK_B[0]],
                           "--relationship", "runbook", "--one-way"])
    assert r.exit_code == 0, r.output
    assert "->" in r.output and "<->" not in r.output and "[runbook]" in r.output
    tid = r.output.split()[1].rstrip(":")
    r = run(cli_main.cli, ["tunnels", "list", "--bank", b, "--json"])
    page = json.loads(r.output)
    assert page["total"] == 1 and page["tunnels"][0]["id"] == tid
    assert page["tunnels"][0]["bidirectional"] is False
    res = api.recall(a, "why did the payroll export fail?", tiers=["cold"])
    assert [x["tunnel"]["id"] for x in res["results"] if "tunnel" in x] == [tid]
    res = api.recall(a, "why did the payroll export fail?", tiers=["cold"], follow_tunnels=False)
    assert not [x for x in res["results"] if "tunnel" in x]
    r = run(cli_main.cli, ["bridge", "--source-bank", a, "--source-query",
                           "how is the payroll export encrypted?", "--target-bank", b,
                           "--target-query", "who waters the office plants?"])
    assert r.exit_code == 0, r.output
    assert f"source: {a}/{ids_a[BANK_A[1]]}" in r.output
    assert f"target: {b}/{ids_b[BANK_B[1]]}" in r.output and "(created)" in r.output
    r = run(cli_main.cli, ["bridge", "--source-bank", a, "--source-query", "x"])
    assert r.exit_code == 2 and "needs all of" in r.output
    r = run(cli_main.cli, ["tunnels", "rm", tid])
    assert r.exit_code == 0 and f"deleted tunnel {tid}" in r.output
    with pytest.raises(RCLLHTTPError) as err:
        api.tunnel(tid)
    assert err.value.status == 404 and err.value.code == "tunnel_not_found"
    r = run(cli_main.cli, ["tunnels", "add", ids_a[BANK_A[0]], ids_a[BANK_A[1]]])
    assert r.exit_code == 1 and "400 same_bank" in r.output
    assert api.tunnels(a)["total"] == 1  # the bridge's
