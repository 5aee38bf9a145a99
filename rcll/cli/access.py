"""``rcll members`` / ``rcll keys`` / ``rcll grants`` / ``rcll audit``: admin tooling that
works directly on the database (``RCLL_DATABASE_URL``), as a deployment admin, through the
same :class:`rcll.access.service.AccessService` as the HTTP routes. Audit entries name the
actor ``cli:<os user>``.
"""

from __future__ import annotations

import functools
import getpass
import json

import click
from rich.table import Table

from rcll.cli.console import add_data_row, console
from rcll.cli.console import out as _out
from rcll.config import get_settings


def _actor():
    """The CLI's principal: a deployment admin named ``cli:<os user>``."""
    from rcll.access.principal import Principal

    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    purposes = tuple(get_settings().purposes)
    return Principal(member_id=f"cli:{user}", is_admin=True, default_purposes=purposes,
                     purposes_all=purposes)


def _with_service(fn):
    """Run ``fn(svc, *args)`` with bootstrapped services; an RCLL error is one line."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        from rcll.bootstrap import bootstrap
        from rcll.errors import RCLLError

        svc = bootstrap()
        try:
            return fn(svc, *args, **kwargs)
        except RCLLError as exc:
            raise click.ClickException(f"{exc.code}: {exc.message}")
        finally:
            svc.close()
    return run


def _purposes(value: str | None) -> list[str] | None:
    return [p.strip() for p in value.split(",") if p.strip()] if value else None


def _table(rows: list[dict], cols: list[str], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    table = Table()
    for c in cols:
        table.add_column(c)
    for r in rows:
        add_data_row(table, *[", ".join(v) if isinstance(v, list) else str(v) for v in
                        (r.get(c) for c in cols)])
    _out().print(table)


@click.group()
def members() -> None:
    """Members (agents or people) that hold keys and grants."""


@members.command("add")
@click.argument("member_id")
@click.option("--name", default=None)
@click.option("--kind", type=click.Choice(["agent", "person"]), default="agent", show_default=True)
@click.option("--admin", "is_admin", is_flag=True, help="A deployment admin.")
@click.option("--purposes", default=None, help="Default purposes of its retains, comma-separated.")
@_with_service
def members_add(svc, member_id: str, name: str | None, kind: str, is_admin: bool,
                purposes: str | None) -> None:
    """Create a member."""
    m = svc.access.create_member(_actor(), member_id, name, kind, is_admin, _purposes(purposes))
    console.print(f"member {m['member_id']} created")


@members.command("list")
@click.option("--json", "as_json", is_flag=True)
@_with_service
def members_list(svc, as_json: bool) -> None:
    """Every member."""
    rows, _ = svc.access.list_members(_actor(), 1000, 0)
    _table(rows, ["member_id", "name", "kind", "is_admin", "default_purposes", "disabled_at"],
           as_json)


@members.command("disable")
@click.argument("member_id")
@_with_service
def members_disable(svc, member_id: str) -> None:
    """Disable a member: its keys stop working at once."""
    svc.access.disable_member(_actor(), member_id)
    console.print(f"member {member_id} disabled")


@click.group()
def keys() -> None:
    """API keys (shown once at creation; stored hashed)."""


@keys.command("issue")
@click.argument("member_id")
@click.option("--label", default=None)
@_with_service
def keys_issue(svc, member_id: str, label: str | None) -> None:
    """Issue a key; the key is printed once, on standard output."""
    k = svc.access.issue_key(_actor(), member_id, label)
    console.print(f"key {k['key_id']} (prefix {k['prefix']}) for {member_id}; "
                  "store it now, it is not shown again:")
    click.echo(k["key"])


@keys.command("list")
@click.argument("member_id")
@click.option("--json", "as_json", is_flag=True)
@_with_service
def keys_list(svc, member_id: str, as_json: bool) -> None:
    """A member's keys (never the key itself)."""
    _table(svc.access.list_keys(_actor(), member_id),
           ["key_id", "prefix", "label", "created_at", "last_used_at", "revoked_at"], as_json)


@keys.command("revoke")
@click.argument("key_id")
@_with_service
def keys_revoke(svc, key_id: str) -> None:
    """Revoke a key."""
    svc.access.revoke_key(_actor(), key_id)
    console.print(f"key {key_id} revoked")


@click.group()
def grants() -> None:
    """Bank grants: member x bank x role (read|write|admin) x purposes."""


@grants.command("set")
@click.argument("member_id")
@click.option("--bank", required=True)
@click.option("--role", type=click.Choice(["read", "write", "admin"]), required=True)
@click.option("--purposes", default=None, help="Comma-separated (default: the member's).")
@_with_service
def grants_set(svc, member_id: str, bank: str, role: str, purposes: str | None) -> None:
    """Create or replace a member's grant on a bank."""
    g = svc.access.set_grant(_actor(), bank, member_id, role, _purposes(purposes))
    console.print(f"{member_id}: {g['role']} on {bank} for {', '.join(g['purposes'])}")


@grants.command("list")
@click.option("--bank", required=True)
@click.option("--json", "as_json", is_flag=True)
@_with_service
def grants_list(svc, bank: str, as_json: bool) -> None:
    """Every grant on a bank."""
    _table(svc.access.list_grants(_actor(), bank),
           ["member_id", "role", "purposes", "updated_at"], as_json)


@grants.command("revoke")
@click.argument("member_id")
@click.option("--bank", required=True)
@_with_service
def grants_revoke(svc, member_id: str, bank: str) -> None:
    """Remove a member's grant on a bank."""
    svc.access.revoke_grant(_actor(), bank, member_id)
    console.print(f"{member_id}: grant on {bank} revoked")


@click.command("audit")
@click.option("--bank", required=True)
@click.option("--action", default=None)
@click.option("--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_with_service
def audit_cmd(svc, bank: str, action: str | None, limit: int, as_json: bool) -> None:
    """A bank's audit log, newest first."""
    rows, _ = svc.access.audit(_actor(), bank, action=action, limit=limit)
    _table([{**r, "details": json.dumps(r["details"])} for r in rows],
           ["at", "actor", "action", "unit_id", "details"], as_json)


def register(cli: click.Group) -> None:
    """Add the groups to the ``rcll`` command."""
    for cmd in (members, keys, grants, audit_cmd):
        cli.add_command(cmd)
