#!/usr/bin/env python3
"""Container health check of the RCLL image (``HEALTHCHECK CMD ["rcll-healthcheck"]``).

One image runs every role, so the check finds which role this container runs from the
processes it can see (``/proc/*/cmdline``; works with or without an init process as PID 1):

- API (gunicorn ``api.app``): ``GET http://127.0.0.1:$RCLL_API_PORT/healthz`` must answer 200.
- worker (``celery ... worker``): ``celery inspect ping`` of this container's own node
  (``rcll@<hostname>``, the name ``rcll worker`` gives it) must answer through the broker.
- MCP server (``rcll mcp``): its ``--port`` (default 8766) accepts a TCP connection.
- beat, migrate: healthy while running (beat has no probe of its own; migrate is one-shot).

Exit status 0 healthy, 1 unhealthy (the reason on stderr). Standard library only, except the
worker check, which runs celery from the image's virtualenv.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

MCP_DEFAULT_PORT = 8766


def command_lines() -> list[list[str]]:
    """The argument vectors of every process visible in this container."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if raw:
            out.append([a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0")])
    return out


def role_of(argvs: list[list[str]]) -> tuple[str, list[str]]:
    """``(role, argv)`` of the first RCLL process found: api, worker, beat, mcp, migrate or
    ``("unknown", [])``."""
    for argv in argvs:
        joined = " ".join(argv)
        if "gunicorn" in joined and "api.app" in joined:
            return "api", argv
        if "celery" in joined and "worker" in argv:
            return "worker", argv
        if "celery" in joined and "beat" in argv:
            return "beat", argv
        for i, arg in enumerate(argv[:2]):  # `rcll X` or `python .../bin/rcll X`
            if Path(arg).name == "rcll" and i + 1 < len(argv) and argv[i + 1] in ("mcp", "migrate"):
                return argv[i + 1], argv
    return "unknown", []


def option(argv: list[str], name: str, default: str) -> str:
    """The value of ``--name X`` or ``--name=X`` in ``argv``."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def check(role: str, argv: list[str]) -> str | None:
    """``None`` when healthy, else the reason."""
    if role == "api":
        port = os.environ.get("RCLL_API_PORT", "8765")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                return None if r.status == 200 else f"/healthz answered {r.status}"
        except OSError as exc:
            return f"/healthz: {exc}"
    if role == "worker":
        node = option(argv, "--hostname", "rcll@%h").replace("%h", socket.gethostname())
        proc = subprocess.run(
            [sys.executable, "-m", "celery", "-A",
             "workers.celery_app", "inspect", "ping", "--destination", node, "--timeout", "10"],
            capture_output=True, text=True, timeout=18)
        return None if proc.returncode == 0 and "pong" in proc.stdout else (
            f"celery inspect ping {node}: {(proc.stdout + proc.stderr).strip()[-300:]}")
    if role == "mcp":
        port = int(option(argv, "--port", str(MCP_DEFAULT_PORT)))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return None
        except OSError as exc:
            return f"MCP port {port}: {exc}"
    if role in ("beat", "migrate"):
        return None
    return "no RCLL process found in this container"


def main() -> int:
    role, argv = role_of(command_lines())
    reason = check(role, argv)
    if reason:
        print(f"unhealthy ({role}): {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
