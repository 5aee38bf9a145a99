"""Session-start context (issue 9 item 6, spec §8): what an agent should hold before it
decides to search — the bank's L0 units (identity, standing instructions), its L1 units
(key facts), then its most recent units, packed into a small token budget.

Visibility is the recall rule: every row passes :meth:`rcll.search.scope.CallerScope.where`
(bank, live units, audience, purpose) in SQL, so nothing the caller may not see is read,
counted or rendered. Read-only: one ``READ ONLY`` transaction, no INSERT/UPDATE/DELETE.
Served by MCP (resource ``rcll://banks/{bank_id}/context``, prompt ``session_start``) and
HTTP (``GET /banks/{bank_id}/context``).
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from rcll.access.principal import Principal
from rcll.access.purposes import recall_purpose
from rcll.errors import InvalidInput
from rcll.models.tokenizer import TokenCounter
from rcll.search.scope import CallerScope
from rcll.store import banks

DEFAULT_BUDGET_TOKENS = 800
MAX_BUDGET_TOKENS = 32_000
# Rows read per section before packing: the budget is small, so a few dozen always suffice.
SECTION_ROWS = 50
SECTIONS = ("l0", "l1", "recent")


def caller_scope(principal: Principal, bank_id: str, purpose: str | None,
                 known_purposes: Sequence[str], default_purpose: str) -> CallerScope:
    """The scope a session-start read of ``bank_id`` by ``principal`` may see: recall's
    rules (:func:`rcll.access.purposes.recall_purpose` — a member's default purpose is the
    deployment's; auth off: no purpose filter unless one is named).

    Raises :class:`~rcll.errors.Forbidden` (403 ``forbidden``) without ``read`` on the bank,
    ``Rejected`` 400 ``unknown_purpose`` and 403 ``purpose_not_granted``.
    """
    principal.require(bank_id, "read")
    chosen = recall_purpose(purpose, principal, bank_id, known=known_purposes,
                            default=default_purpose)
    return CallerScope(bank_id=bank_id, layer_cap=2, member_id=principal.member_id,
                       all_audiences=principal.all_audiences, purpose=chosen)


def session_context(pool: ConnectionPool, tokens: TokenCounter, scope: CallerScope,
                    budget_tokens: int = DEFAULT_BUDGET_TOKENS) -> dict:
    """The session-start context of ``scope.bank_id`` within ``budget_tokens``.

    Order of filling: L0 units (newest first), then L1 units, then the most recent units of
    any layer ≤ 2 not already taken; a unit that does not fit is skipped (a shorter one
    after it may still fit). Returns ``{"bank_id", "purpose", "budget_tokens",
    "tokens_used", "l0": [unit], "l1": [unit], "recent": [unit], "omitted": {section: n},
    "text"}`` where a unit is ``{"id", "text", "kind", "layer", "room", "hall",
    "created_at", "occurred_start", "tokens"}`` and ``text`` renders all three sections as
    Markdown for a prompt. Raises ``InvalidInput`` for a budget outside 1..32,000 and
    :class:`~rcll.errors.BankNotFound` (404) for an unknown bank.
    """
    if not 1 <= budget_tokens <= MAX_BUDGET_TOKENS:
        raise InvalidInput(f"budget_tokens must be 1-{MAX_BUDGET_TOKENS}",
                           {"budget_tokens": budget_tokens})
    where, params = scope.where("u")
    cols = """u.id::text AS id, u.text, u.kind, u.layer, u.room, u.hall, u.created_at,
              u.occurred_start, u.token_count"""
    with pool.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        banks.get(conn, scope.bank_id)
        cur = conn.cursor(row_factory=dict_row)
        layered = cur.execute(
            f"""SELECT {cols} FROM memory_units u
                WHERE {where} AND u.layer <= 1 AND u.forgotten_at IS NULL
                ORDER BY u.layer, u.created_at DESC, u.id LIMIT %(rows)s""",
            {**params, "rows": 2 * SECTION_ROWS}).fetchall()
        recent = cur.execute(
            f"""SELECT {cols} FROM memory_units u
                WHERE {where} AND u.layer >= 2 AND u.forgotten_at IS NULL
                ORDER BY u.created_at DESC, u.id DESC LIMIT %(rows)s""",
            {**params, "rows": SECTION_ROWS}).fetchall()
    pools = {"l0": [r for r in layered if r["layer"] == 0][:SECTION_ROWS],
             "l1": [r for r in layered if r["layer"] == 1][:SECTION_ROWS],
             "recent": recent}
    missing = [r for rows in pools.values() for r in rows if r["token_count"] is None]
    for r, n in zip(missing, tokens.count_many([r["text"] for r in missing]), strict=True):
        r["token_count"] = n
    used = 0
    out: dict = {"bank_id": scope.bank_id, "purpose": scope.purpose,
                 "budget_tokens": budget_tokens}
    omitted = {}
    for section in SECTIONS:
        taken = []
        for r in pools[section]:
            if used + r["token_count"] <= budget_tokens:
                used += r["token_count"]
                taken.append(_unit(r))
        out[section] = taken
        omitted[section] = len(pools[section]) - len(taken)
    out["tokens_used"] = used
    out["omitted"] = omitted
    out["text"] = render(out)
    return out


def _unit(r: dict) -> dict:
    iso = lambda v: v.isoformat() if v is not None else None  # noqa: E731
    return {"id": r["id"], "text": r["text"], "kind": r["kind"], "layer": r["layer"],
            "room": r["room"], "hall": r["hall"], "created_at": iso(r["created_at"]),
            "occurred_start": iso(r["occurred_start"]), "tokens": r["token_count"]}


def render(ctx: dict) -> str:
    """Markdown of a :func:`session_context` answer: one heading per non-empty section, one
    bullet per unit (``[id] text``), so an agent can cite or ``memory_read`` a unit."""
    titles = {"l0": "Identity and standing instructions (L0)", "l1": "Key facts (L1)",
              "recent": "Recent memories"}
    purpose = ctx["purpose"] or "any"
    lines = [f"# Memory of bank {ctx['bank_id']} (purpose {purpose}, "
             f"{ctx['tokens_used']}/{ctx['budget_tokens']} tokens)"]
    for section in SECTIONS:
        if ctx[section]:
            lines += ["", f"## {titles[section]}"]
            lines += [f"- [{u['id']}] {u['text']}" for u in ctx[section]]
    if len(lines) == 1:
        lines += ["", "(no memories visible to this caller yet)"]
    return "\n".join(lines)

