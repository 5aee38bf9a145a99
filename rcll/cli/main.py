"""``rcll`` — dev stack, migrations, processes, ingest, recall, jobs and evaluation."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click
from rich.table import Table

from rcll.cli.console import add_data_row, console, plain
from rcll.cli.console import out as _out
from rcll.config import get_settings


def _tiers_option(fn):
    """``--tiers``: the recall cascade tiers the questions may use (comma-separated; default
    ``cold``: the full pipeline, so a rerun is not served from what a run left in tier 1)."""
    def parse(_ctx, _param, value: str) -> tuple[str, ...]:
        from rcll.search.models import TIERS
        tiers = tuple(t.strip() for t in value.split(",") if t.strip())
        bad = [t for t in tiers if t not in TIERS]
        if bad or not tiers:
            raise click.BadParameter(f"unknown tier(s) {bad}; known: {', '.join(TIERS)}")
        return tiers
    return click.option("--tiers", default="cold", show_default=True, callback=parse,
                        help="Recall cascade tiers, comma-separated: hot,warm,cold.")(fn)


def _recipe_option(fn):
    """``--recipe`` (alias ``--channels``): a recall recipe name; default the server's."""
    from rcll.search.recipes import RECIPES

    return click.option("--recipe", "--channels", "recipe", type=click.Choice(sorted(RECIPES)),
                        default=None, help="Recall recipe (default: the server's).")(fn)


