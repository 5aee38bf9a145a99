"""``rcll members|keys|grants|audit`` work on the database (same service as HTTP), and the
Python client / CLI send ``Authorization: Bearer $RCLL_API_KEY``."""

from __future__ import annotations

import httpx
import pytest
from click.testing import CliRunner

from rcll.cli.main import cli
from rcll.client import RCLLClient, RCLLHTTPError

from .conftest import ADMIN, bearer

BANK = "cli-access-bank"


@pytest.fixture()
def run(auth_settings, monkeypatch):
    import rcll.bootstrap
    import rcll.cli.access

    monkeypatch.setattr(rcll.cli.access, "get_settings", lambda: auth_settings)
    monkeypatch.setattr(rcll.bootstrap, "get_settings", lambda: auth_settings)
    runner = CliRunner()

    def invoke(*args: str) -> str:
        res = runner.invoke(cli, list(args), catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.stdout

    return invoke


def test_cli_member_key_grant_then_the_key_works(run, api):
    run("members", "add", "cli-agent", "--name", "CLI agent", "--purposes", "assist,audit")
    key = run("keys", "issue", "cli-agent", "--label", "ci").strip().splitlines()[-1]
    assert key.startswith("rcll_")
    run("grants", "set", "cli-agent", "--bank", BANK, "--role", "write")
    assert api.post(f"/banks/{BANK}/retain", json={"items": [{"content": "hello"}]},
                    headers=bearer(key)).status_code == 202
    listed = run("keys", "list", "cli-agent", "--json")
    assert key not in listed and '"prefix"' in listed and "hmac" not in listed
    grants = run("grants", "list", "--bank", BANK, "--json")
    assert '"role": "write"' in grants and '"audit"' in grants
    assert "cli-agent" in run("members", "list", "--json")
    audit = run("audit", "--bank", BANK, "--json")
    assert '"grant.set"' in audit and '"actor": "cli:' in audit and '"retain"' in audit
    kid = api.get("/members/cli-agent/keys", headers=ADMIN).get_json()["keys"][0]["key_id"]
    run("keys", "revoke", kid)
    assert api.get("/me", headers=bearer(key)).status_code == 401
    run("grants", "revoke", "cli-agent", "--bank", BANK)
    run("members", "disable", "cli-agent")
    assert api.get("/members/cli-agent", headers=ADMIN).get_json()["disabled_at"] is not None


def test_cli_errors_are_one_line(auth_settings, monkeypatch):
    import rcll.bootstrap
    import rcll.cli.access

    monkeypatch.setattr(rcll.cli.access, "get_settings", lambda: auth_settings)
    monkeypatch.setattr(rcll.bootstrap, "get_settings", lambda: auth_settings)
    res = CliRunner().invoke(cli, ["grants", "set", "ghost-member", "--bank", BANK,
                                   "--role", "read"])
    assert res.exit_code == 1 and "member_not_found" in res.output


def test_python_client_sends_the_key(auth_app):
    transport = httpx.WSGITransport(app=auth_app)
    with RCLLClient("http://rcll.test", api_key=None, transport=transport) as anon:
        with pytest.raises(RCLLHTTPError) as exc:
            anon.jobs()
        assert (exc.value.status, exc.value.code) == (401, "missing_api_key")
    with RCLLClient("http://rcll.test", api_key=ADMIN["Authorization"][7:],
                    transport=transport) as admin:
        jobs = admin.jobs(BANK)
        assert isinstance(jobs, list) and all(j["bank_id"] == BANK for j in jobs)


def test_cli_client_uses_rcll_api_key(auth_settings, monkeypatch):
    import rcll.cli.main as main

    seen = {}
    monkeypatch.setattr(main, "get_settings",
                        lambda: auth_settings.model_copy(update={"api_key": "rcll_k"}))
    monkeypatch.setattr(httpx, "get", lambda *a, **k: httpx.Response(200, request=httpx.Request("GET", a[0])))
    import rcll.client

    class Spy(rcll.client.RCLLClient):
        def __init__(self, *a, **k):
            seen.update(k)
            super().__init__(*a, **k)

    monkeypatch.setattr(rcll.client, "RCLLClient", Spy)
    main._client().close()
    assert seen["api_key"] == "rcll_k"
