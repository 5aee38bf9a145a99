"""MkDocs hook: the reference pages, generated from the code at build time (never copied).

- ``reference/http.md`` from the app's OpenAPI document (:func:`api.openapi.build` over
  :func:`api.app.create_app`: every route, its role, parameters, body, answers and error
  codes, and the components' fields);
- ``reference/cli.md`` from the ``click`` commands of ``rcll.cli.main`` (usage, help,
  options, arguments of every command and group);
- ``reference/configuration.md`` from ``rcll.config.Settings`` (every ``RCLL_*`` variable
  with its type, default and description, in the sections of ``rcll/config.py``) — the same
  source ``deploy/envfile.py`` renders ``compose/.env.example`` from.

Registered in ``mkdocs.yml`` (``hooks:``); runs in the build's own process, so the build needs
the project importable (``pip install -e ".[dev]"``). Building the app starts nothing: no
database, Redis or model is touched.
"""

from __future__ import annotations

import html
import json
import re
import sys
import tempfile
from pathlib import Path

import click
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]


def use_checkout() -> None:
    """Import ``api``/``rcll`` from this checkout, before any installed copy (an editable
    install of another worktree). Called when the hook runs: MkDocs takes its own entry
    off ``sys.path`` after loading the hook."""
    if sys.path[:1] != [str(ROOT)]:
        sys.path.insert(0, str(ROOT))
    for name in [m for m in sys.modules if m.split(".")[0] in ("api", "rcll", "workers")]:
        if not str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(ROOT)):
            del sys.modules[name]

GENERATED_NOTE = ("!!! note \"Generated\"\n    This page is generated at build time by "
                  "`docs/hooks/reference.py` from {source}; edit the code, not this page.\n")
_CODE = re.compile(r"(`+)(.+?)\1", re.S)


def md_text(text: str) -> str:
    """Prose from the code as Markdown: reST literals and roles as code spans
    (:func:`api.openapi.plain_text`), ``<`` ``>`` ``&`` escaped outside code spans (a
    ``<bank_id>`` is text, not a tag)."""
    from api.openapi import plain_text

    text = plain_text(text)
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(html.escape(text[last:m.start()], quote=False))
        out.append(m.group(0))
        last = m.end()
    out.append(html.escape(text[last:], quote=False))
    return "".join(out)


def cell(text: str) -> str:
    """Text for one table cell: one line, pipes escaped."""
    return md_text(" ".join(str(text).split())).replace("|", "\\|")


# --- HTTP ----------------------------------------------------------------------------------

