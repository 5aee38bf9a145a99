"""Break9: a stdio MCP session runs as its key for the life of the process — revoking that
key, or the member's grant, must refuse the NEXT tool call (as the HTTP API and MCP over
HTTP do), not only the next process start. The SDK's stdio client against a spawned
``python -m mcp_server``, auth on."""

from __future__ import annotations

import sys
import uuid

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.mcp.conftest import ALL, ROOT, STDIO_BANK, server_env
from tests.mcp.flow import call


@pytest.mark.anyio
async def test_revoked_grant_and_key_refuse_the_next_call(auth_settings, auth_services, keys):
    acc = auth_services.access
    admin = acc.bootstrap_admin()
    member = f"mcp-rv-{uuid.uuid4().hex[:6]}"
    acc.create_member(admin, member, default_purposes=ALL)
    acc.set_grant(admin, STDIO_BANK, member, "write", ALL)
    issued = acc.issue_key(admin, member)
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "mcp_server", "--bank", STDIO_BANK],
                                   env=server_env(auth_settings, RCLL_API_KEY=issued["key"]),
                                   cwd=str(ROOT))
    async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        err, out = await call(session, "memory_remember", text="Stdio revocation probe one.")
        assert not err, out
        acc.set_grant(admin, STDIO_BANK, member, "read", ["assist"])  # downgraded
        err, out = await call(session, "memory_remember", text="Stdio revocation probe two.")
        assert err and (out["status"], out["error"]["code"]) == (403, "forbidden"), out
        err, out = await call(session, "memory_recall", query="revocation probe")
        assert not err, out
        acc.revoke_key(admin, issued["key_id"])
        for tool, args in (("memory_recall", {"query": "revocation probe"}),
                           ("memory_read", {"unit_id": "00000000-0000-0000-0000-000000000001"})):
            err, out = await call(session, tool, **args)
            assert err and (out["status"], out["error"]["code"]) == (401, "invalid_api_key"), \
                (tool, out)
    with auth_services.pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM memory_units WHERE bank_id = %s AND text "
                         "LIKE 'Stdio revocation probe%%'", (STDIO_BANK,)).fetchone()["n"]
    assert n == 1
