"""Which purpose a recall runs for, and which audience and purposes a retained unit gets
(spec §7, issue 9 item 2).

A purpose is a name from a closed, configured set (``RCLL_PURPOSES``; default assist,
operate, audit, personal). A recall names one (default ``RCLL_DEFAULT_PURPOSE``) and sees
only units whose ``purposes`` hold it; a unit's ``audience`` is ``'bank'`` (every member
with read on the bank) or one member id (that member only).
"""

from __future__ import annotations

from collections.abc import Sequence

from rcll.access.principal import BANK_AUDIENCE, Principal
from rcll.errors import Rejected


def unknown_purpose(names: Sequence[str], known: Sequence[str]) -> Rejected:
    """400 ``unknown_purpose`` naming ``names`` and the configured set ``known``."""
    return Rejected(400, "unknown_purpose",
                    f"unknown purpose(s) {', '.join(repr(n[:32]) for n in names)}; "
                    f"known: {', '.join(known)}", {"purposes": list(names), "known": list(known)})


def recall_purpose(requested: str | None, principal: Principal | None, bank_id: str, *,
                   known: Sequence[str], default: str) -> str | None:
    """The purpose a recall of ``bank_id`` filters by.

    ``requested`` (the request's ``purpose``) wins when given. Without one: ``None`` (no
    purpose filter) for an internal call (``principal`` None) or an unrestricted principal
    (auth off, ``all_audiences``); ``default`` for a member. Raises
    :class:`~rcll.errors.Rejected` 400 ``unknown_purpose`` (not in ``known``) or 403
    ``purpose_not_granted`` (not among the principal's purposes for the bank).
    """
    if requested is not None and requested not in known:
        raise unknown_purpose([requested], known)
    if principal is None:
        return requested
    if requested is None:
        if principal.all_audiences:
            return None
        requested = default
    granted = principal.purposes(bank_id)
    if requested not in granted:
        raise Rejected(403, "purpose_not_granted",
                       f"purpose {requested!r} is not granted on bank {bank_id!r}"
                       + ("" if requested != default else " (it is the default purpose: "
                          "name a granted one with 'purpose')"),
                       {"bank_id": bank_id, "purpose": requested, "granted": list(granted)})
    return requested


def unit_access(principal: Principal | None, bank_id: str, audience: str | None,
                purposes: Sequence[str] | None, *, known: Sequence[str]) -> tuple[str, list[str]]:
    """``(audience, purposes)`` of the units a retain by ``principal`` writes.

    Defaults: audience ``'bank'``; purposes the principal's ``default_purposes`` (the
    configured set ``known`` for an internal call, ``principal`` None). A writer may name
    ``'bank'`` or its own member id; only a deployment admin (or an internal call) may name
    another member. Purposes must be a non-empty subset of ``known`` (duplicates dropped,
    order kept) holding at least one purpose granted to ``principal`` on ``bank_id`` — a
    writer writes only what it may read (:mod:`rcll.access.visibility`). Raises
    :class:`~rcll.errors.Rejected`: 400 ``unknown_purpose``, 400 ``invalid_purposes``
    (empty), 400 ``invalid_audience`` (not a member id's shape), 403
    ``audience_not_allowed``, 403 ``purpose_not_granted``.
    """
    aud = BANK_AUDIENCE if audience is None else audience
    if aud != BANK_AUDIENCE:
        if not _member_shaped(aud):
            raise Rejected(400, "invalid_audience",
                           "audience must be 'bank' or a member id (lowercase letters, digits, "
                           "'_', '.', '-'; at most 64)", {"audience": aud[:64]})
        own = principal is not None and aud == principal.member_id
        admin = principal is None or principal.is_admin
        if not own and not admin:
            raise Rejected(403, "audience_not_allowed",
                           "a unit's audience may be 'bank' or your own member id; only an "
                           "admin may name another member", {"audience": aud})
    if purposes is None:
        chosen = list(principal.default_purposes) if principal is not None else list(known)
        chosen = [p for p in chosen if p in known] or [known[0]]
        if principal is not None and not principal.all_audiences and not (
                set(chosen) & set(principal.purposes(bank_id))):  # defaults it cannot read
            chosen = [p for p in principal.purposes(bank_id) if p in known] or chosen
    else:
        chosen = list(dict.fromkeys(purposes))
        if not chosen:
            raise Rejected(400, "invalid_purposes", "purposes must not be empty (omit it for "
                           "the writer's default purposes)", {"known": list(known)})
        bad = [p for p in chosen if p not in known]
        if bad:
            raise unknown_purpose(bad, known)
    if principal is not None and not principal.all_audiences:
        granted = principal.purposes(bank_id)
        if not set(chosen) & set(granted):
            # a writer writes only what it may read: a unit no purpose of its grant reaches
            # would land in a lineage it cannot see, and could replace another member's
            raise Rejected(403, "purpose_not_granted",
                           "a writer may retain only units it may read: name at least one "
                           f"purpose granted to this key on bank {bank_id!r}",
                           {"purposes": chosen, "granted": list(granted)})
    return aud, chosen


def _member_shaped(value: str) -> bool:
    """The ``members.id`` CHECK of migration 0017: ``^[a-z0-9][a-z0-9_.-]{0,63}$``."""
    import re
    return re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", value) is not None
