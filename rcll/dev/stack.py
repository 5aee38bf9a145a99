"""``rcll dev up`` / ``rcll dev down``: PostgreSQL, Redis, a Celery worker, beat and the API.

Idempotent (a running part is left alone); PID and log files live in ``<state_dir>/run``.
"""

from __future__ import annotations

import json
import os
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


def child_env(settings: Settings) -> dict:
    """The environment for child processes: every setting as ``RCLL_*``, paths absolute."""
    env = dict(os.environ)
    for name, value in settings.model_dump(mode="json").items():
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
    (``<state_dir>/run/metrics/<name>``, emptied; :func:`rcll.telemetry.exposition.multiproc_env`)."""
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


def up(settings: Settings, *, api: bool = True, worker: bool = True, log=print) -> None:
    """Start what is not running yet: database (+ migrations), Redis, worker, API."""
    run_dir = settings.run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if settings.database_url is None:
        postgres.start(settings, log=log)
    migrate.upgrade(settings)
    if settings.database_url is None:
        grant_reader(settings)
    dev_redis.ensure(settings, log=log)
    env = child_env(settings)
    if worker:
        start_worker(settings, env, log=log)
        start_beat(settings, env, log=log)
    if api:
        api_env = metrics_env(settings, dev_api_env(env), "api")
        if not processes.running_pid(run_dir, "api"):
            log(f"starting api on {settings.base_url}"
                + (" (RCLL_AUTH=off: dev stack)" if api_env["RCLL_AUTH"] == "off" else ""))
        processes.start(run_dir, "api", api_cmd(settings), env=api_env, cwd=REPO_ROOT)
        wait_http(f"{settings.base_url}/healthz", 120,
                  lambda: processes.running_pid(run_dir, "api") is not None)
    log(f"stack up: api {settings.base_url}, logs in {run_dir}")


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
    """Stop the API, the worker, beat, Redis (if we started it) and the dev database."""
    run_dir = settings.run_dir.resolve()
    for name in ("api", "worker", "beat"):
        if processes.stop(run_dir, name):
            log(f"stopped {name}")
    if dev_redis.stop(settings):
        log("stopped redis")
    if settings.database_url is None:
        postgres.stop(settings, log=log)
