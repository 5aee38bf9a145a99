"""The API's answers encoded by orjson, behind Flask's provider interface (``app.json``).

Responses keep the shapes of Flask's :class:`~flask.json.provider.DefaultJSONProvider`: keys
in insertion order, ``datetime`` and ``date`` as HTTP dates, ``Decimal`` and ``UUID`` as
strings, dataclasses as objects, a trailing newline. They differ in two ways: non-ASCII text
is written as UTF-8 (the body is ``application/json``, UTF-8 by RFC 8259 section 8.1), not as
``\\u`` escapes; and NaN or infinity is written as ``null`` (the stdlib wrote ``NaN``, which no
JSON parser must accept). What orjson refuses (an integer beyond 64 bits, a lone surrogate)
goes through the stdlib encoder, so nothing Flask could answer fails here.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from flask import Response
from flask.json.provider import DefaultJSONProvider, _default

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


class OrjsonProvider(DefaultJSONProvider):
    """:class:`DefaultJSONProvider` with orjson for ``response`` (every ``jsonify``: the
    answers). ``dumps`` and ``loads`` stay Flask's: ``dumps`` is also what Flask's test
    client sends a ``json=`` body with, and a test's NaN must reach the server as the
    stdlib writes it; request bodies go through :func:`rcll.validation.parse_json`,
    bounded."""

    def _bytes(self, obj: Any) -> bytes:
        try:
            return orjson.dumps(obj, default=_default, option=_OPTIONS)
        except (TypeError, orjson.JSONEncodeError):
            # orjson raises TypeError (JSONEncodeError) for a big int or a lone surrogate,
            # and for a type neither knows: the stdlib writes the first two (ASCII, with
            # escapes, as Flask did) and names the type of the last, as Flask did
            return json.dumps(obj, default=_default, separators=(",", ":")).encode("ascii")

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = self._prepare_response_obj(args, kwargs)
        return self._app.response_class(self._bytes(obj) + b"\n", mimetype=self.mimetype)
