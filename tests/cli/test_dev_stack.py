"""``rcll dev up`` run twice on one state folder, as a user does (subprocesses, real
PostgreSQL, Redis, Celery worker, beat, API and MCP server on free ports):

- the second run leaves the running stack alone: the API's Prometheus counters keep counting
  (before issue 26 it emptied the API's multiprocess folder, and /metrics started again at 0);
- the MCP client configuration ``rcll dev mcp-config`` prints (the one docs/guides/mcp.md
  shows) works as written with the SDK's clients: streamable HTTP to the stack's MCP server,
  and stdio launching ``rcll mcp`` with only the configured environment (auth follows the
  stack: off, no key);
- the worker's exporter listens on loopback only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
HEALTH_CALLS = 15


def _rcll(env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rcll.cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def stack_env():
    base = ROOT / ".rcll-test"
    base.mkdir(exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="devup-", dir=base))
    os.chmod(state, 0o755)  # the PostgreSQL server user must reach its data folder
    env = {k: v for k, v in os.environ.items() if not k.startswith("RCLL_")}
    env.update({"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "RCLL_STATE_DIR": str(state), "RCLL_PG_PORT": str(free_port()),
                "RCLL_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
                "RCLL_API_PORT": str(free_port()), "RCLL_METRICS_PORT": str(free_port()),
                "RCLL_MCP_PORT": str(free_port())})
    first = _rcll(env, "dev", "up")
    try:
        assert first.returncode == 0, first.stderr[-3000:]
        yield env, first
    finally:
        _rcll(env, "dev", "down")
        shutil.rmtree(state, ignore_errors=True)


def _health_count(api: str) -> float:
    """``rcll_http_request_duration_seconds_count`` of ``GET /healthz`` (every status)."""
    text = httpx.get(f"{api}/metrics", timeout=30).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "rcll_http_request_duration_seconds":
            total += sum(s.value for s in family.samples if s.name.endswith("_count")
                         and "health" in s.labels.get("endpoint", ""))
    return total


def test_dev_up_twice_keeps_the_running_stack_and_its_metrics(stack_env):
    env, first = stack_env
    api = f"http://127.0.0.1:{env['RCLL_API_PORT']}"
    assert "mcp" in first.stderr and f":{env['RCLL_MCP_PORT']}/mcp" in first.stderr
    for _ in range(HEALTH_CALLS):
        assert httpx.get(f"{api}/healthz", timeout=30).status_code == 200
    before = _health_count(api)
    assert before >= HEALTH_CALLS
    run_dir = Path(env["RCLL_STATE_DIR"]) / "run"
    pids = {n: (run_dir / f"{n}.pid").read_text() for n in ("api", "worker", "beat", "mcp")}
    second = _rcll(env, "dev", "up")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "api already running" in second.stderr and "mcp already running" in second.stderr
    assert {n: (run_dir / f"{n}.pid").read_text() for n in pids} == pids  # nothing restarted
    after = _health_count(api)
    assert after >= before  # a reset folder would count only the second run's health checks
    info = json.loads((run_dir / "stack.json").read_text())
    assert info["auth"] == "off" and info["api_url"] == api


def _config(env: dict) -> dict:
    out = _rcll(env, "dev", "mcp-config", timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["mcpServers"]


@pytest.mark.anyio
async def test_mcp_http_config_lists_the_tools(stack_env):
    env, _ = stack_env
    cfg = _config(env)["rcll"]
    assert cfg == {"type": "http", "url": f"http://127.0.0.1:{env['RCLL_MCP_PORT']}/mcp"}
    async with streamable_http_client(cfg["url"]) as (r, w, *_), ClientSession(r, w) as s:
        await s.initialize()
        names = {t.name for t in (await s.list_tools()).tools}
    assert {"memory_recall", "memory_remember"} <= names


@pytest.mark.anyio
async def test_mcp_stdio_config_follows_the_stack_auth_mode(stack_env):
    """The client passes only the configuration's ``env`` (plus PYTHONPATH: this test runs
    a checkout the shared virtualenv's ``rcll`` does not point at) and no RCLL_AUTH: ``rcll
    mcp`` starts with the stack's auth off instead of refusing with missing_api_key."""
    env, _ = stack_env
    cfg = _config(env)["rcll-stdio"]
    assert cfg["args"] == ["mcp"] and cfg["env"]["RCLL_STATE_DIR"] == env["RCLL_STATE_DIR"]
    params = StdioServerParameters(command=sys.executable,  # the `rcll` script's interpreter
                                   args=["-m", "rcll.cli.main", *cfg["args"]],
                                   env={**cfg["env"], "PYTHONPATH": str(ROOT),
                                        "HF_HUB_OFFLINE": "1"}, cwd="/")
    assert Path(cfg["command"]).name == "rcll" and Path(cfg["command"]).exists()
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        names = {t.name for t in (await s.list_tools()).tools}
        recalled = await s.call_tool("memory_recall", {"query": "anything",
                                                       "bank_id": "devup-mcp"})
    assert "memory_recall" in names
    # the call ran as the stack's unrestricted caller: the bank's absence, not a missing key
    payload = json.loads(recalled.content[0].text)
    assert (payload["status"], payload["error"]["code"]) == (404, "bank_not_found")


def test_worker_exporter_listens_on_loopback_only(stack_env):
    env, _ = stack_env
    port = int(env["RCLL_METRICS_PORT"])
    assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).status_code == 200
    listening = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, hexport = local.split(":")
        if int(hexport, 16) == port and state == "0A":  # LISTEN
            listening.add(addr)
    assert listening == {"0100007F"}  # 127.0.0.1, not 0.0.0.0 (00000000)


def test_child_env_only_set_passes_the_explicit_settings_alone(monkeypatch, tmp_path):
    """A benchmark's child running another checkout gets the stack's explicit settings
    (keyword or RCLL_* environment) and the state folder, never this checkout's defaults."""
    from rcll.config import Settings
    from rcll.dev.stack import child_env

    for key in [k for k in os.environ if k.startswith("RCLL_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("RCLL_API_THREADS", "3")
    s = Settings(state_dir=tmp_path / "state", pg_port=55555)
    every, only = child_env(s), child_env(s, only_set=True)
    assert every["RCLL_EMBED_BATCH_TOKENS"] == str(Settings().embed_batch_tokens)
    assert every["RCLL_RECALL_RECIPE"] == Settings().recall_recipe
    assert "RCLL_EMBED_BATCH_TOKENS" not in only and "RCLL_RECALL_RECIPE" not in only
    assert only["RCLL_PG_PORT"] == "55555" and only["RCLL_API_THREADS"] == "3"
    assert only["RCLL_STATE_DIR"] == str((tmp_path / "state").resolve())
