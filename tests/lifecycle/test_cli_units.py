"""``rcll unit …``: every verb through the CLI and the HTTP client (the app served in-process
through httpx's WSGI transport)."""

import json

import httpx
from click.testing import CliRunner

from rcll.cli import units as cli_units
from rcll.cli.main import cli
from rcll.client import RCLLClient


def test_unit_commands(lc_app, monkeypatch):
    client = RCLLClient("http://rcll.test", transport=httpx.WSGITransport(app=lc_app))
    monkeypatch.setattr(cli_units, "_client", lambda: client)
    bank = "lc-cli"
    run = CliRunner()

    def call(*args):
        res = run.invoke(cli, ["unit", *args])
        return res.exit_code, (json.loads(res.output) if res.exit_code == 0 else res.output)

    code, u = call("remember", "The nightly backup goes to bucket b-7.", "--bank", bank,
                   "--kind", "fact", "--purpose", "operate", "--tag", "backup",
                   "--metadata", '{"src": "runbook"}')
    assert code == 0 and (u["kind"], u["purposes"], u["tags"], u["metadata"]) == (
        "fact", ["operate"], ["backup"], {"src": "runbook"})
    code, got = call("read", u["id"], "--bank", bank)
    assert code == 0 and got["text"] == u["text"]
    code, c = call("correct", u["id"], "--bank", bank, "--revision", "1", "--text",
                   "The nightly backup goes to bucket b-8.")
    assert code == 0 and c["revision"] == 2
    code, out = call("correct", u["id"], "--bank", bank, "--revision", "1", "--layer", "1")
    assert code == 1 and "409 revision_conflict" in out
    code, d = call("derive", "Backups live in b-8.", "--bank", bank, "--source", u["id"])
    assert code == 0 and d["origin"] == "derived" and d["purposes"] == ["operate"]
    code, s = call("supersede", u["id"], "The nightly backup goes to bucket b-9.", "--bank",
                   bank, "--revision", "2")
    assert code == 0 and s["superseded"]["superseded_by_id"] == s["unit"]["id"]
    code, f = call("forget", d["id"], "--bank", bank, "--reason", "test")
    assert code == 0 and f["unit_id"] == d["id"]
    code, got = call("read", d["id"], "--bank", bank)
    assert code == 0 and got["forgotten"] is True
    client.close()
