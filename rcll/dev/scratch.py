"""A scratch database for benchmarks: its own embedded PostgreSQL and a fresh migrated DB."""

from __future__ import annotations

from pathlib import Path

from rcll.config import Settings
from rcll.dev import postgres
from rcll.store import migrate


def scratch_database(state_dir: Path | str, port: int, name: str) -> Settings:
    """Start (or reuse) the embedded PostgreSQL of ``state_dir`` on ``port``, drop and
    create database ``name``, apply every migration; returns the settings pointing at it.
    Raises what :func:`rcll.dev.postgres.start` raises when the server cannot start."""
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o755)  # the no-login PostgreSQL user must reach its data folder under root
    s = Settings(state_dir=state, pg_port=port,
                 database_url=f"postgresql://rcll@127.0.0.1:{port}/{name}")
    postgres.start(s, log=lambda *_: None)
    postgres.create_database(s, name, drop=True)
    migrate.upgrade(s)
    return s
