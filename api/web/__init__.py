"""The web screens (docs/reference/web-screens.md): server-rendered Jinja pages under ``/ui`` over
the same ``rcll`` services the HTTP API calls, for the signed-in member only.

- :mod:`api.web.session`: sign-in into a server-side session (Redis,
  :mod:`rcll.access.web_sessions`), the caller of each screen, the CSRF check.
- :mod:`api.web.views`: the screens (one function each), templates in ``templates/``, the
  stylesheet and the few lines of JavaScript in ``static/`` (served by the app; no CDN).

Routes declare the role ``session`` to the bearer-key hook (:mod:`api.auth`): a browser
sends no ``Authorization`` header; the screens authenticate from the session cookie
themselves (:func:`api.web.session.load_caller`), before any view runs.
"""

from __future__ import annotations

from flask import Flask

from api.web import session
from api.web.views import bp


def register(app: Flask) -> None:
    """Serve the screens on ``app``: the blueprint and the session cookie settings."""
    session.configure(app)
    app.register_blueprint(bp)
