"""Who is calling, and which role each route needs (spec §7; README "Members, keys and
permissions").

Every view declares the role it needs on the bank in its path with :func:`requires`
(``read``, ``write`` or ``admin``; ``"public"`` for health probes; ``"member"`` for a route
any authenticated caller may use, which then checks per object itself). The request hook
(:func:`register`) authenticates the ``Authorization: Bearer <key>`` header, stores the
:class:`~rcll.access.principal.Principal` on ``flask.g`` and enforces the declared role
against ``view_args["bank_id"]`` before the view runs. A view that declares nothing is
refused (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable

from flask import current_app, g

from rcll.access.principal import Principal

ROLE_ATTR = "_rcll_role"
LEVELS = ("public", "member", "read", "write", "admin")


def requires(role: str) -> Callable:
    """Decorator: the view needs ``role`` (one of :data:`LEVELS`) on its ``bank_id``."""
    if role not in LEVELS:
        raise ValueError(f"unknown role {role!r}; known: {LEVELS}")

    def mark(view: Callable) -> Callable:
        setattr(view, ROLE_ATTR, role)
        return view

    return mark


def principal() -> Principal:
    """The caller of this request (set by the request hook); the unrestricted principal when
    auth is off (local dev stack)."""
    p = g.get("principal")
    if p is not None:
        return p
    return Principal.unrestricted(tuple(current_app.extensions["rcll"].settings.purposes))
