"""The MCP server: tools, the session-start resource and prompt (official ``mcp`` SDK,
``MCPServer``).

Tools (each one call of an ``rcll`` service; the HTTP routes call the same ones):

| tool | service | role |
|---|---|---|
| ``memory_recall`` | ``services.cascade.recall`` (the cascade, as ``POST …/memories/recall``) | read |
| ``memory_retain`` | the retain service (a job; ``sync`` for ≤ 10 items) | write |
| ``memory_remember`` | ``services.lifecycle.remember`` (one unit, synchronous) | write |
| ``memory_read`` | ``services.lifecycle.read`` | read |
| ``memory_derive`` | ``services.lifecycle.derive`` | write |
| ``memory_correct`` | ``services.lifecycle.correct`` | write |
| ``memory_supersede`` | ``services.lifecycle.supersede`` | write |
| ``memory_forget`` | ``services.lifecycle.forget`` | write |

Every tool answers the JSON the HTTP route answers (``structured_content`` and one text
block); a refusal is a tool error carrying the HTTP status and error envelope
(:mod:`mcp_server.results`). ``bank_id`` may be left out when the server was started with a
default bank (``rcll mcp --bank``). Resource ``rcll://banks/{bank_id}/context`` and prompt
``session_start`` (its ``bank_id`` defaults to the server's bank) give the session-start
context (:mod:`rcll.search.session_context`) as Markdown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ToolAnnotations
from mcp_types import INVALID_PARAMS, INVALID_REQUEST
from pydantic import Field

from api.schemas import check_bank_id
from mcp_server import results
from mcp_server.auth import STATE_KEY
from rcll.access.principal import Principal
from rcll.bootstrap import Services
from rcll.errors import InvalidInput, RCLLError, Rejected
from rcll.retain.models import RetainItem
from rcll.retain.service import RetainService
from rcll.retain.submit import retain_answer
from rcll.search import session_context as sc
from rcll.search.models import RecallQuery

SYNC_MAX_ITEMS = 10
INSTRUCTIONS = (
    "RCLL long-term memory. Read the session-start context (prompt session_start or resource "
    "rcll://banks/{bank_id}/context) first; search with memory_recall; store with memory_retain "
    "(documents, conversations) or memory_remember (one note); fix with memory_correct or "
    "memory_supersede (both take the unit's current revision); memory_forget erases a unit.")

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                       open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
EDIT = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                       open_world_hint=False)
ERASE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                        open_world_hint=False)

BankId = Annotated[str | None, Field(description="Bank to use; default: the server's --bank.")]
UnitId = Annotated[str, Field(description="The unit's id (a UUID).")]
Revision = Annotated[int, Field(description="The unit's current revision (from memory_read "
                                            "or the last edit); a stale one is refused with 409.")]


@dataclass
class Runtime:
    """What the tools share: the engine ``services``, the ``retain`` service (with the
    Celery enqueuer), the ``default_bank`` (``None``: every call names one) and, for stdio,
    the process's ``principal`` (HTTP: ``None``, each request carries its own)."""

    services: Services
    retain: RetainService
    default_bank: str | None = None
    principal: Principal | None = None
    reauthenticate: Callable[[], Principal] | None = None

    def caller(self, ctx: Context | None) -> Principal:
        """The principal of this call: the HTTP request's (set by
        :class:`mcp_server.auth.BearerAuth`), else the process's (stdio) — re-authenticated
        on every call by ``reauthenticate`` (the process's key), so a revoked key, a disabled
        member or a changed grant applies to the next call, as over HTTP. Raises 401
        ``missing_api_key`` when neither is known (fail closed), 401 ``invalid_api_key``
        once the process's key is revoked."""
        request = None
        if ctx is not None:
            try:
                request = ctx.request_context.request
            except ValueError:  # outside a request
                request = None
        state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
        p = state.get(STATE_KEY) if isinstance(state, dict) else None
        if p is not None:
            return p
        if self.reauthenticate is not None:
            return self.reauthenticate()
        if self.principal is not None:
            return self.principal
        raise Rejected(401, "missing_api_key", "an API key is required")

    def writable(self, tool: str) -> None:
        """Raise 403 ``read_only_deployment`` in a read-only deployment (``RCLL_READ_ONLY``):
        only recall, read and the session context are served, as over HTTP."""
        if self.services.settings.read_only:
            raise Rejected(403, "read_only_deployment",
                           "this is a read-only deployment: only recall and read are served; "
                           "send writes to the read-write deployment", {"tool": tool})

    def bank(self, bank_id: str | None) -> str:
        """``bank_id``, else the default bank, a bank alias resolved to its bank
        (:mod:`rcll.banks.aliases`); 400 ``invalid_request`` when neither is set, 400
        ``invalid_bank_id`` for a malformed id."""
        bank = bank_id or self.default_bank
        if not bank:
            raise InvalidInput("bank_id is required (this server has no default bank)",
                               {"field": "bank_id"})
        return self.services.bank_aliases.resolve(check_bank_id(bank))


