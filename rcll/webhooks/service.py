"""The webhook service: register, list, change and delete a bank's webhooks, and read their
delivery log — what ``/v1/default/banks/{bank_id}/webhooks…`` calls (Hindsight's shapes).

Every method takes the caller's :class:`~rcll.access.principal.Principal` and checks
``admin`` on the bank itself (a webhook sends the bank's events to an address of the
caller's choosing). Each write owns its transaction and audit entry (``webhook.create``,
``webhook.update``, ``webhook.delete``; details never hold the secret or the URL, which may
carry a token). The secret is shown once: in the answer that made the webhook.

The rules of a webhook (each refusal a 400 naming the field):

- ``url``: ``http`` or ``https``, a host, no user or password, at most 2,048 characters;
  unless ``RCLL_WEBHOOK_ALLOW_PRIVATE_NETWORKS``, not a loopback, private, link-local or
  otherwise non-global literal address nor ``localhost`` (a name that resolves to one fails
  at delivery, :mod:`rcll.webhooks.delivery`);
- ``secret``: 1-512 characters; generated (``whsec_`` + 43 URL-safe characters) when not
  given;
- ``event_types``: from :data:`rcll.webhooks.events.EVENT_TYPES` (default: all of them);
  Hindsight's ``memory_defense.triggered`` is 400 ``unsupported_hindsight_value``;
- ``http_config``: ``method`` POST (a signed body; Hindsight's GET is
  ``unsupported_hindsight_value``), ``timeout_seconds`` 1-3600 (the attempt waits at most
  ``RCLL_WEBHOOK_TIMEOUT_S`` whatever it says), at most 20 ``headers`` (HTTP token names,
  ASCII values without control characters, none of the headers RCLL sets) and 20
  ``params``.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rcll.access.principal import Principal
from rcll.errors import InvalidInput, NotFound, Rejected
from rcll.store import audit, banks
from rcll.store import webhooks as store
from rcll.webhooks.events import EVENT_TYPES, HINDSIGHT_ONLY

if TYPE_CHECKING:
    from rcll.bootstrap import Services

MAX_URL_CHARS = 2048
MAX_SECRET_CHARS = 512
MAX_WEBHOOKS_PER_BANK = 20
MAX_PAIRS = 20
MAX_NAME_CHARS, MAX_VALUE_CHARS = 100, 1000
# headers each delivery sets itself (lower case): a webhook cannot replace them
RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding",
                              "connection", "user-agent", "x-hindsight-signature",
                              "x-hindsight-event"})
RESERVED_PREFIX = "x-rcll-"
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_URL_BAD = re.compile(r"[\x00-\x20\x7f]")
DEFAULT_HTTP = {"method": "POST", "headers": {}, "params": {}}
MAX_DELIVERIES_PAGE = 200


class WebhookNotFound(NotFound):
    code = "webhook_not_found"


class UnsupportedHindsightValue(InvalidInput):
    code = "unsupported_hindsight_value"


def _bad(field: str, message: str, **details) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", {"field": field, **details})


def check_url(url: Any, allow_private: bool) -> str:
    """``url`` when it is a webhook URL by the module rule; 400 ``invalid_request``."""
    if not isinstance(url, str) or not url:
        raise _bad("url", "must be a non-empty string")
    if len(url) > MAX_URL_CHARS:
        raise _bad("url", f"must be at most {MAX_URL_CHARS} characters")
    if _URL_BAD.search(url):
        raise _bad("url", "must not hold spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _bad("url", f"is not a URL ({exc})")
    if parts.scheme.lower() not in ("http", "https"):
        raise _bad("url", "must be an http or https URL", scheme=parts.scheme)
    host = parts.hostname
    if not host:
        raise _bad("url", "must name a host")
    if parts.username is not None or parts.password is not None:
        raise _bad("url", "must not hold a user name or password (use http_config.headers)")
    if port == 0:
        raise _bad("url", "port 0 is not a port")
    if not allow_private and not host_allowed(host):
        raise _bad("url", "names a loopback, private or link-local address; set "
                   "RCLL_WEBHOOK_ALLOW_PRIVATE_NETWORKS=on to deliver there", host=host)
    return url


def host_allowed(host: str) -> bool:
    """Whether ``host`` (a name or a literal address) may be a delivery target when private
    networks are not allowed: a name that is not ``localhost``, or a global address."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return False
    try:
        return ipaddress.ip_address(name).is_global
    except ValueError:
        return True  # a name: checked against what it resolves to when delivered


