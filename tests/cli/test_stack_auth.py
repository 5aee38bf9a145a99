"""``rcll mcp`` beside a dev stack: which RCLL_AUTH it takes (:func:`rcll.dev.stack.client_auth_env`)."""

from __future__ import annotations

import json
import os

from rcll.config import Settings
from rcll.dev.stack import STACK_FILE, client_auth_env


def _stack(tmp_path, auth: str | None, alive: bool = True) -> Settings:
    run = tmp_path / "run"
    run.mkdir()
    (run / "api.pid").write_text(str(os.getpid() if alive else 2**22 + 7))
    if auth:
        (run / STACK_FILE).write_text(json.dumps({"auth": auth, "api_url": "x"}))
    return Settings(state_dir=tmp_path)


def test_follows_a_running_stack(tmp_path):
    assert client_auth_env(_stack(tmp_path, "off"), {}) == {"RCLL_AUTH": "off"}


def test_the_users_setting_wins(tmp_path):
    assert client_auth_env(_stack(tmp_path, "off"), {"RCLL_AUTH": "on"}) == {}


def test_no_running_stack_changes_nothing(tmp_path):
    assert client_auth_env(_stack(tmp_path, "off", alive=False), {}) == {}
    assert client_auth_env(Settings(state_dir=tmp_path / "none"), {}) == {}
