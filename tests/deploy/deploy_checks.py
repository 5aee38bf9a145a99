"""Shared checks of the deployment files (deploy/, compose/) against the code: the settings
RCLL reads, the queues the workers consume and the commands the ``rcll`` CLI accepts.
Nothing here starts a service: these files are validated, not run."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import click
import pytest

from rcll.config import Settings

ROOT = Path(__file__).resolve().parents[2]
RCLL_VAR = re.compile(r"(?<![A-Za-z0-9_])RCLL_[A-Z0-9_]+")


def load_module(relpath: str):
    """Import a script of the repository (``deploy/envfile.py``) by its path."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_env_names() -> set[str]:
    """Every ``RCLL_*`` variable :class:`rcll.config.Settings` reads."""
    prefix = Settings.model_config["env_prefix"]
    return {f"{prefix}{name}".upper() for name in Settings.model_fields}


def rcll_command_problem(argv: list[str]) -> str | None:
    """Parse ``rcll <argv>`` with the real CLI (click) without running it: ``None`` when the
    subcommand exists and accepts these arguments, else the reason."""
    from rcll.cli.main import cli

    if not argv:
        return "empty command"
    cmd = cli.commands.get(argv[0])
    if cmd is None:
        return f"`rcll {argv[0]}` is not a command (have: {', '.join(sorted(cli.commands))})"
    try:
        cmd.make_context(argv[0], list(argv[1:]))
    except click.ClickException as exc:
        return f"`rcll {' '.join(argv)}`: {exc.format_message()}"
    return None


def queues_of(argv: list[str]) -> list[str]:
    """The queues of a ``worker --queues a,b`` command line."""
    for i, arg in enumerate(argv):
        if arg == "--queues":
            return [q.strip() for q in argv[i + 1].split(",") if q.strip()]
        if arg.startswith("--queues="):
            return [q.strip() for q in arg.split("=", 1)[1].split(",") if q.strip()]
    return []


def skip_if_no_mcp_command() -> None:
    """``rcll mcp`` comes with issue 9's MCP server; until it is merged, its command lines are
    checked for shape only."""
    from rcll.cli.main import cli

    if "mcp" not in cli.commands:
        pytest.skip("`rcll mcp` is not on this branch yet (issue 9, MCP server)")