def _pairs(value: Any, field: str, header: bool) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(field, "must be an object of strings")
    if len(value) > MAX_PAIRS:
        raise _bad(field, f"at most {MAX_PAIRS} entries")
    out = {}
    for k, v in value.items():
        if not isinstance(v, str):
            raise _bad(field, "values must be strings", key=str(k)[:100])
        if not k or len(k) > MAX_NAME_CHARS or len(v) > MAX_VALUE_CHARS:
            raise _bad(field, f"names of 1-{MAX_NAME_CHARS} and values of at most "
                       f"{MAX_VALUE_CHARS} characters", key=k[:100])
        if header:
            if not _TOKEN.match(k):
                raise _bad(field, "a header name is an HTTP token (letters, digits, "
                           "!#$%&'*+-.^_`|~)", key=k[:100])
            low = k.lower()
            if low in RESERVED_HEADERS or low.startswith(RESERVED_PREFIX):
                raise _bad(field, f"{k} is set by RCLL itself", key=k)
            if _CONTROL.search(v) or not v.isascii():
                raise _bad(field, "header values are ASCII without control characters",
                           key=k)
        elif _CONTROL.search(k) or _CONTROL.search(v):
            raise _bad(field, "must not hold control characters", key=k[:100])
        out[k] = v
    return out


def check_http_config(value: Any) -> dict:
    """Hindsight's ``http_config`` checked and filled in: ``{method, timeout_seconds?,
    headers, params}``; 400 naming the field."""
    if value is None:
        return dict(DEFAULT_HTTP)
    if not isinstance(value, dict):
        raise _bad("http_config", "must be an object")
    unknown = set(value) - {"method", "timeout_seconds", "headers", "params"}
    if unknown:
        raise _bad("http_config", f"unknown fields: {', '.join(sorted(unknown))}",
                   fields=sorted(unknown))
    method = value.get("method")
    method = "POST" if method is None else method
    if not isinstance(method, str) or method.upper() not in ("POST", "GET"):
        raise _bad("http_config.method", "must be POST")
    if method.upper() == "GET":
        raise UnsupportedHindsightValue(
            "http_config.method: RCLL delivers each event as a signed POST body; GET is not "
            "supported", {"field": "http_config.method", "value": method})
    out: dict[str, Any] = {"method": "POST"}
    timeout = value.get("timeout_seconds")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 3600:
            raise _bad("http_config.timeout_seconds", "must be an integer from 1 to 3600")
        out["timeout_seconds"] = timeout
    out["headers"] = _pairs(value.get("headers"), "http_config.headers", header=True)
    out["params"] = _pairs(value.get("params"), "http_config.params", header=False)
    return out


def check_event_types(value: Any) -> list[str]:
    """The event types, deduplicated in order; default (``None``): all of
    :data:`~rcll.webhooks.events.EVENT_TYPES`."""
    if value is None:
        return list(EVENT_TYPES)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _bad("event_types", "must be a non-empty list of event types",
                   allowed=list(EVENT_TYPES))
    for v in value:
        if v in HINDSIGHT_ONLY:
            raise UnsupportedHindsightValue(
                f"event_types: RCLL never fires {v!r}", {"field": "event_types", "value": v,
                                                          "allowed": list(EVENT_TYPES)})
        if v not in EVENT_TYPES:
            raise _bad("event_types", f"unknown event type {v[:100]!r}",
                       allowed=list(EVENT_TYPES))
    return list(dict.fromkeys(value))


