"""A real MCP client session (the SDK's stdio client) against ``python -m mcp_server``
spawned as a subprocess with the test deployment's settings, auth on."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.mcp.conftest import BANK, ROOT, STDIO_BANK, server_env
from tests.mcp.flow import call, verb_flow


def _params(settings, key: str | None, *args: str) -> StdioServerParameters:
    extra = {"RCLL_API_KEY": key} if key else {}
    return StdioServerParameters(command=sys.executable, args=["-m", "mcp_server", *args],
                                 env=server_env(settings, **extra), cwd=str(ROOT))


@pytest.mark.anyio
async def test_stdio_session_every_verb(auth_settings, auth_services, keys):
    async with stdio_client(_params(auth_settings, keys["writer"], "--bank", BANK)) as (r, w), \
            ClientSession(r, w) as session:
        init = await session.initialize()
        assert init.server_info.name == "rcll"
        await verb_flow(session, STDIO_BANK)
    # every write went through the services, so each is in the audit log as the key's member
    with auth_services.pool.connection() as conn:
        rows = conn.execute("SELECT actor, action, count(*) AS n FROM audit_log "
                            "WHERE bank_id = %s AND actor = %s GROUP BY actor, action",
                            (STDIO_BANK, "mcp-writer")).fetchall()
    assert {(r["actor"], r["action"]): r["n"] for r in rows} == {
        ("mcp-writer", "retain"): 2, ("mcp-writer", "unit.remember"): 2,
        ("mcp-writer", "unit.derive"): 1, ("mcp-writer", "unit.correct"): 1,
        ("mcp-writer", "unit.supersede"): 1, ("mcp-writer", "unit.forget"): 1}


@pytest.mark.anyio
async def test_stdio_roles(auth_settings, keys):
    async with stdio_client(_params(auth_settings, keys["reader"], "--bank", BANK)) as (r, w), \
            ClientSession(r, w) as session:
        await session.initialize()
        err, denied = await call(session, "memory_remember", text="readers cannot write")
        assert err and (denied["status"], denied["error"]["code"]) == (403, "forbidden")
        err, denied = await call(session, "memory_recall", query="x", bank_id="mcp-other")
        assert err and denied["status"] == 403
        err, denied = await call(session, "memory_recall", query="x", purpose="audit")
        assert err and (denied["status"], denied["error"]["code"]) == (403, "purpose_not_granted")


@pytest.mark.parametrize("key,code", [(None, "missing_api_key"), ("rcll_nope_nothing", "invalid_api_key"),
                                      ("revoked", "invalid_api_key")])
def test_stdio_refuses_to_start_without_a_valid_key(auth_settings, keys, key, code):
    key = keys.get(key, key) if key else None
    env = server_env(auth_settings, **({"RCLL_API_KEY": key} if key else {}))
    proc = subprocess.run([sys.executable, "-m", "mcp_server"], env=env, cwd=ROOT,
                          input="", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"rcll mcp: {code}" in proc.stderr and proc.stdout == ""


@pytest.mark.anyio
async def test_stdio_read_only_deployment_refuses_every_write(auth_settings, auth_services, keys):
    writes = {"memory_retain": {"content": "x", "sync": True},
              "memory_remember": {"text": "x"},
              "memory_derive": {"source_ids": ["00000000-0000-0000-0000-000000000001"],
                                "text": "x"},
              "memory_correct": {"unit_id": "00000000-0000-0000-0000-000000000001",
                                 "revision": 1, "text": "x"},
              "memory_supersede": {"unit_id": "00000000-0000-0000-0000-000000000001",
                                   "revision": 1, "text": "x"},
              "memory_forget": {"unit_id": "00000000-0000-0000-0000-000000000001"}}
    with auth_services.pool.connection() as conn:
        before = conn.execute("SELECT (SELECT count(*) FROM memory_units) AS u, "
                              "(SELECT count(*) FROM audit_log) AS a").fetchone()
    params = _params(auth_settings, keys["writer"], "--bank", BANK)
    params.env["RCLL_READ_ONLY"] = "on"
    async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        for tool, args in writes.items():
            err, denied = await call(session, tool, **args)
            assert err and (denied["status"], denied["error"]["code"]) == \
                (403, "read_only_deployment"), (tool, denied)
        err, rec = await call(session, "memory_recall", query="anything")
        assert not err and "results" in rec
    with auth_services.pool.connection() as conn:
        after = conn.execute("SELECT (SELECT count(*) FROM memory_units) AS u, "
                             "(SELECT count(*) FROM audit_log) AS a").fetchone()
    assert after == before
