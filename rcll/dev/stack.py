"""``rcll dev up`` / ``rcll dev down``: PostgreSQL, Redis, a Celery worker, beat, the API and
the MCP server (streamable HTTP on ``127.0.0.1:RCLL_MCP_PORT``, path ``/mcp``).

Idempotent: a running part is left alone, its state (the API's Prometheus multiprocess
folder included) untouched. PID and log files live in ``<state_dir>/run``; ``stack.json``
there records the stack's auth mode and addresses while it is up (:func:`stack_info`), so
``rcll mcp`` beside it follows its auth mode (:func:`client_auth_env`).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import httpx
import psycopg

from rcll.config import Settings
from rcll.dev import postgres, processes
from rcll.dev import redis as dev_redis
from rcll.store import migrate

REPO_ROOT = Path(__file__).resolve().parents[2]


def child_env(settings: Settings, only_set: bool = False) -> dict:
    """The environment for child processes: every setting as ``RCLL_*``, paths absolute.
    ``only_set``: only the settings given explicitly (keyword or environment), so a child
    running other code (another checkout, in a benchmark) keeps that code's own defaults."""
    env = dict(os.environ)
    for name, value in settings.model_dump(mode="json").items():
        if only_set and name not in settings.model_fields_set:
            continue
        if value is not None:  # lists and dicts as JSON (what pydantic-settings parses)
            env[f"RCLL_{name.upper()}"] = (json.dumps(value) if isinstance(value, (list, dict))
                                           else str(value))
    env["RCLL_STATE_DIR"] = str(settings.state_dir.resolve())
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def dev_api_env(env: dict) -> dict:
    """The dev stack's API environment: ``RCLL_AUTH=off`` unless the user set ``RCLL_AUTH``
    (the API still refuses auth off beyond loopback: :mod:`rcll.access.deployment`)."""
    out = dict(env)
    out["RCLL_AUTH"] = os.environ["RCLL_AUTH"] if "RCLL_AUTH" in os.environ else "off"
    return out


def metrics_env(settings: Settings, env: dict, name: str) -> dict:
    """``env`` with the Prometheus multiprocess folder of process ``name``
    (``<state_dir>/run/metrics/<name>``, emptied; :func:`rcll.telemetry.exposition.multiproc_env`).
    Call it only to start ``name``: emptying the folder of a running process loses its values."""
    from rcll.telemetry.exposition import ENV, multiproc_env

    env = {k: v for k, v in env.items() if k != ENV}  # each process family its own folder
    return multiproc_env(env, settings.run_dir.resolve() / "metrics" / name)


def worker_cmd(settings: Settings, queues: str | None = None, concurrency: int | None = None,
               name: str = "rcll") -> list[str]:
    """The Celery worker command line (all queues unless ``queues`` names some)."""
    cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
           "--loglevel", "INFO", "--concurrency", str(concurrency or settings.worker_processes),
           "--hostname", f"{name}@%h"]
    if queues:
        cmd += ["--queues", queues]
    return cmd


def beat_cmd(settings: Settings) -> list[str]:
    """The Celery beat command line: schedules the recovery sweep (one per deployment)."""
    return [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat",
            "--loglevel", "INFO",
            "--schedule", str(settings.run_dir.resolve() / "celerybeat-schedule")]


def api_cmd(settings: Settings) -> list[str]:
    """The gunicorn command line serving ``api.app:create_app()``."""
    return [sys.executable, "-m", "gunicorn", "--config", "python:api.gunicorn_conf",
            "--bind", f"{settings.api_host}:{settings.api_port}",
            "--workers", str(settings.api_workers), "--threads", str(settings.api_threads),
            "--timeout", "300",
            "--access-logfile", "-",
            "--control-socket", str(settings.run_dir.resolve() / "gunicorn.ctl"),
            "api.app:create_app()"]


def mcp_cmd(settings: Settings) -> list[str]:
    """The dev stack's MCP server: streamable HTTP on ``127.0.0.1:<mcp_port>`` (``rcll mcp``)."""
    return [sys.executable, "-m", "mcp_server", "--transport", "http", "--host", "127.0.0.1",
            "--port", str(settings.mcp_port)]


def mcp_url(settings: Settings) -> str:
    """Where an MCP client reaches the dev stack's MCP server."""
    return f"http://127.0.0.1:{settings.mcp_port}/mcp"