def _client():
    """A client for the configured API; a clear error if nothing answers there."""
    import httpx

    from rcll.client import RCLLClient

    url = get_settings().base_url
    try:
        httpx.get(f"{url}/healthz", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        raise click.ClickException(
            f"the RCLL API does not answer at {url} ({exc}); start it with `rcll dev up`")
    return RCLLClient(url, timeout=300, api_key=get_settings().api_key)


class _Group(click.Group):
    """Turns API errors into one-line messages instead of tracebacks."""

    def invoke(self, ctx: click.Context):
        from rcll.client import RCLLHTTPError

        try:
            return super().invoke(ctx)
        except RCLLHTTPError as exc:
            raise click.ClickException(f"API error {exc.status} {exc.describe()}")


@click.group(cls=_Group)
@click.version_option(package_name="rcll", prog_name="rcll",
                      message="%(prog)s %(version)s")
def cli() -> None:
    """RCLL memory service."""


@cli.group()
def dev() -> None:
    """The local stack: PostgreSQL+pgvector, Redis, a Celery worker, beat and the API."""


@dev.command("up")
@click.option("--no-api", is_flag=True, help="Do not start the API.")
@click.option("--no-worker", is_flag=True, help="Do not start a worker (nor beat).")
@click.option("--no-mcp", is_flag=True, help="Do not start the MCP server.")
def dev_up(no_api: bool, no_worker: bool, no_mcp: bool) -> None:
    """Start everything that is not running yet; what runs is left as it is (idempotent).
    The MCP server listens on http://127.0.0.1:RCLL_MCP_PORT/mcp (default 8766)."""
    from rcll.dev import stack

    stack.up(get_settings(), api=not no_api, worker=not no_worker, mcp=not no_mcp,
             log=console.print)


@dev.command("mcp-config")
def dev_mcp_config() -> None:
    """Print an MCP client configuration (``mcpServers`` JSON) for this dev stack: ``rcll``
    over streamable HTTP, ``rcll-stdio`` launching ``rcll mcp`` with absolute paths."""
    from rcll.dev import stack

    click.echo(json.dumps(stack.mcp_client_config(get_settings()), indent=2))


@dev.command("down")
def dev_down() -> None:
    """Stop the API, the worker, beat, Redis (if started here) and the dev database."""
    from rcll.dev import stack

    stack.down(get_settings(), log=console.print)


@cli.command()
def migrate() -> None:
    """Apply database migrations (Alembic) to RCLL_DATABASE_URL."""
    from rcll.store import migrate as m

    m.upgrade(get_settings())
    console.print("migrations applied")


def _metrics_env(name: str) -> None:
    """Before exec'ing a role of several processes: its Prometheus multiprocess folder
    (``PROMETHEUS_MULTIPROC_DIR`` if set, else ``<state_dir>/run/metrics/<name>``), emptied."""
    from rcll.telemetry.exposition import multiproc_env

    os.environ.update(multiproc_env(dict(os.environ),
                                    get_settings().run_dir.resolve() / "metrics" / name))


@cli.command()
def serve() -> None:
    """Run the API in the foreground (gunicorn)."""
    from rcll.access.deployment import DeploymentError, check
    from rcll.dev.stack import api_cmd

    try:
        for warning in check(get_settings()):
            console.print(f"[bold red]{warning}")
    except DeploymentError as exc:
        raise click.ClickException(str(exc))
    cmd = api_cmd(get_settings())
    _metrics_env(f"api-{os.getpid()}")
    os.execv(cmd[0], cmd)


@cli.command()
@click.option("--queues", default=None, help="Comma-separated queues (default: all four).")
@click.option("--concurrency", type=int, default=None)
def worker(queues: str | None, concurrency: int | None) -> None:
    """Run a Celery worker in the foreground; scale each queue with its own workers."""
    from rcll.dev.stack import worker_cmd

    cmd = worker_cmd(get_settings(), queues, concurrency)
    _metrics_env(f"worker-{os.getpid()}")
    os.execv(cmd[0], cmd)


@cli.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def mcp(args: tuple[str, ...]) -> None:
    """Run the MCP server in the foreground (stdio or streamable HTTP): `rcll mcp [--transport
    stdio|http] [--host H] [--port P] [--bank B] [--api-key K]`; `rcll mcp --help` for more.
    Beside a running dev stack (same RCLL_STATE_DIR) and without RCLL_AUTH set, it runs with
    the stack's auth mode (off for `rcll dev up`)."""
    from rcll.dev.stack import client_auth_env

    follow = client_auth_env(get_settings(), dict(os.environ))
    if follow and "--help" not in args:
        console.print(f"rcll mcp: RCLL_AUTH={follow['RCLL_AUTH']}, as the dev stack in "
                      f"{get_settings().state_dir}")
    os.environ.update(follow)
    cmd = [sys.executable, "-m", "mcp_server", *args]
    os.execv(cmd[0], cmd)


@cli.command()
def beat() -> None:
    """Run Celery beat in the foreground: schedules the job recovery sweep. Run exactly one."""
    from rcll.dev.stack import beat_cmd

    cmd = beat_cmd(get_settings())
    get_settings().run_dir.resolve().mkdir(parents=True, exist_ok=True)
    os.execv(cmd[0], cmd)


def _ingest_progress():
    """The ingest's rich progress: a bar with done/total, units/s and the time left."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                    TextColumn("{task.fields[eta]}"), console=console)


def _wait_units(client, bank: str, bar, ops: list[str], file_ops: list[str], plan,
                started: float) -> list[dict]:
    """Poll the operations to their end, showing progress in units
    (:func:`rcll.cli.ingest_progress.measure`); the final operation dicts."""
    from rcll.cli.ingest_progress import measure

    sizes: dict[str, tuple[str, int]] = {}  # what the estimate of unchunked jobs scales
    item_bytes = sum(len(str(i.get("content", "")).encode()) for i in plan.items)
    for op in ops:  # item operations: an even share of the items' bytes
        sizes[op] = ("items", item_bytes // max(len(ops), 1))
    for op, f in zip(file_ops, plan.files, strict=False):  # one per file in order (approximate after a skip)
        try:
            sizes[op] = ("files", f.stat().st_size)
        except OSError:
            sizes[op] = ("files", 0)
    all_ops = ops + file_ops
    task = bar.add_task("units", total=None, rate="", eta="")

    def on_update(latest: dict) -> None:
        p = measure(all_ops, latest, sizes, time.monotonic() - started)
        bar.update(task, completed=p.done, total=p.total,
                   description=f"units ({p.jobs_done}/{p.jobs} jobs"
                               f"{'' if p.exact else ', total estimated'})",
                   rate=f"{p.units_per_s:.1f} units/s" if p.units_per_s else "",
                   eta=f"ETA {p.eta_s:.0f} s" if p.eta_s is not None else "")

    return client.wait(bank, all_ops, on_update=on_update)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--bank", required=True, help="Bank to retain into (created on first use).")
@click.option("--batch-size", default=100, show_default=True)
@click.option("--text-suffix", "text_suffix", multiple=True, metavar="SUFFIX",
              help="Also read files ending in SUFFIX as plain text, one item each "
                   "(repeatable: --text-suffix .rst --text-suffix .py; any case, the dot "
                   "optional). Binary and non-UTF-8 files are still skipped.")
@click.option("--extensionless-as-text", is_flag=True,
              help="Also read files whose name has no suffix (README, copyright) as plain "
                   "text. Binary and non-UTF-8 files are still skipped.")
def ingest(paths: tuple[str, ...], bank: str, batch_size: int, text_suffix: tuple[str, ...],
           extensionless_as_text: bool) -> None:
    """Retain text/markdown files, document files (PDF, DOCX, PPTX, XLSX, HTML, EPUB),
    folders and JSONL item files; show progress until done. ``--text-suffix`` and
    ``--extensionless-as-text`` take other files (``.rst``, source, ``README``) as text.

    Document files are uploaded and converted on the workers (one operation each; a file that
    cannot be converted fails its operation with the reason). Files that cannot be taken
    (another type, binary, not UTF-8, a bad JSONL line, refused by the server) are skipped
    and listed at the end; the rest are ingested. Hidden files and folders inside a folder
    (``.git``) are not read. Exit status 1 if anything was skipped or failed.
    """
    from rcll.cli.ingest import (
        JOB_BYTES,
        batches,
        largest_first,
        read_paths,
        send_order,
        submit,
        submit_files,
        text_suffixes,
    )
    from rcll.cli.ingest_progress import summary

    try:
        extra = text_suffixes(text_suffix)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--text-suffix") from None
    started = time.monotonic()
    plan = read_paths(paths, extra, extensionless_as_text)
    if not plan.items and not plan.skipped and not plan.files:
        raise click.ClickException("no .txt, .md, .jsonl or document input found")
    if not plan.items and not plan.files:  # nothing to send: no server needed to say so
        _print_skipped(plan.skipped)
        sys.exit(1)
    plan.files = largest_first(plan.files)
    client = _client()
    with _ingest_progress() as bar:
        sent = bar.add_task("submitting", total=len(plan.items) + len(plan.files), rate="",
                            eta="")
        # files and item batches largest first, together: the longest jobs start first and
        # the job that ends the ingest is a small one (rcll.cli.ingest.send_order)
        ops, refused, file_ops, file_refused = [], [], [], []

        def advance(n: int) -> None:
            bar.advance(sent, n)

        for kind, what in send_order(plan.files, plan.items,
                                     batches(plan.items, batch_size, JOB_BYTES)):
            if kind == "files":
                got, no = submit_files(client, bank, what, on_sent=advance)
                file_ops.extend(got)
                file_refused.extend(no)
            else:
                got, no = submit(client, bank, plan, batch_size, on_sent=advance,
                                 ranges=[what])
                ops.extend(got)
                refused.extend(no)
        final = _wait_units(client, bank, bar, ops, file_ops, plan, started)
    bad = [o for o in final if o["state"] != "succeeded"]
    skipped = plan.skipped + refused + file_refused
    taken = len(plan.items) - len(refused)
    console.print(plain(summary(final, len(ops), taken, len(plan.files),
                                time.monotonic() - started)))
    for o in bad:
        console.print(f"[red]operation {o['id']} {o['state']}: {plain(o.get('error'))}")
    _print_skipped(skipped)
    if bad or skipped:
        sys.exit(1)


def _print_skipped(skipped: list) -> None:
    """``rcll ingest``'s list of what it did not take (``Skipped``: source and reason)."""
    if skipped:
        console.print(f"[yellow]skipped {len(skipped)}:")
        for s in skipped:
            console.print(f"[yellow]  {plain(s.source)}: {plain(s.reason)}")


@cli.command()
@click.argument("query")
@click.option("--bank", required=True)
@click.option("--limit", default=10, show_default=True)
@click.option("--max-tokens", default=4096, show_default=True)
@_recipe_option
@click.option("--tiers", default=None, help="Cascade tiers, comma-separated (hot,warm,cold); "
              "default all.")
@click.option("--context-left", type=int, default=None,
              help="Tokens of context the caller has left (the token-budget policy).")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON response.")
def recall(query: str, bank: str, limit: int, max_tokens: int, recipe: str | None,
           tiers: str | None, context_left: int | None, as_json: bool) -> None:
    """Recall the memories of BANK most relevant to QUERY."""
    res = _client().recall(bank, query, limit=limit, max_tokens=max_tokens, recipe=recipe,
                           trace=True, context_tokens_left=context_left,
                           tiers=[t.strip() for t in tiers.split(",")] if tiers is not None
                           else None)
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    from rcll.cli.results import recall_table

    _out().print(recall_table(query, res))


@cli.command()
@click.option("--bank", default=None)
@click.option("--state", default=None)
@click.option("--limit", default=20, show_default=True)
def jobs(bank: str | None, state: str | None, limit: int) -> None:
    """List recent retain jobs with state, stage and counts."""
    table = Table()
    for col in ("id", "bank", "state", "stage", "counts", "error"):
        table.add_column(col)
    for j in _client().jobs(bank, state, limit):
        c = j.get("counts") or {}
        add_data_row(table, j["id"][:8], j["bank_id"], j["state"], str(j.get("stage")),
                      f"{c.get('items_done', 0)}/{c.get('items', 0)} items, "
                      f"{c.get('units_created', 0)} new, {c.get('units_embedded', 0)} embedded",
                      (j.get("error") or "")[:60])
    _out().print(table)


@cli.group()
def embeddings() -> None:
    """The derived vector index."""


@embeddings.command("rebuild")
@click.option("--bank", default=None, help="Only this bank (default: every bank).")
def embeddings_rebuild(bank: str | None) -> None:
    """Embed every unit lacking a vector for the current embedder stamp (model, and
    #int8 for int8 on onnx) and input stamp."""
    from rich.progress import Progress

    from rcll.bootstrap import bootstrap
    from rcll.models.embedder import input_stamp
    from rcll.retain.pipeline import embed_missing
    from rcll.store.embeddings import count_missing

    svc = bootstrap()
    ctx = svc.retain_context()
    emb = svc.embedder.get()
    if emb is None:
        raise click.ClickException(f"embedder unavailable: {svc.embedder.error}")
    with svc.pool.connection() as conn:
        todo = count_missing(conn, model=emb.stamp, stamp=input_stamp(emb.stamp),
                             bank_id=bank)
    with Progress(console=console) as progress:
        task = progress.add_task("embedding", total=todo)
        n = embed_missing(ctx, bank_id=bank, on_batch=lambda k: progress.update(task, completed=k))
    console.print(f"{n} vectors written ({emb.stamp})")
    svc.close()


@cli.group("eval")
def eval_() -> None:
    """Retrieval evaluation through the running service (HTTP API + workers)."""


def _write(result: dict, out: str | None) -> None:
    from rcll.eval.report import markdown_table

    if out:
        Path(out).write_text(json.dumps(result, indent=2))
        console.print(f"wrote {out}")
    click.echo(markdown_table(result))


@eval_.command("locomo")
@click.option("--data", "data_dir", required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", default=None, help="Write the full result JSON here.")
@_recipe_option
@_tiers_option
@click.option("--reuse", is_flag=True, help="Query banks ingested by an earlier run.")
def eval_locomo(data_dir: str, out: str | None, recipe: str | None, tiers: tuple[str, ...],
                reuse: bool) -> None:
    """LoCoMo: a bank per conversation, a unit per turn, 1,536 retrieval questions."""
    from rcll.eval.runner import run_locomo

    _write(run_locomo(_client(), data_dir, recipe=recipe, tiers=tiers, reuse=reuse), out)


@eval_.command("longmemeval")
@click.option("--data", "data_file", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--out", default=None)
@_recipe_option
@_tiers_option
@click.option("--reuse", is_flag=True, help="Query banks ingested by an earlier run.")
def eval_longmemeval(data_file: str, out: str | None, recipe: str | None,
                     tiers: tuple[str, ...], reuse: bool) -> None:
    """LongMemEval_S: a bank per question, a unit per turn (asked at its question date)."""
    from rcll.eval.runner import run_longmemeval

    _write(run_longmemeval(_client(), data_file, recipe=recipe, tiers=tiers, reuse=reuse), out)


from rcll.cli import access as _access_cli  # noqa: E402  (members, keys, grants, audit)

_access_cli.register(cli)
from rcll.cli.units import unit as _unit_group  # noqa: E402  (the group imports _client)

cli.add_command(_unit_group)


def _register_groups() -> None:
    from rcll.cli.bank import bank
    from rcll.cli.tunnels import bridge, tunnels

    cli.add_command(tunnels)
    cli.add_command(bridge)
    cli.add_command(bank)


_register_groups()

if __name__ == "__main__":
    cli()
