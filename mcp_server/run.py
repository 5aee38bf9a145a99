"""Start the MCP server: stdio (one key per process) or streamable HTTP (a key per request).

``rcll mcp`` calls :func:`run_stdio` or :func:`run_http`; tests and embedders can build the
ASGI app with :func:`http_app`.
"""

from __future__ import annotations

import logging
import sys

from mcp_server.auth import BearerAuth, authenticate
from mcp_server.server import Runtime, build_server
from rcll.bootstrap import Services
from rcll.errors import RCLLError

MCP_PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
log = logging.getLogger(__name__)


def runtime(services: Services, default_bank: str | None = None,
            principal=None, api_key: str | None = None) -> Runtime:
    """The tools' runtime over ``services`` with the Celery enqueuer the API uses (retain
    jobs go to the same queues). ``api_key`` (stdio): re-authenticated on every tool call."""
    from api.app import celery_enqueuer

    reauth = None
    if principal is not None and services.settings.auth:
        reauth = lambda: authenticate(services, api_key)  # noqa: E731
    return Runtime(services=services,
                   retain=services.retain_service(celery_enqueuer(services.settings)),
                   default_bank=default_bank, principal=principal, reauthenticate=reauth)


def _warn_if_auth_off(services: Services) -> None:
    if not services.settings.auth:
        log.warning("=" * 72)
        log.warning("RCLL_AUTH=off: the MCP server accepts every caller as an unrestricted "
                    "admin. Local dev stack only.")
        log.warning("=" * 72)


def run_stdio(services: Services, api_key: str | None, default_bank: str | None = None) -> int:
    """Serve MCP over stdin/stdout as the member whose key is ``api_key``. A missing or bad
    key (with auth on) refuses to start: a message on stderr, return status 2."""
    _warn_if_auth_off(services)
    try:
        principal = authenticate(services, api_key)
    except RCLLError as exc:
        print(f"rcll mcp: {exc.code}: {exc.message} (set RCLL_API_KEY or pass "
              "--api-key; beside a dev stack with auth off, set RCLL_STATE_DIR to its folder)",
              file=sys.stderr)
        return 2
    who = principal.member_id or ("unrestricted" if principal.all_audiences else "admin")
    log.info("MCP over stdio as %s, default bank %s", who, default_bank or "(none)")
    build_server(runtime(services, default_bank, principal, api_key)).run("stdio")
    return 0


def http_app(services: Services, default_bank: str | None = None, host: str = "127.0.0.1"):
    """The streamable HTTP ASGI app (path :data:`MCP_PATH`) behind :class:`BearerAuth`."""
    mcp = build_server(runtime(services, default_bank))
    app = mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerAuth(app, services)


def run_http(services: Services, host: str, port: int, default_bank: str | None = None) -> int:
    """Serve MCP over streamable HTTP on ``host:port`` (path ``/mcp``) until stopped; every
    request authenticates with ``Authorization: Bearer <key>``."""
    import uvicorn

    if not services.settings.auth and host not in LOOPBACK:
        print(f"rcll mcp: refusing to serve {host} with RCLL_AUTH=off; auth may be off only on "
              "a loopback host (127.0.0.1, ::1, localhost)", file=sys.stderr)
        return 2
    _warn_if_auth_off(services)
    log.info("MCP over streamable HTTP on http://%s:%s%s", host, port, MCP_PATH)
    uvicorn.run(http_app(services, default_bank, host), host=host, port=port, log_level="info")
    return 0
