"""A real MCP client session over streamable HTTP (the SDK's ``streamable_http_client``)
against ``python -m mcp_server --transport http``, auth on: every request carries
``Authorization: Bearer <key>``; a missing, wrong or revoked key is answered 401 before the
MCP transport sees the request, and nothing is written."""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.mcp.conftest import HTTP_BANK
from tests.mcp.flow import call, verb_flow

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _session(url: str, key: str, statuses: list | None = None):
    async def record(resp):
        if statuses is not None:
            statuses.append(resp.status_code)

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"},
                                timeout=httpx2.Timeout(30, read=300),
                                event_hooks={"response": [record]})
    return client, streamable_http_client(url, http_client=client)


@pytest.mark.anyio
async def test_http_session_every_verb(http_server, keys):
    client, transport = _session(http_server, keys["writer"])
    async with client, transport as (r, w), ClientSession(r, w) as session:
        init = await session.initialize()
        assert init.server_info.name == "rcll"
        await verb_flow(session, HTTP_BANK)


@pytest.mark.anyio
async def test_http_principal_is_per_request(http_server, keys):
    """The outsider's key holds no grant on the server's default bank: every tool call is
    judged by the key of its own request."""
    client, transport = _session(http_server, keys["outsider"])
    async with client, transport as (r, w), ClientSession(r, w) as session:
        await session.initialize()
        err, denied = await call(session, "memory_recall", query="staging")
        assert err and (denied["status"], denied["error"]["code"]) == (403, "forbidden")
        err, denied = await call(session, "memory_remember", text="not here")
        assert err and denied["status"] == 403
        ok_err, _ = await call(session, "memory_recall", query="staging", bank_id="mcp-other")
        assert not ok_err


@pytest.mark.parametrize("key,code", [(None, "missing_api_key"),
                                      ("rcll_bogus_0123456789", "invalid_api_key"),
                                      ("revoked", "invalid_api_key")])
def test_http_refuses_bad_keys_with_401(http_server, keys, auth_services, key, code):
    with auth_services.pool.connection() as conn:
        before = conn.execute("SELECT (SELECT count(*) FROM memory_units) AS u, "
                              "(SELECT count(*) FROM jobs) AS j").fetchone()
    headers = dict(HEADERS)
    if key:
        headers["Authorization"] = f"Bearer {keys.get(key, key)}"
    resp = httpx.post(http_server, json=INIT, headers=headers, timeout=30)
    assert resp.status_code == 401 and resp.headers["www-authenticate"] == "Bearer"
    assert resp.json()["error"]["code"] == code
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "memory_remember", "arguments": {"text": "sneaky"}}}
    assert httpx.post(http_server, json=call, headers=headers, timeout=30).status_code == 401
    with auth_services.pool.connection() as conn:
        after = conn.execute("SELECT (SELECT count(*) FROM memory_units) AS u, "
                             "(SELECT count(*) FROM jobs) AS j").fetchone()
    assert after == before


@pytest.mark.anyio
async def test_http_sdk_client_with_wrong_key_fails(http_server):
    statuses: list[int] = []
    client, transport = _session(http_server, "rcll_wrong_key", statuses)
    with pytest.raises(BaseException) as info:  # the SDK raises MCPError in a task group
        async with client, transport as (r, w), ClientSession(r, w) as session:
            await session.initialize()
    assert "MCPError" in repr(info.value)
    assert statuses and set(statuses) == {401}
