"""Who is calling, and which role each route needs (spec §7;
docs/concepts/access.md "Members, keys and permissions").

Every view declares the role it needs on the bank in its path with :func:`requires`
(``read``, ``write`` or ``admin``; ``"public"`` for health probes; ``"member"`` for a route
any authenticated caller may use, which then checks per object itself; ``"session"`` for
the web screens, which authenticate from their session cookie themselves, :mod:`api.web`). The request hook
(:func:`register`) authenticates the ``Authorization: Bearer <key>`` header, stores the
:class:`~rcll.access.principal.Principal` on ``flask.g`` and enforces the declared role
against ``view_args["bank_id"]`` before the view runs. A view that declares nothing is
refused (fail closed).

Order of the checks, before any view code or database write:

0. a ``bank_id`` in the path that is a bank alias is replaced by its bank
   (:meth:`rcll.banks.aliases.BankAliasService.resolve`): every check below and the view
   see the bank's own id;
1. the route declares no role → 403 ``route_not_declared`` (a bug; logged);
2. read-only deployment and the role is ``write`` or ``admin``, or a non-GET method on a route
   not declared ``read`` → 403 ``read_only_deployment`` (:func:`refused_when_read_only`);
3. ``public`` → no authentication; ``session`` → none here either: the web screens' own
   hook (:func:`api.web.session.load_caller`) signs the caller in from the cookie and sends
   a browser without a session to the sign-in screen;
4. auth on: no key → 401 ``missing_api_key``; a malformed, unknown or revoked key, or a
   disabled member → 401 ``invalid_api_key`` (one message for all);
5. ``read``/``write``/``admin`` with a ``bank_id`` in the path → that role on that bank, or
   403 ``forbidden`` (details ``needed``, ``have``); ``admin`` on a route without a bank →
   deployment admin. ``member``: any authenticated caller.

Auth off (local dev stack only): every request is the unrestricted principal; steps 1 and 2
still apply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from flask import Flask, current_app, g, request

from rcll.access.principal import Principal
from rcll.errors import Forbidden, Rejected

log = logging.getLogger(__name__)

ROLE_ATTR = "_rcll_role"
LEVELS = ("public", "session", "member", "read", "write", "admin")
NO_BEARER = frozenset({"public", "session"})
WRITE_LEVELS = frozenset({"write", "admin"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def requires(role: str) -> Callable:
    """Decorator: the view needs ``role`` (one of :data:`LEVELS`) on its ``bank_id``."""
    if role not in LEVELS:
        raise ValueError(f"unknown role {role!r}; known: {LEVELS}")

    def mark(view: Callable) -> Callable:
        setattr(view, ROLE_ATTR, role)
        return view

    return mark


LLM_ATTR = "_rcll_uses_llm"


def uses_llm(view: Callable) -> Callable:
    """Decorator: the view calls a language model (``reflect``). A read-only deployment,
    which serves only recall and read and holds no LLM key (spec §7), refuses it with 403
    ``read_only_deployment`` before authentication, like a write route."""
    setattr(view, LLM_ATTR, True)
    return view


def refused_when_read_only(role: str, method: str, view: Callable | None = None) -> bool:
    """Whether a read-only deployment refuses this route: a ``write`` or ``admin`` route, or
    any method but GET/HEAD/OPTIONS on a route not declared ``read`` (``POST …/recall`` is
    ``read``; ``DELETE /keys/{id}``, a ``member`` route, is refused)."""
    return (role in WRITE_LEVELS or (method not in SAFE_METHODS and role != "read")
            or getattr(view, LLM_ATTR, False))


def declared_role(view: Callable | None) -> str | None:
    """The role a view function declared with :func:`requires`, or ``None``."""
    return getattr(view, ROLE_ATTR, None)


def principal() -> Principal:
    """The caller of this request (set by the request hook); the unrestricted principal when
    auth is off (local dev stack)."""
    p = g.get("principal")
    if p is not None:
        return p
    return Principal.unrestricted(tuple(current_app.extensions["rcll"].settings.purposes))


def bearer_key() -> str | None:
    """The key of ``Authorization: Bearer <key>``; ``None`` when the header is absent, ``""``
    when it is present but not a bearer token (answered as an invalid key)."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return ""
    return value.strip()


def register(app: Flask) -> None:
    """Install the authentication and role hook (module doc) on ``app``; register it before
    any other ``before_request`` hook that reads request data."""

    @app.url_value_preprocessor
    def _resolve_bank_alias(_endpoint, values):
        """Step 0: the path's bank alias becomes its bank (before every before_request)."""
        if values and isinstance(values.get("bank_id"), str):
            values["bank_id"] = app.extensions["rcll"].bank_aliases.resolve(values["bank_id"])

    @app.before_request
    def _authorize():
        settings = app.extensions["rcll"].settings
        if request.routing_exception is not None:  # 404/405: nothing to run; with auth on,
            role = "member"                           # only a caller with a key learns that
        else:
            view = app.view_functions.get(request.endpoint)
            role = declared_role(view)
            if role is None:
                log.error("route %s declares no role (api.auth.requires); refused",
                          request.endpoint)
                raise Rejected(403, "route_not_declared",
                               "this route declares no access role and is refused",
                               {"endpoint": request.endpoint})
            if settings.read_only and refused_when_read_only(role, request.method, view):
                raise Rejected(403, "read_only_deployment",
                               "this is a read-only deployment: only recall and read are "
                               "served; send writes to the read-write API",
                               {"endpoint": request.endpoint, "role": role})
        if role in NO_BEARER:
            return None
        if not settings.auth:
            g.principal = Principal.unrestricted(tuple(settings.purposes))
            return None
        key = bearer_key()
        who = app.extensions["rcll"].access.authenticate(key if key != "" else "invalid")
        g.principal = who
        if request.routing_exception is not None or role == "member":
            return None
        bank_id = (request.view_args or {}).get("bank_id")
        if bank_id is None:
            if role == "admin":
                if not who.is_admin:
                    raise Forbidden("this route needs a deployment admin",
                                    {"needed": "deployment admin", "have": who.member_id})
                return None
            log.error("route %s declares role %r but has no bank_id", request.endpoint, role)
            raise Rejected(403, "route_not_declared",
                           f"route declares {role!r} without a bank in its path",
                           {"endpoint": request.endpoint})
        who.require(bank_id, role)
        return None

    @app.after_request
    def _challenge(resp):
        if resp.status_code == 401:
            resp.headers["WWW-Authenticate"] = 'Bearer realm="rcll"'
        return resp
