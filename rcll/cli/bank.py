"""``rcll bank export|import|clone``: move a bank between deployments, or copy it, through the
API's export and import routes (:mod:`rcll.transfer.service` holds the rules;
docs/guides/export-import.md)."""

from __future__ import annotations

import os
import sys
import time

import click


def _client():
    from rcll.cli.main import _client as make

    return make()


def _bytes_progress(description: str):
    """A rich progress bar in bytes on standard error."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    from rcll.cli.console import console

    return Progress(TextColumn(description), BarColumn(), DownloadColumn(),
                    TransferSpeedColumn(), TimeElapsedColumn(), console=console,
                    transient=False)


@click.group("bank")
def bank() -> None:
    """Bank export, import and clone (the rcll-bank JSON Lines format)."""


_DIRECT = click.option(
    "--direct", is_flag=True,
    help="Work on the database (RCLL_DATABASE_URL) in this process as the internal "
         "principal, not through the API: every member's private units included (a full "
         "backup or restore).")


def _direct():
    """``(services, transfer service, unrestricted principal)`` on the configured database."""
    from rcll.access.principal import Principal
    from rcll.bootstrap import bootstrap

    svc = bootstrap()
    return svc, svc.transfer_service(lambda *_: None), Principal.unrestricted(
        tuple(svc.settings.purposes))


@bank.command("export")
@click.argument("bank_id")
@click.option("-o", "--out", "out", default="-", show_default=True,
              help="File to write ('-': standard output). A name ending .gz gets the gzip "
                   "stream.")
@click.option("--vectors/--no-vectors", default=True, show_default=True,
              help="Carry the vectors (without them the import re-embeds).")
@click.option("--grants", is_flag=True, help="Carry the bank's grants.")
@_DIRECT
def export_cmd(bank_id: str, out: str, vectors: bool, grants: bool, direct: bool) -> None:
    """Export BANK_ID as it is read, to --out (admin on the bank; what the key may see, or
    everything with --direct)."""
    started = time.perf_counter()
    zipped = out.endswith(".gz")

    def write(fh, on_bytes=None) -> int:
        if not direct:
            return _client().export_bank(bank_id, fh, vectors=vectors, grants=grants,
                                         gzip=zipped, on_bytes=on_bytes)
        from rcll.transfer.export import Selection

        svc, transfer, who = _direct()
        try:
            total = 0
            for piece in transfer.export(who, bank_id, Selection(vectors=vectors, grants=grants),
                                         gzip=zipped):
                fh.write(piece)
                total += len(piece)
                if on_bytes is not None:
                    on_bytes(total)
            return total
        finally:
            svc.close()

    if out == "-":
        n = write(sys.stdout.buffer)
    else:
        tmp = f"{out}.part"
        try:
            with open(tmp, "wb") as fh, _bytes_progress(f"export {bank_id}") as bar:
                task = bar.add_task("export", total=None)
                n = write(fh, lambda k: bar.update(task, completed=k))
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    click.echo(f"exported {bank_id}: {n:,} bytes in {time.perf_counter() - started:.1f} s"
               + ("" if out == "-" else f" to {out}"), err=True)


@bank.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--bank", "bank_id", default=None,
              help="The bank to import into (new or empty); default: the export's own id.")
@click.option("--ids", type=click.Choice(["auto", "keep", "new"]), default="auto",
              show_default=True, help="keep: the export's ids; new: ids moved for this bank; "
              "auto: new when the export's source bank exists here.")
@click.option("--no-grants", is_flag=True, help="Leave the export's grants out.")
@click.option("--no-wait", is_flag=True,
              help="Do not wait for the units that came without a vector to be embedded.")
@_DIRECT
def import_cmd(path: str, bank_id: str | None, ids: str, no_grants: bool, no_wait: bool,
               direct: bool) -> None:
    """Import the export at PATH ('-': standard input; plain or gzip) into --bank, in one
    transaction, showing the upload and then the embedding of units without a vector (on
    the workers; in this process with --direct)."""
    started = time.perf_counter()
    if bank_id is None:  # the export's own id, from its header line
        if path == "-":
            raise click.UsageError("--bank is required when the export comes from standard "
                                   "input")
        bank_id = _header_bank(path)
    if direct:
        _import_direct(path, bank_id, ids, not no_grants, no_wait)
        return
    client = _client()
    if path == "-":
        answer = client.import_bank(bank_id, sys.stdin.buffer, ids=ids, grants=not no_grants)
    else:
        size = os.path.getsize(path)
        with open(path, "rb") as fh, _bytes_progress(f"import {bank_id}") as bar:
            task = bar.add_task("import", total=size)
            answer = client.import_bank(bank_id, fh, ids=ids, grants=not no_grants, size=size,
                                        on_bytes=lambda k: bar.update(task, completed=k))
    _summary(bank_id, answer, time.perf_counter() - started)
    if answer["state"] != "queued" or no_wait:
        return
    _wait_embedding(client, bank_id, answer["operation_id"], answer["vectors_reused"],
                    answer["units_to_embed"])


class _Counting:
    """A binary file whose reads report the bytes read so far."""

    def __init__(self, fh, on_bytes) -> None:
        self._fh, self._on, self.total = fh, on_bytes, 0

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self.total += len(data)
        self._on(self.total)
        return data


def _import_direct(path: str, bank_id: str, ids: str, grants: bool, no_wait: bool) -> None:
    """The import in this process, on the database, as the internal principal; then the
    ``import_embed`` step here too, under the job's lease, with a progress bar."""
    from rcll.retain import lease
    from rcll.transfer import embed

    started = time.perf_counter()
    svc, transfer, who = _direct()
    try:
        if path == "-":
            answer = transfer.import_stream(who, bank_id, sys.stdin.buffer, ids=ids,
                                            grants=grants)
        else:
            size = os.path.getsize(path)
            with open(path, "rb") as fh, _bytes_progress(f"import {bank_id}") as bar:
                task = bar.add_task("import", total=size)
                answer = transfer.import_stream(
                    who, bank_id, _Counting(fh, lambda k: bar.update(task, completed=k)),
                    ids=ids, grants=grants)
        _summary(bank_id, answer, time.perf_counter() - started)
        if answer["state"] != "queued" or no_wait:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        from rcll.cli.console import console

        op_id = answer["operation_id"]
        with Progress(TextColumn("embed"), BarColumn(), MofNCompleteColumn(),
                      console=console) as bar, \
                lease.hold(svc.pool, op_id, embed.STAGE, first=False) as held:
            if not held:
                raise click.ClickException(f"operation {op_id} is being embedded elsewhere")
            task = bar.add_task("embed", total=answer["units_to_embed"])
            embed.run_import_embed(svc.retain_context(), op_id,
                                   on_batch=lambda k: bar.update(task, completed=k))
        click.echo(f"embedded {answer['units_to_embed']} units in {bank_id}", err=True)
    finally:
        svc.close()


