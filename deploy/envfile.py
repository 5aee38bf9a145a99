"""Generate ``compose/.env.example`` from the settings RCLL reads (``rcll.config.Settings``).

    PYTHONPATH=$PWD .venv/bin/python deploy/envfile.py > compose/.env.example

Every setting appears with its description (``# ...``) and its default, commented out
(``#RCLL_NAME=default``: the default applies; remove the ``#`` to change it).
Settings that ``compose/compose.yaml`` wires itself (database, Redis, ports: the
``environment`` of its ``x-rcll`` block) are listed as such; those it requires
(``${NAME:?...}``) come first, uncommented, with a placeholder to replace.
``tests/deploy/test_compose.py`` fails when the committed file differs from this output.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose" / "compose.yaml"
REQUIRED_RE = re.compile(r"\$\{([A-Z0-9_]+):\?")


def env_name(field: str) -> str:
    """``api_port`` -> ``RCLL_API_PORT`` (the Settings prefix)."""
    return f"RCLL_{field.upper()}"


def env_value(value: object) -> str:
    """A default as the environment spells it: lists as JSON, booleans true/false, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def _describe(info) -> list[str]:
    """A field's description as comment lines (none when it has no description)."""
    return [f"# {line}" for line in textwrap.wrap(" ".join((info.description or "").split()),
                                                   width=92,
                                                   break_on_hyphens=False)]


def compose_wiring(compose_text: str) -> tuple[dict[str, str], list[str]]:
    """``(wired, required)``: the ``x-rcll`` environment compose sets for every RCLL
    container, and the variables compose refuses to start without, in file order."""
    doc = yaml.safe_load(compose_text)
    wired = {k: re.sub(r"\$\{([A-Z0-9_]+)[^}]*\}", r"${\1}", str(v))
             for k, v in (doc["x-rcll"]["environment"] or {}).items()}
    required = list(dict.fromkeys(REQUIRED_RE.findall(compose_text)))
    return wired, required


def render(settings_cls=None, compose_text: str | None = None) -> str:
    """The text of ``compose/.env.example``."""
    if settings_cls is None:
        from rcll.config import Settings as settings_cls
    wired, required = compose_wiring(compose_text if compose_text is not None
                                     else COMPOSE.read_text())
    out = [
        "# RCLL settings for compose/compose.yaml: copy to compose/.env, then edit.",
        "# Generated from rcll/config.py by `python deploy/envfile.py > compose/.env.example`",
        "# (tests/deploy/test_compose.py fails when this file drifts from the code).",
        "# compose passes every variable set here to every RCLL container (env_file), so",
        "# provider keys for RCLL_LLM_PROVIDER=litellm (OPENAI_API_KEY, ...) go here too.",
        "",
        "# --- required: compose.yaml refuses to start without these ---",
    ]
    fields = {env_name(f): info for f, info in settings_cls.model_fields.items()}
    for name in required:
        if name in fields:
            out += _describe(fields[name])
        out += [f"{name}=change-me", ""]
    settings_lines: list[str] = []
    wired_lines: list[str] = []
    for name, info in fields.items():
        if name in required:
            continue
        lines = _describe(info)
        if name in wired:
            lines.append(f"#{name}={env_value(info.default)}  (compose.yaml sets "
                         f"{wired[name]})")
            wired_lines += [*lines, ""]
        else:
            lines.append(f"#{name}={env_value(info.default)}")
            settings_lines += [*lines, ""]
    out.append("# --- every other setting, at its default (uncomment to change) ---")
    out += settings_lines
    out.append("# --- set by compose.yaml for every RCLL container (a value here is overridden) ---")
    out += wired_lines
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.stdout.write(render())
