"""Bank ids: Hindsight's rule, checked in one place for HTTP, MCP and the CLI.

Hindsight 1.1 takes any text as a bank id (a FastAPI ``str`` path parameter; its
``memory_banks.id`` is ``text`` on PostgreSQL and ``VARCHAR2(256)`` on Oracle), so
integrations key banks by whatever they have: an e-mail address (google-adk, smolagents),
``app::user@example.com``, ``kestrel ops``, ``équipe-kestrel``. RCLL takes the same, with
the limits any path-addressed id needs:

* 1-256 characters (Hindsight's tightest column, VARCHAR2(256));
* no ``/`` (a percent-encoded ``%2F`` is decoded before routing, by Werkzeug as by
  Starlette, so such a bank could not be addressed), and not ``.`` or ``..`` (clients
  collapse those path segments);
* no control characters (NUL, newline, tab: Unicode ``Cc``), no line or paragraph
  separators (``Zl``, ``Zp``), no lone surrogates (``Cs``, not storable as UTF-8), and no
  U+FFFD: Werkzeug decodes a percent-encoded byte sequence that is not UTF-8 (a lone
  surrogate sent in a path) to U+FFFD, so such an id names no bank the client meant.

Ids are compared as given (no case folding, no Unicode normalisation): ``Kestrel`` and
``kestrel`` are two banks, as in Hindsight.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

from rcll.errors import RCLLError

MAX_BANK_ID_CHARS = 256
_REFUSED_CATEGORIES = {"Cc", "Cs", "Zl", "Zp"}
# the same rule as a pattern, for OpenAPI and query models (the dot segments and lone
# surrogates are left to check_bank_id: no lookaround in pydantic's regex engine)
BANK_ID_PATTERN = r"^[^/\x00-\x1f\x7f-\x9f\u2028\u2029\ufffd]{1,256}$"


class InvalidBankId(RCLLError):
    code = "invalid_bank_id"
    status = 400


RULE = ("bank_id must be 1-256 characters without '/', control characters, lone "
        "surrogates or U+FFFD, and not '.' or '..'")


def bank_id_problem(bank_id: object) -> str | None:
    """Why ``bank_id`` is not a bank id (None when it is one)."""
    if not isinstance(bank_id, str) or not bank_id:
        return "empty"
    if len(bank_id) > MAX_BANK_ID_CHARS:
        return f"longer than {MAX_BANK_ID_CHARS} characters"
    if bank_id in (".", ".."):
        return "a dot segment"
    if "/" in bank_id:
        return "holds '/'"
    for ch in bank_id:
        if unicodedata.category(ch) in _REFUSED_CATEGORIES or ch == "\ufffd":
            return f"holds U+{ord(ch):04X}"
    return None


def check_bank_id(bank_id: object) -> str:
    """``bank_id`` when it follows the rule above; raises :class:`InvalidBankId` (400
    ``invalid_bank_id``, details ``{bank_id (first 300 chars), reason}``) otherwise."""
    why = bank_id_problem(bank_id)
    if why is not None:
        shown = bank_id[:300] if isinstance(bank_id, str) else type(bank_id).__name__
        shown = shown.encode("utf-8", "backslashreplace").decode("utf-8") \
            if isinstance(shown, str) else shown
        raise InvalidBankId(RULE, {"bank_id": shown, "reason": why})
    return bank_id  # type: ignore[return-value]


# the characters of RCLL's earlier bank ids ([A-Za-z0-9_.:-]): kept as they are in keys, so
# the Redis keys of a bank made before Hindsight's rule do not move
_KEY_SAFE = "_.:-"


def key_segment(bank_id: str) -> str:
    """``bank_id`` as one segment of a Redis key: percent-encoded (UTF-8) except letters,
    digits and ``_.:-~``, so the segment never holds a brace (the cluster hash tag stays the
    whole bank id), a space, ``*?[]`` (SCAN patterns) or a non-ASCII byte, and two bank ids
    never share one (``%`` itself is encoded). An id of the old character set is unchanged."""
    return quote(bank_id, safe=_KEY_SAFE)
