"""Print a human-readable MCP client transcript against a running RCLL stack (issue 9's
must-show): list tools, retain, recall, correct (current revision), correct with a stale
revision (409), forget — through the official SDK's client.

    # streamable HTTP: a server started with `rcll mcp --transport http`
    python scripts/mcp_transcript.py --url http://127.0.0.1:8766/mcp --key "$RCLL_API_KEY"
    # stdio: spawns `python -m mcp_server` with this environment (RCLL_* settings)
    python scripts/mcp_transcript.py --key "$RCLL_API_KEY"

The bank (``--bank``, default ``mcp-transcript``) must be writable by the key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]


def show(title: str, payload) -> None:
    print(f"\n>>> {title}")
    text = payload if isinstance(payload, str) else json.dumps(payload, indent=2,
                                                               ensure_ascii=False)
    print(textwrap.indent(text, "    "))


@asynccontextmanager
async def connect(url: str | None, key: str | None):
    """A started ClientSession over streamable HTTP (``url``) or stdio."""
    if url:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) \
                as client, streamable_http_client(url, http_client=client) as (r, w), \
                ClientSession(r, w) as session:
            yield session
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if key:
        env["RCLL_API_KEY"] = key
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server"], env=env,
                                   cwd=str(ROOT))
    async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
        yield session


async def tool(session: ClientSession, name: str, args: dict) -> dict:
    print(f"\n>>> call {name} {json.dumps(args, ensure_ascii=False)}")
    res = await session.call_tool(name, args)
    print(f"    <- {'isError: true' if res.is_error else 'ok'}")
    return res.structured_content


def _first_sentence(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat.split(". ")[0].rstrip(".") + "."


def brief_unit(u: dict) -> dict:
    return {k: u.get(k) for k in ("id", "text", "kind", "revision", "audience", "purposes",
                                  "layer", "forgotten")}


async def main(args) -> None:
    bank = args.bank
    async with connect(args.url, args.key) as session:
        init = await session.initialize()
        print(f"connected to {init.server_info.name} {init.server_info.version} over "
              f"{'streamable HTTP ' + args.url if args.url else 'stdio'}; protocol "
              f"{init.protocol_version}")
        tools = await session.list_tools()
        show("list_tools", "\n".join(f"{t.name}: {_first_sentence(t.description)}"
                                     for t in tools.tools))

        r = await tool(session, "memory_retain", {
            "bank_id": bank, "sync": True, "document_id": f"runbook/backups-{uuid.uuid4().hex[:8]}",
            "content": "The nightly backup of the orders database runs at 02:00 UTC "
                       "and is kept for 30 days."})
        show("retain answer", {k: r.get(k) for k in ("operation_id", "status", "items_count")}
             if "error" not in r else r)

        rec = await tool(session, "memory_recall", {
            "bank_id": bank, "query": "when does the orders backup run?", "limit": 3,
            "tiers": ["cold"]})
        if "error" in rec or not rec["results"]:
            show("recall answer", rec)
            return
        show("recall answer", {"tiers": rec["tiers"], "mode": rec["mode"],
                               "results": [{"id": x["id"], "text": x["text"],
                                            "score": round(x["scores"]["final"], 4)}
                                           for x in rec["results"]]})
        unit_id = rec["results"][0]["id"]

        cur = await tool(session, "memory_read", {"bank_id": bank, "unit_id": unit_id})
        show("read answer", brief_unit(cur) if "error" not in cur else cur)
        rev = cur.get("revision", 1)

        fixed = await tool(session, "memory_correct", {
            "bank_id": bank, "unit_id": unit_id, "revision": rev,
            "text": "The nightly backup of the orders database runs at 03:00 UTC "
                    "and is kept for 30 days."})
        show("correct answer", brief_unit(fixed) if "error" not in fixed else fixed)

        stale = await tool(session, "memory_correct", {
            "bank_id": bank, "unit_id": unit_id, "revision": rev,
            "text": "The backup runs whenever."})
        show("correct with the stale revision", stale)

        gone = await tool(session, "memory_forget", {"bank_id": bank, "unit_id": unit_id,
                                                     "reason": "transcript demo"})
        show("forget answer", gone)

        after = await tool(session, "memory_recall", {
            "bank_id": bank, "query": "when does the orders backup run?", "limit": 3,
            "tiers": ["cold"]})
        show("recall after forget", {"results": [x["id"] for x in after.get("results", [])],
                                     "forgotten unit returned": unit_id in
                                     {x["id"] for x in after.get("results", [])}})

        prompt = await session.get_prompt("session_start", {"bank_id": bank,
                                                            "budget_tokens": "200"})
        show("prompt session_start", prompt.messages[0].content.text)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="streamable HTTP endpoint (default: spawn stdio)")
    ap.add_argument("--key", default=os.environ.get("RCLL_API_KEY"), help="API key")
    ap.add_argument("--bank", default="mcp-transcript")
    anyio.run(main, ap.parse_args())