def _type(schema: dict) -> str:
    """A short type name for a JSON schema: ``string``, ``integer[]``, ``RecallResult``,
    ``string | null``."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(dict.fromkeys(_type(s) for s in schema[key]))
    if "allOf" in schema:
        return " & ".join(_type(s) for s in schema["allOf"])
    t = schema.get("type")
    if t == "array":
        return _type(schema.get("items", {})) + "[]"
    if "enum" in schema:
        return " \\| ".join(json.dumps(v) for v in schema["enum"][:8]) + (
            " …" if len(schema["enum"]) > 8 else "")
    if "const" in schema:
        return json.dumps(schema["const"])
    if isinstance(t, list):
        return " | ".join(t)
    return t or "any"


def _anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _type_md(schema: dict) -> str:
    """:func:`_type` with component names linked to their section."""
    text = _type(schema).replace("|", "\\|")
    return re.sub(r"\b([A-Z][A-Za-z0-9_]+)\b",
                  lambda m: f"[{m.group(1)}](#{_anchor(m.group(1))})"
                  if m.group(1) in _COMPONENTS else m.group(1), text)


_COMPONENTS: set[str] = set()


def openapi_document() -> dict:
    """The app's OpenAPI document, built without starting anything (a temporary state
    folder, a throw-away key secret: nothing is written in the checkout)."""
    import logging

    from api.app import create_app
    from api.openapi import build
    from rcll.config import Settings

    # The app's pools try the (absent) database in the background; their retries are noise
    # here: the document needs no connection.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="rcll-docs-") as state:
        settings = Settings(state_dir=Path(state), key_secret="docs-build-" + "x" * 32)
        app = create_app(settings)
        try:
            return build(app)
        finally:
            app.extensions["rcll"].close()


def http_page(doc: dict) -> str:
    _COMPONENTS.clear()
    _COMPONENTS.update(doc["components"]["schemas"])
    by_tag: dict[str, list[tuple[str, str, dict]]] = {}
    n_ops = 0
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            by_tag.setdefault(op["tags"][0], []).append((path, method, op))
            n_ops += 1
    out = ["# HTTP API", "", GENERATED_NOTE.format(
        source="the OpenAPI document of the app (`api/openapi.py`, served at "
               "`GET /openapi.json`; Swagger UI at `GET /docs`)"), "",
        f"{n_ops} operations on {len(doc['paths'])} paths, "
        f"{len(doc['components']['schemas'])} schemas. OpenAPI {doc['openapi']}, "
        f"API version {doc['info']['version']}. Errors, limits and the role model: "
        "[HTTP conventions](http-conventions.md).", ""]
    for tag in sorted(by_tag):
        out += [f"## {tag}", ""]
        for path, method, op in sorted(by_tag[tag]):
            out += [f"### `{method.upper()} {path}`", "", f"**{cell(op['summary'])}** — role "
                    f"`{op['x-rcll-role']}`", ""]
            if op.get("description"):
                out += [md_text(op["description"]), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | required | type | description |",
                        "|---|---|---|---|---|"]
                out += [f"| `{p['name']}` | {p['in']} | {'yes' if p['required'] else 'no'} | "
                        f"{_type_md(p['schema'])} | {cell(p.get('description', ''))} |"
                        for p in params]
                out.append("")
            body = op.get("requestBody")
            if body:
                for ctype, c in body["content"].items():
                    out += [f"Request body ({ctype}{'' if body['required'] else ', optional'}):"
                            f" {_type_md(c['schema'])}", ""]
            out += ["| status | answer |", "|---|---|"]
            for status, r in op["responses"].items():
                if "x-error-codes" in r:
                    what = ", ".join(f"`{c}`" for c in r["x-error-codes"])
                else:
                    content = next(iter(r.get("content", {}).values()), {})
                    what = _type_md(content.get("schema", {})) if content else ""
                out.append(f"| {status} | {what} |")
            out.append("")
    out += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        out += [f"### {name} {{ #{_anchor(name)} }}", ""]
        if schema.get("description"):
            out += [md_text(schema["description"]), ""]
        props = schema.get("properties")
        if props:
            req = set(schema.get("required", ()))
            out += ["| field | type | required | description |", "|---|---|---|---|"]
            out += [f"| `{k}` | {_type_md(v)} | {'yes' if k in req else 'no'} | "
                    f"{cell(v.get('description', ''))} |" for k, v in props.items()]
            out.append("")
        elif "enum" in schema or "type" in schema:
            out += [f"Type: {_type_md(schema)}", ""]
    return "\n".join(out) + "\n"


# --- CLI -----------------------------------------------------------------------------------

def _commands(cmd: click.Command, path: list[str]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from _commands(cmd.commands[name], [*path, name])


def cli_page() -> str:
    from rcll.cli.main import cli

    out = ["# CLI", "", GENERATED_NOTE.format(source="the `click` commands of `rcll/cli/`"), ""]
    summary = ["| command | what |", "|---|---|"]
    body: list[str] = []
    for path, cmd in _commands(cli, ["rcll"]):
        name = " ".join(path)
        ctx = click.Context(cmd, info_name=name)
        usage = cmd.get_usage(ctx).removeprefix("Usage: ")
        help_text = inspect_help(cmd.help or "")
        summary.append(f"| [`{name}`](#{re.sub(r'[^a-z0-9]+', '-', name)}) | "
                       f"{cell(cmd.get_short_help_str(200))} |")
        body += [f"## `{name}` {{ #{re.sub(r'[^a-z0-9]+', '-', name)} }}", "",
                 "```text", usage, "```", ""]
        if help_text:
            body += [md_text(help_text), ""]
        rows = []
        for p in cmd.params:
            if isinstance(p, click.Argument):
                rows.append(f"| `{p.human_readable_name}` | argument{' (required)' if p.required else ''}"
                            f"{', repeatable' if p.nargs == -1 else ''} | |")
            elif isinstance(p, click.Option) and not p.hidden:
                names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
                unset = p.default is None or type(p.default).__name__ == "Sentinel" or \
                    callable(p.default) or (p.is_flag and not p.default) or p.default == ()
                default = "" if unset else f" (default: `{p.default}`)"
                env = f" Environment: `{p.envvar}`." if isinstance(p.envvar, str) else ""
                rows.append(f"| {names} | {cell(p.help or '')}{default}{env} | "
                            f"{cell(p.type.name if not p.is_flag else 'flag')} |")
        if rows:
            body += ["| parameter | what | type |", "|---|---|---|", *rows, ""]
        if isinstance(cmd, click.Group):
            subs = ", ".join(f"`{name} {s}`" for s in sorted(cmd.commands))
            body += [f"Subcommands: {subs}.", ""]
    return "\n".join([*out, *summary, "", *body]) + "\n"


def inspect_help(text: str) -> str:
    """Click help as Markdown paragraphs: dedented, ``\\b`` (no-rewrap) markers dropped."""
    import inspect

    return inspect.cleandoc(text).replace("\b\n", "").replace("\b", "")


# --- configuration -------------------------------------------------------------------------

_SECTION = re.compile(r"^    # --- (.+?) -*$")
_FIELD = re.compile(r"^    ([a-z][a-z0-9_]*)\s*:")


def config_page() -> str:
    from rcll.config import Settings

    sys.path.insert(0, str(ROOT / "deploy"))
    from envfile import env_name, env_value  # the same names and values as .env.example

    sections: dict[str, list[str]] = {}
    current = "general"
    for line in (ROOT / "rcll" / "config.py").read_text().splitlines():
        if m := _SECTION.match(line):
            current = re.sub(r"\s*\(.*$", "", m.group(1))
        elif (m := _FIELD.match(line)) and m.group(1) in Settings.model_fields:
            sections.setdefault(current, []).append(m.group(1))
    listed = {f for fs in sections.values() for f in fs}
    rest = [f for f in Settings.model_fields if f not in listed]
    if rest:
        sections.setdefault("other", []).extend(rest)
    n = len(Settings.model_fields)
    out = ["# Configuration", "", GENERATED_NOTE.format(
        source="`rcll.config.Settings` (`rcll/config.py`, the one reader of the environment)"),
        "", f"{n} settings, each an environment variable `RCLL_<NAME>`. "
        "`compose/.env.example` lists the same settings (generated by "
        "`deploy/envfile.py`); a value set there applies to every container of the compose "
        "stack.", ""]
    for title, fields in sections.items():
        out += [f"## {title[:1].upper() + title[1:]}", "",
                "| variable | type | default | description |", "|---|---|---|---|"]
        for f in fields:
            info = Settings.model_fields[f]
            tp = getattr(info.annotation, "__name__", None) or str(info.annotation)
            tp = tp.replace("typing.", "").replace("pathlib.", "")
            default = env_value(info.default)
            out.append(f"| `{env_name(f)}` | {cell(tp)} | "
                       f"{'`' + default + '`' if default else '(unset)'} | "
                       f"{cell(info.description or '')} |")
        out.append("")
    return "\n".join(out) + "\n"


# --- the hook ------------------------------------------------------------------------------

PAGES = {"reference/http.md": lambda: http_page(openapi_document()),
         "reference/cli.md": cli_page,
         "reference/configuration.md": config_page}


def on_files(files, config):
    use_checkout()
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    return files
