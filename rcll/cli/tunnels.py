"""``rcll tunnels add|list|rm`` and ``rcll bridge``: tunnels between banks, through the API
(:mod:`rcll.hierarchy.tunnels` holds the rules)."""

from __future__ import annotations

import json

import click
from rich.table import Table


def _client():
    from rcll.cli.main import _client as make

    return make()


def _print_tunnel(t: dict, created: bool | None = None) -> None:
    arrow = "<->" if t["bidirectional"] else "->"
    state = "" if created is None else (" (created)" if created else " (already there)")
    click.echo(f"tunnel {t['id']}{state}: {t['source_bank_id']}/{t['source_unit_id']} "
               f"{arrow} {t['target_bank_id']}/{t['target_unit_id']} [{t['relationship']}]")


@click.group("tunnels")
def tunnels() -> None:
    """Tunnels: links between units of different banks, followed by recall."""


@tunnels.command("add")
@click.argument("source_unit_id")
@click.argument("target_unit_id")
@click.option("--relationship", default="related", show_default=True)
@click.option("--one-way", is_flag=True, help="Followed from source to target only.")
def add(source_unit_id: str, target_unit_id: str, relationship: str, one_way: bool) -> None:
    """Tunnel from SOURCE_UNIT_ID to TARGET_UNIT_ID (units of two different banks)."""
    t = _client().create_tunnel(source_unit_id, target_unit_id, relationship=relationship,
                                bidirectional=not one_way)
    _print_tunnel(t)


@tunnels.command("list")
@click.option("--bank", required=True)
@click.option("--limit", default=50, show_default=True)
@click.option("--offset", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON response.")
def list_(bank: str, limit: int, offset: int, as_json: bool) -> None:
    """Tunnels touching BANK that you may see."""
    from rcll.cli.console import add_data_row, out

    page = _client().tunnels(bank, limit=limit, offset=offset)
    if as_json:
        click.echo(json.dumps(page, indent=2))
        return
    table = Table(title=f"tunnels of {bank}: {page['total']}")
    for col in ("id", "relationship", "way", "source", "target"):
        table.add_column(col)
    for t in page["tunnels"]:
        add_data_row(table, t["id"], t["relationship"], "both" if t["bidirectional"] else "one",
                      f"{t['source_bank_id']}: {t['source_text'][:60]}",
                      f"{t['target_bank_id']}: {t['target_text'][:60]}")
    out().print(table)


@tunnels.command("rm")
@click.argument("tunnel_id")
def rm(tunnel_id: str) -> None:
    """Delete tunnel TUNNEL_ID."""
    t = _client().delete_tunnel(tunnel_id)["deleted"]
    click.echo(f"deleted tunnel {t['id']}")


@click.command("bridge")
@click.option("--source-unit", default=None, help="Source unit id (with --target-unit).")
@click.option("--target-unit", default=None)
@click.option("--source-bank", default=None, help="Source bank (with --source-query).")
@click.option("--source-query", default=None)
@click.option("--target-bank", default=None)
@click.option("--target-query", default=None)
@click.option("--relationship", default="related", show_default=True)
@click.option("--one-way", is_flag=True, help="Followed from source to target only.")
@click.option("--purpose", default=None, help="Recall purpose of the two queries.")
def bridge(source_unit: str | None, target_unit: str | None, source_bank: str | None,
           source_query: str | None, target_bank: str | None, target_query: str | None,
           relationship: str, one_way: bool, purpose: str | None) -> None:
    """Create a tunnel from two unit ids, or from the top hit of a query in each bank."""
    by_ids = source_unit is not None or target_unit is not None
    by_query = any(v is not None for v in (source_bank, source_query, target_bank, target_query))
    if by_ids == by_query:
        raise click.UsageError("give --source-unit/--target-unit, or --source-bank, "
                               "--source-query, --target-bank and --target-query")
    if by_query and None in (source_bank, source_query, target_bank, target_query):
        raise click.UsageError("the query form needs all of --source-bank, --source-query, "
                               "--target-bank and --target-query")
    kw = {"relationship": relationship, "bidirectional": not one_way, "purpose": purpose}
    if by_ids:
        out = _client().bridge(source_unit_id=source_unit, target_unit_id=target_unit, **kw)
    else:
        out = _client().bridge(source=(source_bank, source_query),
                               target=(target_bank, target_query), **kw)
    for side, m in (out.get("matched") or {}).items():
        click.echo(f"{side}: {m['bank_id']}/{m['unit_id']}: {m['text'][:100]}")
    _print_tunnel(out["tunnel"], out["created"])
