"""``rcll bank export|import``: move a bank between deployments (or into another bank)
through the API's export and import routes (:mod:`rcll.transfer.service` holds the rules)."""

from __future__ import annotations

import sys
import time

import click


def _client():
    from rcll.cli.main import _client as make

    return make()


@click.group("bank")
def bank() -> None:
    """Bank export and import (RCLL's rcll-bank JSON Lines format)."""


@bank.command("export")
@click.argument("bank_id")
@click.option("--out", "-o", "out", default="-", show_default=True,
              help="File to write ('-': standard output). A name ending .gz is gzip.")
@click.option("--vectors/--no-vectors", default=True, show_default=True,
              help="Carry the vectors (without: the import re-embeds).")
@click.option("--grants", is_flag=True, help="Carry the bank's grants (bank admins only).")
def export_cmd(bank_id: str, out: str, vectors: bool, grants: bool) -> None:
    """Export BANK_ID, streamed to --out as it is read."""
    zipped = out.endswith(".gz")
    started = time.perf_counter()
    if out == "-":
        n = _client().export_bank(bank_id, sys.stdout.buffer, vectors=vectors, grants=grants)
    else:
        with open(out, "wb") as fh:
            n = _client().export_bank(bank_id, fh, vectors=vectors, grants=grants, gzip=zipped)
    click.echo(f"exported {bank_id}: {n:,} bytes in {time.perf_counter() - started:.1f} s"
               + ("" if out == "-" else f" to {out}"), err=True)


@bank.command("import")
@click.argument("bank_id")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--ids", type=click.Choice(["auto", "keep", "new"]), default="auto",
              show_default=True, help="keep: the export's ids; new: ids derived for this "
              "bank; auto: new when the source bank exists here.")
@click.option("--no-grants", is_flag=True, help="Leave the export's grants out.")
@click.option("--no-wait", is_flag=True, help="Print the operation id and return.")
def import_cmd(bank_id: str, path: str, ids: str, no_grants: bool, no_wait: bool) -> None:
    """Import the export at PATH ('-': standard input; plain or gzip) into BANK_ID, which
    must be new or empty; waits for the import job, showing its progress."""
    client = _client()
    if path == "-":
        answer = client.import_bank(bank_id, sys.stdin.buffer, ids=ids, grants=not no_grants)
    else:
        with open(path, "rb") as fh:
            answer = client.import_bank(bank_id, fh, ids=ids, grants=not no_grants)
    op_id = answer["operation_id"]
    if no_wait:
        click.echo(op_id)
        return

    def show(latest: dict) -> None:
        op = latest.get(op_id) or {}
        c = op.get("counts") or {}
        click.echo(f"\r{op.get('state')} {op.get('stage')}: line {c.get('lines', 0):,} of "
                   f"{c.get('lines_total', 0):,}", nl=False, err=True)

    [op] = client.wait(bank_id, [op_id], poll_s=1.0, timeout_s=24 * 3600, on_update=show)
    click.echo("", err=True)
    if op.get("state") != "succeeded":
        raise click.ClickException(f"import {op_id} {op.get('state')}: {op.get('error')}")
    c = op.get("counts") or {}
    click.echo(f"imported into {bank_id}: {c.get('counts')}; vectors {c.get('vectors_imported')}"
               f", embedded {c.get('units_embedded')} (operation {op_id})")
