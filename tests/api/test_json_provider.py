"""The API's orjson encoder answers what Flask's default encoder answered (parsed), and its
fallback covers what orjson refuses."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from dataclasses import dataclass

import pytest
from flask import Flask
from flask.json.provider import DefaultJSONProvider

from api.json_provider import OrjsonProvider


@dataclass
class _Point:
    x: int
    label: str


VALUES = [
    {"b": 1, "a": [1.5, None, True], "nested": {"z": "é ✓ 漢字", "k": ()}},
    {"when": dt.datetime(2026, 12, 7, 21, 59, tzinfo=dt.UTC), "day": dt.date(2026, 1, 2)},
    {"id": uuid.UUID("12345678-1234-5678-1234-567812345678"), "d": decimal.Decimal("1.25")},
    {1: "int key", "p": _Point(3, "x")},
    {"big": 2**70, "surrogate": "\udc00"},  # orjson refuses both: the stdlib path
    [0.1, 1e-7, 123456789.125, -0.0],
]


@pytest.fixture()
def providers():
    old, new = Flask("old"), Flask("new")
    old.json = DefaultJSONProvider(old)
    old.json.sort_keys = False
    new.json = OrjsonProvider(new)
    return old, new


@pytest.mark.parametrize("value", VALUES)
def test_the_orjson_response_parses_to_what_flasks_default_answered(providers, value):
    old, new = providers
    with old.app_context():
        want = old.json.response(value)
    with new.app_context():
        got = new.json.response(value)
    assert got.mimetype == want.mimetype == "application/json"
    assert got.data.endswith(b"\n")
    assert json.loads(got.data) == json.loads(want.data)
    # keys keep their insertion order, as Flask's with sort_keys off
    if isinstance(value, dict):
        assert list(json.loads(got.data)) == list(json.loads(want.data))


def test_non_ascii_is_utf8_nan_is_null_and_unknown_types_still_raise(providers):
    """Answers: UTF-8 text, NaN as null (valid JSON), an unknown type a TypeError as in
    Flask. ``dumps`` stays the stdlib's: Flask's test client writes ``json=`` bodies with it,
    so a test's NaN reaches the server as NaN (and is refused there)."""
    _, new = providers
    with new.app_context():
        body = new.json.response({"t": "café", "n": float("nan")}).data
        assert "café".encode() in body  # UTF-8, not a \\u escape
        assert json.loads(body)["n"] is None
        with pytest.raises(TypeError, match="not JSON serializable"):
            new.json.response({"o": object()})
        assert new.json.dumps({"n": float("nan")}) == '{"n": NaN}'


def test_jsonb_read_through_the_pool_parses_what_orjson_refuses(services):
    """The pools read json/jsonb with orjson, and with the stdlib for an integer beyond 64
    bits: the value PostgreSQL holds comes back whole."""
    with services.pool.connection() as conn:
        row = conn.execute("""SELECT '{"a": [1, 2.5, "é"], "n": null}'::jsonb AS small,
                                     '{"big": 1180591620717411303424}'::jsonb AS big""").fetchone()
    assert row["small"] == {"a": [1, 2.5, "é"], "n": None}
    assert row["big"] == {"big": 2**70}
