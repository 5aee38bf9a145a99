"""Who is signed in to the web screens, and the CSRF check.

The cookie (``rcll_session``; HttpOnly, SameSite=Lax) is Flask's signed session (signed with
a key derived from the API-key secret, ``RCLL_KEY_SECRET``) and holds two random values:
``sid``, the id of the server-side session in Redis (:mod:`rcll.access.web_sessions` — the
API key is never in the cookie nor in Redis), and ``csrf``, the token every form posts back
as ``csrf_token``. A POST without the matching token is refused with 403 before the view runs.

Auth off (local dev stack): every screen runs as the unrestricted principal, under a banner.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from flask import Flask, current_app, g, request, session

from api.deps import services
from rcll.access.principal import Principal

COOKIE = "rcll_session"
CSRF_FIELD = "csrf_token"


class CSRFRefused(Exception):
    """A POST whose ``csrf_token`` is missing or wrong (answered 403)."""


class SignInNeeded(Exception):
    """No signed-in session (answered with a redirect to the sign-in screen)."""


def configure(app: Flask) -> None:
    """The session cookie: signed with HMAC(key secret, "rcll-web-session"), HttpOnly,
    SameSite=Lax, Secure when ``RCLL_WEB_COOKIE_SECURE``, its lifetime the server-side
    session's."""
    svc = app.extensions["rcll"]
    app.secret_key = hmac.new(svc.access.secret, b"rcll-web-session", hashlib.sha256).digest()
    app.config.update(SESSION_COOKIE_NAME=COOKIE, SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax",
                      SESSION_COOKIE_SECURE=bool(svc.settings.web_cookie_secure),
                      PERMANENT_SESSION_LIFETIME=svc.settings.web_session_ttl_s)


def csrf_token() -> str:
    """This browser's CSRF token (made on first use, kept in the signed cookie)."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def check_csrf() -> None:
    """Raise :class:`CSRFRefused` unless a POST carries the session's token."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    sent = request.form.get(CSRF_FIELD, "")
    expected = session.get("csrf") or ""
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise CSRFRefused()


def auth_on() -> bool:
    return bool(current_app.extensions["rcll"].settings.auth)


def load_caller() -> Principal | None:
    """The signed-in principal (also on ``g.principal`` for :func:`api.auth.principal`);
    the unrestricted principal when auth is off; ``None`` when nobody is signed in."""
    svc = services()
    if not auth_on():
        who = Principal.unrestricted(tuple(svc.settings.purposes))
    else:
        who = svc.web_sessions.principal(session.get("sid"))
    g.principal = who
    return who


def caller() -> Principal:
    """The signed-in principal of this request; :class:`SignInNeeded` otherwise."""
    who = g.get("principal")
    if who is None:
        raise SignInNeeded()
    return who


def sign_in(key: str) -> Principal:
    """Open a server-side session for ``key`` (raises ``InvalidAPIKey`` /
    ``MissingAPIKey``) and put its id in a fresh cookie (new CSRF token too)."""
    sid, who = services().web_sessions.open(key)
    old = session.get("sid")
    if old:
        services().web_sessions.close(old)
    session.clear()
    session.permanent = True
    session["sid"] = sid
    session["csrf"] = secrets.token_urlsafe(32)
    return who


def sign_out() -> None:
    """End the server-side session and clear the cookie."""
    services().web_sessions.close(session.get("sid"))
    session.clear()