def _given(**fields: Any) -> dict:
    """The fields the caller gave (``None`` means not given)."""
    return {k: v for k, v in fields.items() if v is not None}


def recall(rt: Runtime, principal: Principal, bank_id: str, params: dict) -> dict:
    """The recall of ``POST …/memories/recall``: validate ``params`` as a
    :class:`~rcll.search.models.RecallQuery` and run the cascade as ``principal`` (it checks
    ``read`` and the purpose). Returns the recall JSON."""
    q = RecallQuery.model_validate(params)
    return rt.services.cascade.recall(bank_id, q, principal=principal).to_json()

def retain(rt: Runtime, principal: Principal, bank_id: str, items: list[dict], sync: bool,
           idempotency_key: str | None) -> dict:
    """The retain of ``POST …/memories``: require ``write``, validate ``items`` as
    :class:`~rcll.retain.models.RetainItem`, submit the job (run here when ``sync``, at most
    :data:`SYNC_MAX_ITEMS` items: 400 ``sync_batch_too_large``). Returns the HTTP route's
    answer (:func:`rcll.retain.submit.retain_answer`)."""
    principal.require(bank_id, "write")
    svc = rt.retain
    svc.check_item_count(len(items))
    if sync and len(items) > SYNC_MAX_ITEMS:
        raise Rejected(400, "sync_batch_too_large",
                       f"sync takes at most {SYNC_MAX_ITEMS} items over MCP; send async",
                       {"items": len(items), "max": SYNC_MAX_ITEMS})
    key = svc.idempotency_key(idempotency_key)
    parsed = [RetainItem.model_validate(i) for i in items]
    job, _ = svc.retain(bank_id, parsed, async_=not sync, idempotency_key=key,
                        principal=principal)
    return retain_answer(bank_id, job, len(parsed), not sync, principal)


def context(rt: Runtime, principal: Principal, bank_id: str, purpose: str | None,
            budget_tokens: int) -> dict:
    """The session-start context of ``bank_id`` for ``principal``
    (:func:`rcll.search.session_context.session_context`)."""
    s = rt.services.settings
    scope = sc.caller_scope(principal, bank_id, purpose, s.purposes, s.default_purpose)
    return sc.session_context(rt.services.recall_pool(bank_id), rt.services.tokens, scope,
                              budget_tokens)


def _protocol_error(exc: RCLLError) -> MCPError:
    """A resource/prompt failure as a JSON-RPC error whose ``data`` is the HTTP status and
    error envelope."""
    return MCPError(INVALID_PARAMS if exc.status in (400, 404) else INVALID_REQUEST, exc.message,
                    {"status": exc.status,
                     "error": {"code": exc.code, "message": exc.message, "details": exc.details}})