def check_secret(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_SECRET_CHARS:
        raise _bad("secret", f"must be a string of 1-{MAX_SECRET_CHARS} characters")
    if _CONTROL.search(value):
        raise _bad("secret", "must not hold control characters")
    return value


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and 32 random bytes, URL-safe base64."""
    return "whsec_" + secrets.token_urlsafe(32)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def webhook_json(row: dict, show_secret: bool = False) -> dict:
    """A webhook row as Hindsight's ``WebhookResponse`` (``secret`` null unless
    ``show_secret``)."""
    http = {**DEFAULT_HTTP, **(row["http_config"] or {})}
    return {"id": str(row["id"]), "bank_id": row["bank_id"], "url": row["url"],
            "secret": row["secret"] if show_secret else None,
            "event_types": list(row["event_types"]), "enabled": row["enabled"],
            "http_config": http, "created_at": _iso(row["created_at"]),
            "updated_at": _iso(row["updated_at"])}


def delivery_json(row: dict) -> dict:
    """A delivery row as Hindsight's ``WebhookDeliveryResponse``, plus RCLL's
    ``operation_id`` and ``attempt_log`` (``[{attempt, at, url, status_code, error,
    duration_ms}]``)."""
    return {"id": str(row["id"]), "event_id": str(row["event_id"]),
            "webhook_id": str(row["webhook_id"]), "url": row["url"],
            "event_type": row["event_type"], "status": row["status"],
            "attempts": row["attempts"],
            "next_retry_at": _iso(row["next_attempt_at"]) if row["status"] == "pending"
            else None,
            "last_error": row["last_error"], "last_response_status": row["last_status_code"],
            "last_response_body": row["last_response_body"],
            "last_attempt_at": _iso(row["last_attempt_at"]),
            "created_at": _iso(row["created_at"]), "updated_at": _iso(row["updated_at"]),
            "operation_id": str(row["operation_id"]) if row["operation_id"] else None,
            "attempt_log": [{"attempt": a["attempt"], "at": _iso(a["at"]), "url": a["url"],
                             "status_code": a["status_code"], "error": a["error"],
                             "duration_ms": round(a["duration_ms"], 1)}
                            for a in row.get("attempt_log", [])]}


def _cursor(row: dict) -> str:
    return f"{row['created_at'].isoformat()}|{row['id']}"


def parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """``next_cursor`` of a deliveries page back to its ``(created_at, id)``; 400
    ``invalid_cursor``."""
    if cursor is None:
        return None
    import uuid

    try:
        at, _, did = cursor.partition("|")
        parsed = datetime.fromisoformat(at)
        if parsed.tzinfo is None:
            raise ValueError("no time zone")
        return parsed, str(uuid.UUID(did))
    except ValueError:
        raise Rejected(400, "invalid_cursor", "cursor is not a next_cursor this route gave",
                       {"field": "cursor"})


class WebhookService:
    """Webhooks over the process's read-write pool."""

    def __init__(self, services: Services) -> None:
        self._services = services

    @property
    def _pool(self):
        return self._services.pool

    @property
    def _allow_private(self) -> bool:
        return self._services.settings.webhook_allow_private_networks

    def create(self, principal: Principal, bank_id: str, url: Any, secret: Any = None,
               event_types: Any = None, enabled: Any = True, http_config: Any = None) -> dict:
        """Register a webhook on ``bank_id`` (``admin``): its :func:`webhook_json` with
        the secret (the only answer that shows it). 400 for a field against the module
        rule, 404 ``bank_not_found``, 409 ``too_many_webhooks`` past
        :data:`MAX_WEBHOOKS_PER_BANK`."""
        principal.require(bank_id, "admin")
        url = check_url(url, self._allow_private)
        secret = new_secret() if secret is None else check_secret(secret)
        types = check_event_types(event_types)
        enabled = True if enabled is None else enabled
        if not isinstance(enabled, bool):
            raise _bad("enabled", "must be true or false")
        http = check_http_config(http_config)
        with self._pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            conn.execute("SELECT id FROM memory_banks WHERE id = %s FOR NO KEY UPDATE",
                         (bank_id,))  # one count check at a time per bank
            if store.count(conn, bank_id) >= MAX_WEBHOOKS_PER_BANK:
                raise Rejected(409, "too_many_webhooks",
                               f"a bank has at most {MAX_WEBHOOKS_PER_BANK} webhooks",
                               {"bank_id": bank_id, "max": MAX_WEBHOOKS_PER_BANK})
            row = store.create(conn, bank_id, url, secret, types, enabled, http,
                               principal.member_id)
            audit.record(conn, principal.member_id, "webhook.create", bank_id,
                         details={"webhook_id": str(row["id"]), "event_types": types,
                                  "enabled": enabled})
        return webhook_json(row, show_secret=True)

    def list(self, principal: Principal, bank_id: str, limit: int,
             offset: int) -> tuple[list[dict], int]:
        """One page of ``bank_id``'s webhooks, oldest first, secrets hidden (``admin``);
        ``(items, total)``. 404 ``bank_not_found``."""
        principal.require(bank_id, "admin")
        with self._pool.connection() as conn:
            banks.get(conn, bank_id)
            rows, total = store.list_page(conn, bank_id, limit, offset)
        return [webhook_json(r) for r in rows], total

    def update(self, principal: Principal, bank_id: str, webhook_id: str,
               fields: dict) -> dict:
        """Change the given ``fields`` (of url, secret, event_types, enabled, http_config;
        a ``None`` value keeps the stored one) of a webhook (``admin``); its
        :func:`webhook_json`, secret hidden. A new ``url``, ``event_types`` or ``enabled``
        applies to later events; a new ``url``, ``secret`` or ``http_config`` to later
        attempts of pending deliveries too. 404 ``webhook_not_found``."""
        principal.require(bank_id, "admin")
        changes: dict[str, Any] = {}
        given = {k: v for k, v in fields.items() if v is not None}
        if "url" in given:
            changes["url"] = check_url(given["url"], self._allow_private)
        if "secret" in given:
            changes["secret"] = check_secret(given["secret"])
        if "event_types" in given:
            changes["event_types"] = check_event_types(given["event_types"])
        if "enabled" in given:
            if not isinstance(given["enabled"], bool):
                raise _bad("enabled", "must be true or false")
            changes["enabled"] = given["enabled"]
        if "http_config" in given:
            changes["http_config"] = check_http_config(given["http_config"])
        with self._pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            if store.get(conn, bank_id, webhook_id, lock=True) is None:
                raise WebhookNotFound(f"webhook {webhook_id} does not exist",
                                      {"webhook_id": webhook_id})
            row = store.update(conn, str(webhook_id), changes)
            audit.record(conn, principal.member_id, "webhook.update", bank_id,
                         details={"webhook_id": str(row["id"]), "fields": sorted(changes)})
        return webhook_json(row)

    def delete(self, principal: Principal, bank_id: str, webhook_id: str) -> int:
        """Delete a webhook and its delivery log (``admin``); its pending deliveries are
        never sent. Returns how many deliveries went with it. 404 ``webhook_not_found``."""
        principal.require(bank_id, "admin")
        with self._pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            row = store.get(conn, bank_id, webhook_id, lock=True)
            if row is None:
                raise WebhookNotFound(f"webhook {webhook_id} does not exist",
                                      {"webhook_id": webhook_id})
            n = store.delete(conn, str(row["id"]))
            audit.record(conn, principal.member_id, "webhook.delete", bank_id,
                         details={"webhook_id": str(row["id"]), "deliveries": n})
        return n

    def deliveries(self, principal: Principal, bank_id: str, webhook_id: str, limit: int,
                   cursor: str | None) -> tuple[list[dict], str | None]:
        """One page of a webhook's deliveries, newest first, each with its attempts
        (``admin``); ``(items, next_cursor)`` — ``next_cursor`` ``None`` on the last page.
        400 ``invalid_cursor``, 404 ``webhook_not_found``."""
        principal.require(bank_id, "admin")
        before = parse_cursor(cursor)
        with self._pool.connection() as conn:
            banks.get(conn, bank_id)
            hook = store.get(conn, bank_id, webhook_id)
            if hook is None:
                raise WebhookNotFound(f"webhook {webhook_id} does not exist",
                                      {"webhook_id": webhook_id})
            rows = store.deliveries_page(conn, str(hook["id"]), limit + 1, before)
        more = len(rows) > limit
        rows = rows[:limit]
        return [delivery_json(r) for r in rows], (_cursor(rows[-1]) if more else None)
