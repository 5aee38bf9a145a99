"""Exposition: one text page summing every process of a role.

Several processes serve one role (gunicorn workers behind the API; a Celery worker's pool
children, where the tasks run, behind its exporter). prometheus_client's multiprocess mode
handles that: each process writes its values to files in ``PROMETHEUS_MULTIPROC_DIR`` and the
exporter reads them all. The variable must be set before the process (and so before
``prometheus_client``) starts: the launchers (``rcll serve``, ``rcll worker``, the dev stack)
call :func:`multiproc_env`. A process started without it exports only its own values.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)

log = logging.getLogger(__name__)
ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiproc_dir() -> Path | None:
    """The multiprocess folder of this process, or None (single-process mode)."""
    value = os.environ.get(ENV) or os.environ.get(ENV.lower())
    return Path(value) if value else None


def multiproc_env(env: dict, default_dir: Path) -> dict:
    """``env`` with ``PROMETHEUS_MULTIPROC_DIR`` set (kept if ``env`` sets it already, else
    ``default_dir``) and that folder emptied of an earlier run's files: call it in the
    launcher, before the role's processes start. Returns a new dict."""
    out = dict(env)
    path = Path(out.get(ENV) or default_dir).resolve()
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    out[ENV] = str(path)
    return out


def registry() -> CollectorRegistry:
    """The registry to expose: in multiprocess mode one summing every process's files (read
    anew on each collect), else the process's default one."""
    if multiproc_dir() is None:
        return REGISTRY
    reg = CollectorRegistry()
    multiprocess.MultiProcessCollector(reg)
    return reg


def render(extra=()) -> tuple[bytes, str]:
    """``(body, content type)`` of one scrape: :func:`registry` plus the ``extra`` collectors
    (sampled now, e.g. :class:`rcll.telemetry.collectors.ScrapeCollector`)."""
    reg = registry()
    if reg is REGISTRY and not extra:
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
    if reg is REGISTRY:
        out = CollectorRegistry()
        out.register(_Wrapped(REGISTRY))
        reg = out
    for collector in extra:
        reg.register(collector)
    return generate_latest(reg), CONTENT_TYPE_LATEST


class _Wrapped:
    """A registry's families as one collector of another registry."""

    def __init__(self, inner: CollectorRegistry):
        self.inner = inner

    def collect(self):
        return self.inner.collect()


def process_dead(pid: int) -> None:
    """Tell the multiprocess files that ``pid`` exited (its live gauges stop counting)."""
    if multiproc_dir() is not None:
        multiprocess.mark_process_dead(pid)


def start_exporter(port: int, addr: str = "127.0.0.1") -> object | None:
    """Serve this role's metrics on ``addr:port`` (a thread of this process; ``addr`` is
    ``RCLL_METRICS_HOST``, loopback by default), or None when the port is 0 or taken
    (logged: a worker keeps working without its exporter)."""
    from prometheus_client import start_http_server

    if not port:
        return None
    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry())
    except OSError as exc:
        log.warning("metrics exporter not started on %s:%s: %s", addr, port, exc)
        return None
    log.info("metrics exporter on %s:%s (%s)", addr, port,
             f"multiprocess, {multiproc_dir()}" if multiproc_dir() else "this process only")
    return server