def build_server(rt: Runtime) -> MCPServer:
    """The MCP server over ``rt``: the tools, resource(s) and prompt of the module doc."""
    mcp = MCPServer("rcll", instructions=INSTRUCTIONS, version="0.1.0")

    def lifecycle():
        return rt.services.lifecycle

    @mcp.tool(annotations=READ)
    def memory_recall(
        query: Annotated[str, Field(description="What to recall (natural language).")],
        bank_id: BankId = None,
        purpose: Annotated[str | None, Field(description="Why you recall (assist, operate, "
                                             "audit, personal; default the server's).")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 10,
        max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = 2048,
        recipe: str | None = None,
        tiers: Annotated[list[str] | None, Field(description="Subset of hot, warm, cold.")] = None,
        room: str | None = None,
        hall: str | None = None,
        max_layer: Annotated[int | None, Field(ge=0, le=3)] = None,
        query_timestamp: Annotated[str | None, Field(description="ISO 8601 reference time "
                                                     "for 'last May' (default now).")] = None,
        context_tokens_left: Annotated[int | None, Field(ge=0)] = None,
        include_superseded: bool = False,
        trace: bool = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Recall memories relevant to a query, ranked and cut to a token budget (read-only,
        no LLM). Answers the HTTP recall JSON: results (id, text, kind, room, hall, layer,
        scores, …), tiers, mode, counts."""
        def call():
            params = _given(query=query, limit=limit, max_tokens=max_tokens, recipe=recipe,
                            tiers=tiers, room=room, hall=hall, max_layer=max_layer,
                            query_timestamp=query_timestamp,
                            context_tokens_left=context_tokens_left,
                            include_superseded=include_superseded or None, trace=trace or None,
                            purpose=purpose)
            return recall(rt, rt.caller(ctx), rt.bank(bank_id), params)
        return results.run("memory_recall", call)

    @mcp.tool(annotations=WRITE)
    def memory_retain(
        content: Annotated[str | None, Field(description="Text of one item (a note, a "
                                             "document, a conversation).")] = None,
        items: Annotated[list[dict[str, Any]] | None, Field(
            description="Several items, each {content, timestamp, context, metadata, "
                        "document_id, tags, room, hall, layer, audience, purposes}.")] = None,
        bank_id: BankId = None,
        context: str | None = None,
        timestamp: Annotated[str | None, Field(description="ISO 8601: when it was said.")] = None,
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        room: str | None = None,
        hall: str | None = None,
        layer: Annotated[int | None, Field(ge=0, le=3)] = None,
        audience: Annotated[str | None, Field(description="'bank' (every member) or your "
                                              "member id (only you).")] = None,
        purposes: list[str] | None = None,
        sync: Annotated[bool, Field(description=f"Wait until stored (at most {SYNC_MAX_ITEMS} "
                                    "items); default: answer at once with the operation id.")
                        ] = False,
        idempotency_key: str | None = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Retain content into a bank through the retain pipeline (chunk, extract, entities,
        embed, link). Give `content` (one item, with its optional fields) or `items`.
        Answers {operation_id, status, ...}; status is `queued` unless `sync`."""
        def call():
            rt.writable("memory_retain")
            if (content is None) == (items is None):
                raise InvalidInput("give exactly one of content or items",
                                   {"fields": ["content", "items"]})
            batch = items if items is not None else [_given(
                content=content, context=context, timestamp=timestamp,
                document_id=document_id, metadata=metadata, tags=tags, room=room, hall=hall,
                layer=layer, audience=audience, purposes=purposes)]
            return retain(rt, rt.caller(ctx), rt.bank(bank_id), batch, sync, idempotency_key)
        return results.run("memory_retain", call)

    @mcp.tool(annotations=WRITE)
    def memory_remember(
        text: str,
        bank_id: BankId = None,
        kind: Annotated[str | None, Field(description="note (default), fact, decision, "
                                          "preference, event")] = None,
        context: str | None = None,
        room: str | None = None,
        hall: str | None = None,
        layer: Annotated[int | None, Field(ge=0, le=3)] = None,
        audience: str | None = None,
        purposes: list[str] | None = None,
        occurred_start: str | None = None,
        occurred_end: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        confidence: Annotated[float | None, Field(ge=0, le=1)] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Remember one unit now (synchronous: stored, embedded and linked before it
        answers). Answers the unit (id, revision, audience, purposes, …)."""
        def call():
            rt.writable("memory_remember")
            unit = _given(text=text, kind=kind, context=context, room=room, hall=hall,
                          layer=layer, audience=audience, purposes=purposes,
                          occurred_start=occurred_start, occurred_end=occurred_end,
                          metadata=metadata, tags=tags, confidence=confidence)
            return lifecycle().remember(rt.caller(ctx), rt.bank(bank_id), unit)
        return results.run("memory_remember", call)

    @mcp.tool(annotations=READ)
    def memory_read(unit_id: UnitId, bank_id: BankId = None, purpose: str | None = None,
                    ctx: Context | None = None) -> CallToolResult:
        """Read one unit by id with its links and sources (404 if absent or not visible)."""
        return results.run("memory_read", lambda: lifecycle().read(
            rt.caller(ctx), rt.bank(bank_id), unit_id, purpose))

    @mcp.tool(annotations=WRITE)
    def memory_derive(
        source_ids: Annotated[list[str], Field(min_length=1, description="Units it is "
                                               "derived from.")],
        text: str,
        bank_id: BankId = None,
        kind: str | None = None,
        context: str | None = None,
        room: str | None = None,
        hall: str | None = None,
        layer: Annotated[int | None, Field(ge=0, le=3)] = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        confidence: Annotated[float | None, Field(ge=0, le=1)] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Store a new unit derived from others (a conclusion, a summary). Its audience and
        purposes are the intersection of the sources'; an empty one is refused (409
        empty_intersection)."""
        def call():
            rt.writable("memory_derive")
            unit = _given(text=text, kind=kind, context=context, room=room, hall=hall,
                          layer=layer, metadata=metadata, tags=tags, confidence=confidence)
            return lifecycle().derive(rt.caller(ctx), rt.bank(bank_id), source_ids, unit)
        return results.run("memory_derive", call)

    @mcp.tool(annotations=EDIT)
    def memory_correct(
        unit_id: UnitId,
        revision: Revision,
        bank_id: BankId = None,
        text: str | None = None,
        kind: str | None = None,
        context: str | None = None,
        room: str | None = None,
        hall: str | None = None,
        layer: Annotated[int | None, Field(ge=0, le=3)] = None,
        audience: str | None = None,
        purposes: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        confidence: Annotated[float | None, Field(ge=0, le=1)] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Edit a unit's text or fields in place (revision + 1, history kept). A stale
        revision is refused: 409 revision_conflict with details.current_revision."""
        def call():
            rt.writable("memory_correct")
            changes = _given(text=text, kind=kind, context=context, room=room, hall=hall,
                             layer=layer, audience=audience, purposes=purposes,
                             metadata=metadata, tags=tags, confidence=confidence)
            if not changes:
                raise InvalidInput("nothing to correct: give text or a field", {})
            return lifecycle().correct(rt.caller(ctx), rt.bank(bank_id), unit_id, revision,
                                       changes)
        return results.run("memory_correct", call)

    @mcp.tool(annotations=EDIT)
    def memory_supersede(
        unit_id: UnitId,
        revision: Revision,
        text: Annotated[str, Field(description="Text of the unit that replaces it.")],
        bank_id: BankId = None,
        kind: str | None = None,
        context: str | None = None,
        room: str | None = None,
        hall: str | None = None,
        layer: Annotated[int | None, Field(ge=0, le=3)] = None,
        audience: str | None = None,
        purposes: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Replace a unit with a new one (the old is kept as history, marked superseded).
        Answers {superseded, unit}; a stale revision → 409 revision_conflict."""
        def call():
            rt.writable("memory_supersede")
            unit = _given(text=text, kind=kind, context=context, room=room, hall=hall,
                          layer=layer, audience=audience, purposes=purposes,
                          metadata=metadata, tags=tags)
            return lifecycle().supersede(rt.caller(ctx), rt.bank(bank_id), unit_id, revision,
                                         unit)
        return results.run("memory_supersede", call)

    @mcp.tool(annotations=ERASE)
    def memory_forget(unit_id: UnitId, bank_id: BankId = None, reason: str | None = None,
                      ctx: Context | None = None) -> CallToolResult:
        """Forget a unit: its text, vectors and cached copies are erased (a tombstone and an
        audit entry remain). Answers {unit_id, forgotten_at}."""
        def call():
            rt.writable("memory_forget")
            return lifecycle().forget(rt.caller(ctx), rt.bank(bank_id), unit_id, reason)
        return results.run("memory_forget", call)

    def _context_text(ctx: Context | None, bank_id: str | None, purpose: str | None,
                      budget_tokens: int) -> str:
        try:
            return context(rt, rt.caller(ctx), rt.bank(bank_id), purpose, budget_tokens)["text"]
        except RCLLError as exc:
            raise _protocol_error(exc) from None

    @mcp.resource("rcll://banks/{bank_id}/context", name="session_context",
                  mime_type="text/markdown")
    def bank_context(bank_id: str, ctx: Context) -> str:
        """Session-start memory of a bank: its L0 and L1 units and the most recent units
        visible to you, within ~800 tokens."""
        return _context_text(ctx, bank_id, None, sc.DEFAULT_BUDGET_TOKENS)

    @mcp.prompt(name="session_start")
    def session_start(bank_id: str | None = None, purpose: str | None = None,
                      budget_tokens: str | None = None, ctx: Context | None = None) -> list:
        """What you remember at the start of a session: the bank's L0 and L1 units and its
        most recent units, within a small token budget (default 800)."""
        budget = sc.DEFAULT_BUDGET_TOKENS
        if budget_tokens is not None:
            if not budget_tokens.isdigit():
                raise _protocol_error(InvalidInput("budget_tokens must be an integer",
                                                   {"budget_tokens": budget_tokens}))
            budget = int(budget_tokens)
        text = _context_text(ctx, bank_id, purpose, budget)
        return [UserMessage("Your long-term memory (RCLL) for this session. Use it; call "
                            "memory_recall for anything it does not cover.\n\n" + text)]

    return mcp
