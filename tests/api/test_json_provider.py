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
    {"when": dt.datetime(2026, 12, 7, 21, 59, tzinfo=dt.timezone.utc), "day": dt.date(2026, 1, 2)},
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


def test_non_ascii_is_utf8_and_unknown_types_still_raise(providers):
    _, new = providers
    with new.app_context():
        body = new.json.response({"t": "café"}).data
        assert "café".encode() in body  # UTF-8, not a \\u escape
        assert new.json.dumps({"t": "café"}) == '{"t":"café"}'
        with pytest.raises(TypeError, match="not JSON serializable"):
            new.json.dumps({"o": object()})
        # a caller asking for stdlib options gets them
        assert new.json.dumps({"b": 1, "a": 2}, sort_keys=True) == '{"a": 2, "b": 1}'


def test_jsonb_read_through_the_pool_parses_what_orjson_refuses(services):
    """The pools read json/jsonb with orjson, and with the stdlib for an integer beyond 64
    bits: the value PostgreSQL holds comes back whole."""
    with services.pool.connection() as conn:
        row = conn.execute("""SELECT '{"a": [1, 2.5, "é"], "n": null}'::jsonb AS small,
                                     '{"big": 1180591620717411303424}'::jsonb AS big""").fetchone()
    assert row["small"] == {"a": [1, 2.5, "é"], "n": None}
    assert row["big"] == {"big": 2**70}
