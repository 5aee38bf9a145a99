"""``rcll unit read|remember|derive|correct|supersede|forget``: the lifecycle verbs through
the HTTP API (:class:`rcll.client.RCLLClient`); each prints the JSON answer."""

from __future__ import annotations

import json

import click


def _client():
    from rcll.cli.main import _client as make

    return make()


def _fields(kind, context, room, hall, layer, audience, purposes, tags, metadata) -> dict:
    """The optional unit fields given on the command line (``--purpose`` repeatable,
    ``--tag`` repeatable, ``--metadata`` a JSON object)."""
    out = {"kind": kind, "context": context, "room": room, "hall": hall, "layer": layer,
           "audience": audience, "purposes": list(purposes) or None, "tags": list(tags) or None}
    if metadata is not None:
        try:
            out["metadata"] = json.loads(metadata)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--metadata")
    return {k: v for k, v in out.items() if v is not None}


def unit_options(fn):
    """The optional unit fields shared by remember, derive, correct and supersede."""
    for opt in reversed((
        click.option("--kind", default=None, help="fact, note, decision, preference, event, summary"),
        click.option("--context", default=None),
        click.option("--room", default=None),
        click.option("--hall", default=None),
        click.option("--layer", type=int, default=None),
        click.option("--audience", default=None, help="'bank' or a member id"),
        click.option("--purpose", "purposes", multiple=True, help="repeatable"),
        click.option("--tag", "tags", multiple=True, help="repeatable"),
        click.option("--metadata", default=None, help="a JSON object"),
    )):
        fn = opt(fn)
    return fn


def _echo(obj) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


@click.group("unit")
def unit() -> None:
    """The lifecycle verbs on one memory unit (docs/concepts/lifecycle.md "Lifecycle verbs")."""


@unit.command("read")
@click.argument("unit_id")
@click.option("--bank", required=True)
@click.option("--purpose", default=None)
def read(unit_id: str, bank: str, purpose: str | None) -> None:
    """Print one unit with its links, entities and sources."""
    _echo(_client().read_unit(bank, unit_id, purpose))


@unit.command("remember")
@click.argument("text")
@click.option("--bank", required=True)
@unit_options
def remember(text: str, bank: str, **fields) -> None:
    """Store TEXT as one unit, synchronously."""
    _echo(_client().remember(bank, {"text": text, **_fields(**fields)}))


@unit.command("derive")
@click.argument("text")
@click.option("--bank", required=True)
@click.option("--source", "sources", multiple=True, required=True, help="repeatable unit id")
@unit_options
def derive(text: str, bank: str, sources: tuple[str, ...], **fields) -> None:
    """Store TEXT as a unit derived from the --source units."""
    _echo(_client().derive(bank, list(sources), {"text": text, **_fields(**fields)}))


@unit.command("correct")
@click.argument("unit_id")
@click.option("--bank", required=True)
@click.option("--revision", type=int, required=True, help="the revision you read")
@click.option("--text", default=None)
@unit_options
def correct(unit_id: str, bank: str, revision: int, text: str | None, **fields) -> None:
    """Edit UNIT_ID's text or fields (revision + 1; 409 if it moved on)."""
    changes = _fields(**fields)
    if text is not None:
        changes["text"] = text
    _echo(_client().correct(bank, unit_id, revision, changes))


@unit.command("supersede")
@click.argument("unit_id")
@click.argument("text")
@click.option("--bank", required=True)
@click.option("--revision", type=int, required=True)
@unit_options
def supersede(unit_id: str, text: str, bank: str, revision: int, **fields) -> None:
    """Replace UNIT_ID with a new unit holding TEXT."""
    _echo(_client().supersede(bank, unit_id, revision, {"text": text, **_fields(**fields)}))


@unit.command("forget")
@click.argument("unit_id")
@click.option("--bank", required=True)
@click.option("--reason", default=None)
def forget(unit_id: str, bank: str, reason: str | None) -> None:
    """Forget UNIT_ID: tombstone, vectors and cached tiers purged, audit entry."""
    _echo(_client().forget(bank, unit_id, reason))
