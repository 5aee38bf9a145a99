"""MCP fixtures: a deployment with auth ON (members, keys, grants made through the access
service), the environment a spawned ``python -m mcp_server`` runs with, and a real
streamable-HTTP MCP server process on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rcll.bootstrap import bootstrap
from rcll.dev.stack import child_env
from rcll.store import banks
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
ADMIN_KEY = "rcll-mcp-test-admin-key"
BANK = "mcp-bank"
OTHER_BANK = "mcp-other"
STDIO_BANK = "mcp-stdio"
HTTP_BANK = "mcp-http"
ALL = ["assist", "operate", "audit", "personal"]


@pytest.fixture(scope="session")
def auth_settings(settings):
    """The test deployment with auth on, a bootstrap admin key and a fixed key secret."""
    return settings.model_copy(update={"auth": True, "admin_key": ADMIN_KEY,
                                       "key_secret": "rcll-mcp-test-key-secret-0123456789abcdef"})


@pytest.fixture(scope="session")
def auth_services(auth_settings):
    svc = bootstrap(auth_settings)
    yield svc
    svc.close()


@pytest.fixture(scope="session")
def keys(auth_services) -> dict:
    """Members and their keys: ``writer`` (write on BANK, STDIO_BANK and HTTP_BANK, every
    purpose), ``reader`` (read
    on BANK, assist), ``outsider`` (write on OTHER_BANK only), a ``revoked`` key of the
    writer, and ``admin`` (the bootstrap key)."""
    acc = auth_services.access
    admin = acc.bootstrap_admin()
    with auth_services.pool.connection() as conn:
        for b in (BANK, OTHER_BANK, STDIO_BANK, HTTP_BANK):
            banks.ensure(conn, b)
    out = {"admin": ADMIN_KEY}
    for member, bank, role, purposes in (("mcp-writer", BANK, "write", ALL),
                                         ("mcp-reader", BANK, "read", ["assist"]),
                                         ("mcp-outsider", OTHER_BANK, "write", ALL)):
        acc.create_member(admin, member, default_purposes=purposes)
        acc.set_grant(admin, bank, member, role, purposes)
        out[member.removeprefix("mcp-")] = acc.issue_key(admin, member)["key"]
    for b in (STDIO_BANK, HTTP_BANK):
        acc.set_grant(admin, b, "mcp-writer", "write", ALL)
    revoked = acc.issue_key(admin, "mcp-writer", label="revoked")
    acc.revoke_key(admin, revoked["key_id"])
    out["revoked"] = revoked["key"]
    return out


def server_env(settings, **extra: str) -> dict:
    """The environment of a spawned MCP server: every setting as RCLL_*, this checkout on
    PYTHONPATH, and ``extra``."""
    env = child_env(settings)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("RCLL_API_KEY", None)
    env.update(extra)
    return env


def _wait_port(port: int, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"MCP server exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("MCP server did not listen in time")


@pytest.fixture(scope="session")
def http_server(auth_settings, keys, tmp_path_factory):
    """``python -m mcp_server --transport http`` on a free port, auth on; yields its URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_server", "--transport", "http", "--port", str(port),
             "--bank", BANK], env=server_env(auth_settings), cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        _wait_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        print(log.read_text()[-3000:])