STACK_FILE = "stack.json"


def mcp_client_config(settings: Settings) -> dict:
    """An MCP client configuration (the ``mcpServers`` JSON most clients read) for this dev
    stack: ``rcll`` — streamable HTTP at :func:`mcp_url` (the server ``rcll dev up``
    starts; no key with auth off); ``rcll-stdio`` — the client launches ``rcll mcp`` itself,
    with the absolute ``rcll`` path and ``RCLL_STATE_DIR`` (a client passes no other
    environment, and its working folder is not the checkout)."""
    exe = Path(sys.executable).with_name("rcll")
    env = {"RCLL_STATE_DIR": str(settings.state_dir.resolve())}
    overrides = {"pg_port": 54329, "api_port": 8765, "redis_url": "redis://127.0.0.1:6379/0",
                 "database_url": None}  # pass only the settings that differ from defaults
    for name, default in overrides.items():
        value = getattr(settings, name)
        if value != default and value is not None:
            env[f"RCLL_{name.upper()}"] = str(value)
    return {"mcpServers": {
        "rcll": {"type": "http", "url": mcp_url(settings)},
        "rcll-stdio": {"type": "stdio", "command": str(exe), "args": ["mcp"], "env": env},
    }}


def stack_info(settings: Settings) -> dict | None:
    """What ``rcll dev up`` recorded in ``<run_dir>/stack.json`` — ``{"auth": "on"|"off",
    "api_url", "mcp_url"}`` — while its API runs; ``None`` when no dev stack API runs there."""
    run_dir = settings.run_dir.resolve()
    if not processes.running_pid(run_dir, "api"):
        return None
    try:
        return json.loads((run_dir / STACK_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None


def client_auth_env(settings: Settings, environ: dict) -> dict:
    """The ``RCLL_AUTH`` a process beside the dev stack (``rcll mcp``) should run with:
    ``{}`` when ``environ`` sets ``RCLL_AUTH`` (the user's choice wins) or no dev stack runs in
    ``settings.state_dir``; else ``{"RCLL_AUTH": <the stack's mode>}``."""
    if "RCLL_AUTH" in environ:
        return {}
    info = stack_info(settings)
    if not info or info.get("auth") not in ("on", "off"):
        return {}
    return {"RCLL_AUTH": info["auth"]}


def grant_reader(settings: Settings) -> None:
    """Give the ``rcll_reader`` role SELECT (and nothing else) on every table."""
    with psycopg.connect(settings.db_url, autocommit=True) as conn:
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {postgres.READER_ROLE}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {postgres.READER_ROLE}")


def wait_http(url: str, timeout_s: float, proc_alive) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if not proc_alive():
            raise RuntimeError(f"process serving {url} exited")
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout_s:.0f}s")


def wait_port(host: str, port: int, timeout_s: float, proc_alive) -> None:
    """Wait until ``host:port`` accepts a TCP connection; ``RuntimeError`` if the process
    exits first, ``TimeoutError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            pass
        if not proc_alive():
            raise RuntimeError(f"process serving {host}:{port} exited")
        time.sleep(0.3)
    raise TimeoutError(f"{host}:{port} did not answer within {timeout_s:.0f}s")


def wait_log(log_path: Path, since: int, marker: bytes, timeout_s: float, proc_alive) -> None:
    """Wait until ``marker`` appears in ``log_path`` after byte ``since``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(log_path, "rb") as fh:
            fh.seek(since)
            if marker in fh.read():
                return
        if not proc_alive():
            raise RuntimeError(f"process exited; see {log_path}")
        time.sleep(0.3)
    raise TimeoutError(f"not ready within {timeout_s:.0f}s; see {log_path}")


def up(settings: Settings, *, api: bool = True, worker: bool = True, mcp: bool = True,
       log=print) -> None:
    """Start what is not running yet: database (+ migrations), Redis, worker, beat, API, MCP
    server. A part already running is left as it is (its metrics too)."""
    run_dir = settings.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if settings.database_url is None:
        postgres.start(settings, log=log)
    migrate.upgrade(settings)
    if settings.database_url is None:
        grant_reader(settings)
    dev_redis.ensure(settings, log=log)
    env = child_env(settings)
    server_env = dev_api_env(env)  # the API and the MCP server share one auth mode
    if worker:
        start_worker(settings, env, log=log)
        start_beat(settings, env, log=log)
    if api:
        if processes.running_pid(run_dir, "api"):
            log(f"api already running on {settings.base_url}")
        else:
            log(f"starting api on {settings.base_url}"
                + (" (RCLL_AUTH=off: dev stack)" if server_env["RCLL_AUTH"] == "off" else ""))
            processes.start(run_dir, "api", api_cmd(settings),
                            env=metrics_env(settings, server_env, "api"), cwd=REPO_ROOT)
            (run_dir / STACK_FILE).write_text(json.dumps({  # the mode the API runs with
                "auth": "off" if server_env["RCLL_AUTH"] == "off" else "on",
                "api_url": settings.base_url, "mcp_url": mcp_url(settings)}))
        wait_http(f"{settings.base_url}/healthz", 120,
                  lambda: processes.running_pid(run_dir, "api") is not None)
    if mcp:
        start_mcp(settings, server_env, log=log)
    log(f"stack up: api {settings.base_url}"
        + (f", mcp {mcp_url(settings)}" if mcp else "") + f", logs in {run_dir}")


def start_mcp(settings: Settings, env: dict | None = None, log=print) -> int:
    """Start the MCP server over streamable HTTP (idempotent) and wait until it listens."""
    run_dir = settings.run_dir.resolve()
    pid = processes.running_pid(run_dir, "mcp")
    if pid:
        log(f"mcp already running on {mcp_url(settings)}")
        return pid
    log(f"starting mcp on {mcp_url(settings)}")
    env = {k: v for k, v in (env or dev_api_env(child_env(settings))).items()
           if k != "PROMETHEUS_MULTIPROC_DIR"}
    pid = processes.start(run_dir, "mcp", mcp_cmd(settings), env=env, cwd=REPO_ROOT)
    wait_port("127.0.0.1", settings.mcp_port, 120,
              lambda: processes.running_pid(run_dir, "mcp") is not None)
    return pid


def start_worker(settings: Settings, env: dict | None = None, name: str = "worker",
                 log=print) -> int:
    """Start a Celery worker (idempotent per ``name``) and wait until it is ready."""
    if processes.running_pid(settings.run_dir.resolve(), name):
        return processes.running_pid(settings.run_dir.resolve(), name)
    env = metrics_env(settings, env or child_env(settings), name)
    return _start_logged(settings, name, worker_cmd(settings, name=name), env, b" ready.",
                         120, log)


def start_beat(settings: Settings, env: dict | None = None, name: str = "beat",
               log=print) -> int:
    """Start Celery beat (idempotent per ``name``) and wait until it has started."""
    return _start_logged(settings, name, beat_cmd(settings), env, b"beat: Starting", 60, log)


def _start_logged(settings: Settings, name: str, cmd: list[str], env: dict | None,
                  ready_marker: bytes, timeout_s: float, log) -> int:
    """Start ``cmd`` as ``name`` unless it runs, then wait for ``ready_marker`` in its log.
    Raises ``RuntimeError`` if it exits, ``TimeoutError`` after ``timeout_s``."""
    run_dir = settings.run_dir.resolve()
    if processes.running_pid(run_dir, name):
        return processes.running_pid(run_dir, name)
    log_path = run_dir / f"{name}.log"
    since = log_path.stat().st_size if log_path.exists() else 0
    log(f"starting celery {name}")
    pid = processes.start(run_dir, name, cmd, env=env or child_env(settings), cwd=REPO_ROOT)
    wait_log(log_path, since, ready_marker, timeout_s,
             lambda: processes.running_pid(run_dir, name) is not None)
    return pid


def down(settings: Settings, log=print) -> None:
    """Stop the MCP server, the API, the worker, beat, Redis (if we started it) and the dev
    database."""
    run_dir = settings.run_dir.resolve()
    (run_dir / STACK_FILE).unlink(missing_ok=True)
    for name in ("mcp", "api", "worker", "beat"):
        if processes.stop(run_dir, name):
            log(f"stopped {name}")
    if dev_redis.stop(settings):
        log("stopped redis")
    if settings.database_url is None:
        postgres.stop(settings, log=log)
