"""Background processes with PID and log files in one folder (``<state_dir>/run``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def pid_file(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.pid"


def running_pid(run_dir: Path, name: str) -> int | None:
    """The PID recorded for ``name`` if that process is alive, else ``None``."""
    path = pid_file(run_dir, name)
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    except PermissionError:
        return pid
    try:  # a zombie child of ours counts as dead
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        if state == "Z":
            return None
    except (FileNotFoundError, IndexError):
        return None
    return pid


def start(run_dir: Path, name: str, cmd: list[str], env: dict | None = None,
          cwd: Path | None = None) -> int:
    """Start ``cmd`` in its own session, output to ``<name>.log``; idempotent per name."""
    run_dir.mkdir(parents=True, exist_ok=True)
    pid = running_pid(run_dir, name)
    if pid:
        return pid
    log = open(run_dir / f"{name}.log", "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, start_new_session=True)
    pid_file(run_dir, name).write_text(str(proc.pid))
    return proc.pid


def stop(run_dir: Path, name: str, timeout_s: float = 20.0) -> bool:
    """SIGTERM the process group, SIGKILL after ``timeout_s``; True if something was stopped."""
    pid = running_pid(run_dir, name)
    pid_file(run_dir, name).unlink(missing_ok=True)
    if not pid:
        return False
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    _signal_group(pid, signal.SIGKILL)
    return True


def kill(run_dir: Path, name: str) -> None:
    """SIGKILL the process group at once (tests of crash recovery)."""
    pid = running_pid(run_dir, name)
    pid_file(run_dir, name).unlink(missing_ok=True)
    if pid:
        _signal_group(pid, signal.SIGKILL)
        for _ in range(100):
            if not _alive(pid):
                return
            time.sleep(0.05)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return False
