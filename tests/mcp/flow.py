"""The verb walk both transports run: list tools, then every verb through a real MCP client
session, asserting the answers (not a test module: test_stdio/test_http call it)."""

from __future__ import annotations

from mcp import ClientSession

TOOLS = {"memory_recall", "memory_retain", "memory_remember", "memory_read", "memory_derive",
         "memory_correct", "memory_supersede", "memory_forget"}


async def call(session: ClientSession, tool: str, **args) -> tuple[bool, dict]:
    """``(is_error, structured payload)`` of one tool call."""
    res = await session.call_tool(tool, args)
    assert res.structured_content is not None, res
    return bool(res.is_error), res.structured_content


async def ok(session: ClientSession, tool: str, **args) -> dict:
    err, payload = await call(session, tool, **args)
    assert not err, payload
    return payload


async def verb_flow(session: ClientSession, bank: str) -> dict:
    """Every verb once against ``bank`` (the server's default bank is left unused so the
    argument is exercised); returns what it made."""
    tools = await session.list_tools()
    assert {t.name for t in tools.tools} == TOOLS
    by_name = {t.name: t for t in tools.tools}
    assert by_name["memory_recall"].annotations.read_only_hint is True
    assert by_name["memory_forget"].annotations.destructive_hint is True
    assert "revision" in by_name["memory_correct"].input_schema["required"]

    # retain (sync: stored before it answers) and async (a queued job)
    r = await ok(session, "memory_retain", bank_id=bank, sync=True,
                 content="The staging database is restored every Friday at 18:00.",
                 document_id="ops/staging")
    assert r["state"] == "succeeded" and r["async"] is False and r["items_count"] == 1
    # the HTTP retain answer's shape (rcll.retain.submit.retain_answer): Hindsight's status
    assert set(r) == {"success", "bank_id", "items_count", "async", "operation_id",
                      "operation_ids", "status", "state", "operation"}, r
    assert r["status"] == "completed" and r["operation_ids"] == [r["operation_id"]]
    queued = await ok(session, "memory_retain", bank_id=bank,
                      items=[{"content": "Quarterly review moved to room 4B."}])
    assert queued["state"] == "queued" and queued["operation_id"]

    # recall finds the retained unit (cold tier: the full pipeline)
    rec = await ok(session, "memory_recall", bank_id=bank, query="when is staging restored?",
                   tiers=["cold"], purpose="assist")
    assert rec["results"] and "staging database" in rec["results"][0]["text"]
    retained_id = rec["results"][0]["id"]

    # remember (one unit, synchronous), an L0 unit for the session context
    l0 = await ok(session, "memory_remember", bank_id=bank, layer=0,
                  text="You are the on-call agent for the payments team.")
    assert l0["revision"] == 1 and l0["layer"] == 0 and l0["audience"] == "bank"
    note = await ok(session, "memory_remember", bank_id=bank, kind="decision",
                    text="Deploys freeze on the last Friday of each month.")

    # read
    got = await ok(session, "memory_read", bank_id=bank, unit_id=note["id"])
    assert got["id"] == note["id"] and got["text"].startswith("Deploys freeze")

    # derive from two units
    derived = await ok(session, "memory_derive", bank_id=bank,
                       source_ids=[note["id"], retained_id],
                       text="No staging restore coincides with a deploy freeze problem.")
    assert derived["origin"] == "derived"
    assert {s["id"] for s in derived["sources"]} == {note["id"], retained_id}

    # correct, then correct again with the stale revision: 409 revision_conflict
    fixed = await ok(session, "memory_correct", bank_id=bank, unit_id=note["id"], revision=1,
                     text="Deploys freeze on the last Thursday of each month.")
    assert fixed["revision"] == 2 and "Thursday" in fixed["text"]
    err, stale = await call(session, "memory_correct", bank_id=bank, unit_id=note["id"],
                            revision=1, text="Deploys never freeze.")
    assert err and stale["status"] == 409
    assert stale["error"]["code"] == "revision_conflict"
    assert stale["error"]["details"]["current_revision"] == 2

    # supersede at the current revision
    sup = await ok(session, "memory_supersede", bank_id=bank, unit_id=note["id"], revision=2,
                   text="Deploy freezes are cancelled from June.")
    assert sup["superseded"]["id"] == note["id"] and sup["unit"]["id"] != note["id"]

    # forget: tombstone, then it is gone from recall
    gone = await ok(session, "memory_forget", bank_id=bank, unit_id=retained_id,
                    reason="test")
    assert gone["unit_id"] == retained_id and gone["forgotten_at"]
    rec = await ok(session, "memory_recall", bank_id=bank, query="when is staging restored?",
                   tiers=["cold"])
    assert retained_id not in {x["id"] for x in rec["results"]}

    # refusals carry the HTTP status and code
    err, missing = await call(session, "memory_read", bank_id=bank,
                              unit_id="00000000-0000-0000-0000-000000000000")
    assert err and (missing["status"], missing["error"]["code"]) == (404, "unit_not_found")
    err, bad = await call(session, "memory_retain", bank_id=bank)
    assert err and (bad["status"], bad["error"]["code"]) == (400, "invalid_request")

    # session-start context: resource template and prompt
    templates = await session.list_resource_templates()
    assert "rcll://banks/{bank_id}/context" in {t.uri_template for t in
                                                 templates.resource_templates}
    res = await session.read_resource(f"rcll://banks/{bank}/context")
    text = res.contents[0].text
    assert f"[{l0['id']}] You are the on-call agent" in text
    assert retained_id not in text  # forgotten
    prompt = await session.get_prompt("session_start", {"bank_id": bank})
    assert f"[{l0['id']}]" in prompt.messages[0].content.text
    return {"l0": l0, "note": note, "derived": derived, "retained_id": retained_id}
