"""Who calls the MCP server: an API key → :class:`~rcll.access.principal.Principal`.

stdio: one key for the process (``RCLL_API_KEY`` or ``--api-key``), checked before the server
starts — a wrong key refuses to start with a clear message. Streamable HTTP: the
``Authorization: Bearer <key>`` header of every request, checked by :class:`BearerAuth`
before the MCP transport sees the request (401 with the HTTP API's error envelope); the
principal rides on the request (``scope["state"]``) to the tool. With auth off
(``RCLL_AUTH=off``, local dev stack only) every caller is the unrestricted principal.
"""

from __future__ import annotations

import json

import anyio
import psycopg

from rcll.access.principal import Principal
from rcll.bootstrap import Services
from rcll.errors import RCLLError

STATE_KEY = "rcll_principal"


def authenticate(services: Services, key: str | None) -> Principal:
    """The principal of ``key`` (:meth:`rcll.access.service.AccessService.authenticate`, as
    the HTTP API). Raises 401 ``missing_api_key`` (no key) or 401 ``invalid_api_key``
    (unknown, revoked, or its member disabled — one message, no oracle) when
    ``settings.auth`` is on; auth off: the unrestricted principal."""
    s = services.settings
    if not s.auth:
        return Principal.unrestricted(tuple(s.purposes))
    return services.access.authenticate(key)

def bearer(header: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header value, else ``None``."""
    if not header:
        return None
    scheme, _, key = header.strip().partition(" ")
    return key.strip() or None if scheme.lower() == "bearer" else None


class BearerAuth:
    """ASGI middleware: authenticate every HTTP request by its bearer key; 401 (JSON error
    envelope, ``WWW-Authenticate: Bearer``) on a missing or bad key, else the principal is
    stored as ``scope["state"]["rcll_principal"]`` for the tools (Starlette's
    ``request.state``). Lifespan and other scope types pass through untouched."""

    def __init__(self, app, services: Services):
        self.app = app
        self.services = services

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            principal = await anyio.to_thread.run_sync(
                authenticate, self.services, bearer(headers.get("authorization")))
        except RCLLError as exc:
            return await _refuse(send, exc.status, exc.code, exc.message, exc.details)
        except psycopg.OperationalError:  # also psycopg_pool.PoolTimeout
            return await _refuse(send, 503, "database_unavailable",
                                 "the database is unavailable; retry later", {})
        scope.setdefault("state", {})[STATE_KEY] = principal
        await self.app(scope, receive, send)


async def _refuse(send, status: int, code: str, message: str, details: dict) -> None:
    """Answer the HTTP API's error envelope (401s with ``WWW-Authenticate: Bearer``)."""
    body = json.dumps({"error": {"code": code, "message": message, "details": details}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if status == 503:
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