def _summary(bank_id: str, answer: dict, seconds: float) -> None:
    import json

    click.echo(f"imported into {bank_id} in {seconds:.1f} s (ids {answer['ids']}): "
               f"{json.dumps(answer.get('counts') or {})}; {answer['vectors_reused']} vectors "
               f"reused, {answer['units_to_embed']} units to embed; operation "
               f"{answer['operation_id']}", err=True)
    if answer.get("grants_skipped"):
        click.echo(f"grants skipped (members unknown here): {answer['grants_skipped']}",
                   err=True)


def _header_bank(path: str) -> str:
    import gzip
    import json

    with open(path, "rb") as fh:
        zipped = fh.read(2) == b"\x1f\x8b"
    opener = gzip.open if zipped else open
    with opener(path, "rb") as fh:
        try:
            head = json.loads(fh.readline(1 << 20))
            return str(head["bank"]["id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise click.ClickException(f"{path}: not an rcll-bank export ({exc})")


def _wait_embedding(client, bank_id: str, op_id: str, reused: int, todo: int) -> None:
    """Follow the import's ``import_embed`` step: units embedded of ``todo`` (its counts'
    ``units_embedded`` starts at the ``reused`` vectors)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rcll.cli.console import console

    with Progress(TextColumn("embed"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("embed", total=todo)

        def show(latest: dict) -> None:
            c = (latest.get(op_id) or {}).get("counts") or {}
            bar.update(task, completed=max(0, int(c.get("units_embedded", 0)) - reused))

        [op] = client.wait(bank_id, [op_id], poll_s=1.0, timeout_s=7 * 24 * 3600,
                           on_update=show)
    if op["state"] != "succeeded":
        raise click.ClickException(f"operation {op_id} {op['state']}: {op.get('error')}")
    click.echo(f"embedded: {op['counts'].get('units_embedded')} vectors in {bank_id}", err=True)


@bank.command("clone")
@click.argument("bank_id")
@click.argument("target_bank_id")
@click.option("--grants", is_flag=True, help="Copy the bank's grants too.")
def clone_cmd(bank_id: str, target_bank_id: str, grants: bool) -> None:
    """Copy BANK_ID into TARGET_BANK_ID (which must not exist), vectors reused."""
    answer = _client().clone_bank(bank_id, target_bank_id, grants=grants)
    click.echo(f"cloned {bank_id} into {target_bank_id}: {answer.get('counts')} (operation "
               f"{answer['operation_id']})", err=True)
