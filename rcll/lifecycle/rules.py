"""The rules every lifecycle verb applies: the caller's role on the bank, the audience rule
(a unit the caller may not see — another member's audience, or none of the purposes granted
to the caller on the bank — is answered exactly like a missing one: 404, no existence
oracle), who may write which audience, and the closed set of purposes.

Errors (all :mod:`rcll.errors` classes, so every channel maps them the same way):
403 ``forbidden`` (role), 403 ``audience_not_allowed``, 400 ``unknown_purpose``,
400 ``unknown_member``, 404 ``unit_not_found``, 409 ``revision_conflict``,
``empty_intersection``, ``unit_forgotten``, ``already_superseded``.
"""

from __future__ import annotations

from rcll.access.principal import BANK_AUDIENCE, Principal
from rcll.access.visibility import unit_filter, unit_visible
from rcll.errors import Conflict, Forbidden, InvalidInput
from rcll.store.memories import UnitNotFound, parse_unit_id


class AudienceNotAllowed(Forbidden):
    code = "audience_not_allowed"


class UnknownPurpose(InvalidInput):
    code = "unknown_purpose"


class UnknownMember(InvalidInput):
    code = "unknown_member"


class RevisionConflict(Conflict):
    """The unit is no longer at the revision the caller named (a lost race): details
    ``{unit_id, revision (asked), current_revision}``."""

    code = "revision_conflict"


class EmptyIntersection(Conflict):
    code = "empty_intersection"


class UnitForgotten(Conflict):
    code = "unit_forgotten"


class AlreadySuperseded(Conflict):
    code = "already_superseded"


def not_found(bank_id: str, unit_id: str) -> UnitNotFound:
    """The one 404 of a missing, foreign-bank or invisible unit (same message for all)."""
    return UnitNotFound(f"unit {unit_id} does not exist in bank {bank_id!r}",
                        {"unit_id": unit_id, "bank_id": bank_id})


def visible_row(principal: Principal, bank_id: str, unit_id: str, row: dict | None,
                purpose: str | None = None) -> dict:
    """``row`` (with ``audience`` and ``purposes``) if it exists and is visible to the caller
    (:func:`rcll.access.visibility.unit_visible`: its audience, and a purpose granted to the
    caller on the bank — or ``purpose`` when the caller names one); else :func:`not_found`."""
    if row is None or not unit_visible(principal, bank_id, row["audience"], row["purposes"],
                                       purpose):
        raise not_found(bank_id, unit_id)
    return row


def seen(principal: Principal, bank_id: str, purpose: str | None = None) -> tuple[str, dict]:
    """The visibility filter on alias ``o`` for the units shown beside a unit (its links
    and sources), the ``visible`` argument of :func:`rcll.store.memories.get`:
    :func:`rcll.access.visibility.unit_filter` (``purpose``: the one the caller names)."""
    return unit_filter(principal, bank_id, alias="o", purpose=purpose)


def unit_id(value: str) -> str:
    """Canonical UUID text; 400 ``invalid_unit_id`` otherwise."""
    return parse_unit_id(str(value))


class NarrowingNotAllowed(Forbidden):
    code = "narrowing_not_allowed"


def check_narrowing(principal: Principal, bank_id: str, old: dict, audience: str,
                    purposes) -> None:
    """A bank-wide memory belongs to the bank: making it visible to fewer members — an
    audience other than ``'bank'``, or dropping one of its purposes — by ``correct`` or
    ``supersede`` takes the ``admin`` role on the bank (a writer who sees a bank unit could
    otherwise take it for itself). A unit of one member's audience is that member's to
    narrow. Raises :class:`NarrowingNotAllowed` (403 ``narrowing_not_allowed``)."""
    if old["audience"] != BANK_AUDIENCE:
        return
    narrower = audience != BANK_AUDIENCE or not set(old["purposes"]) <= set(purposes)
    if narrower and not principal.can(bank_id, "admin"):
        raise NarrowingNotAllowed(
            "only an admin of the bank may make a bank-wide memory visible to fewer members",
            {"audience": audience, "purposes": list(purposes),
             "from": {"audience": old["audience"], "purposes": list(old["purposes"])}})


def check_audience(conn, principal: Principal, audience: str) -> str:
    """The audience a write by ``principal`` may set: ``'bank'`` or the caller's own member
    id; another member's id only for a deployment admin (or auth off), and only an existing
    member (400 ``unknown_member``). Raises :class:`AudienceNotAllowed` (403) otherwise."""
    if audience == BANK_AUDIENCE or (principal.member_id and audience == principal.member_id):
        return audience
    if not (principal.is_admin or principal.all_audiences):
        raise AudienceNotAllowed(
            "a writer may give a unit the audience 'bank' or its own member id only",
            {"audience": audience, "member_id": principal.member_id})
    if conn.execute("SELECT 1 FROM members WHERE id = %s", (audience,)).fetchone() is None:
        raise UnknownMember(f"audience {audience!r} is neither 'bank' nor a member id",
                            {"audience": audience})
    return audience


def check_purposes(purposes: list[str], known: list[str] | tuple[str, ...]) -> list[str]:
    """``purposes`` deduplicated in the configured order; 400 ``unknown_purpose`` naming
    any not in ``known`` (the closed set, ``settings.purposes``), 400 on an empty list."""
    bad = sorted(set(purposes) - set(known))
    if bad:
        raise UnknownPurpose(f"unknown purposes: {', '.join(bad)}",
                             {"unknown": bad, "known": list(known)})
    out = [p for p in known if p in set(purposes)]
    if not out:
        raise UnknownPurpose("purposes must name at least one purpose", {"known": list(known)})
    return out


def default_purposes(principal: Principal, known: list[str] | tuple[str, ...],
                     fallback: str) -> list[str]:
    """What a write that names no purposes gets: the writer's default purposes (those in
    the configured set), else ``[fallback]`` (``settings.default_purpose``)."""
    out = [p for p in known if p in set(principal.default_purposes)]
    return out or [fallback]


def check_revision(row: dict, revision: int) -> None:
    """409 :class:`RevisionConflict` unless ``row`` (locked) is at ``revision``."""
    if row["revision"] != revision:
        raise RevisionConflict(
            f"unit {row['id']} is at revision {row['revision']}, not {revision}",
            {"unit_id": str(row["id"]), "revision": revision,
             "current_revision": row["revision"]})


def check_not_forgotten(row: dict) -> None:
    """409 :class:`UnitForgotten` for a tombstone (it cannot be edited or derived from)."""
    if row["forgotten_at"] is not None:
        raise UnitForgotten(f"unit {row['id']} was forgotten",
                            {"unit_id": str(row["id"]),
                             "forgotten_at": row["forgotten_at"].isoformat()})
