"""The authenticated caller of one request, and the rule that decides what it may do.

A :class:`Principal` is built once per request (API: from the ``Authorization: Bearer``
key; MCP: from the key the server was given; CLI: from ``RCLL_API_KEY``) and passed to
every ``rcll`` service. The engine never reads keys or headers itself.

Roles are ordered ``read < write < admin`` (spec §3 ``bank_grants``): ``write`` includes
``read``, ``admin`` includes both and manages the bank's grants and tunnels. A deployment
admin (``is_admin``: the bootstrap key, or a member flagged admin) holds ``admin`` on every
bank and manages members and keys.

Audience (spec §7): a unit whose ``audience`` is ``'bank'`` is visible to every member
with ``read`` on the bank; a unit whose audience is a member id only to that member. Being
an admin does not lift the audience rule: a member's private units stay private. Only a
principal with ``all_audiences`` (auth switched off for the local dev stack, or an internal
maintenance call) sees every audience.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rcll.errors import Forbidden

ROLES: tuple[str, ...] = ("read", "write", "admin")
BANK_AUDIENCE = "bank"
DEFAULT_PURPOSES: tuple[str, ...] = ("assist", "operate", "audit", "personal")


def role_rank(role: str) -> int:
    """0 for ``read``, 1 ``write``, 2 ``admin``. Raises ``ValueError`` for another name."""
    return ROLES.index(role)


@dataclass(frozen=True)
class Grant:
    """One row of ``bank_grants``: ``role`` on ``bank_id``, recalls allowed for ``purposes``."""

    bank_id: str
    role: str
    purposes: tuple[str, ...]


@dataclass(frozen=True)
class Principal:
    """The caller: ``member_id`` (``None`` only when auth is off or for internal calls),
    deployment-wide ``is_admin``, ``grants`` by bank id, ``default_purposes`` (what a
    retain by this member gets when it names none), and ``all_audiences`` (see module doc).
    """

    member_id: str | None
    grants: Mapping[str, Grant] = field(default_factory=dict)
    is_admin: bool = False
    default_purposes: tuple[str, ...] = ("assist",)
    all_audiences: bool = False
    purposes_all: tuple[str, ...] = DEFAULT_PURPOSES
    key_id: str | None = None

    @classmethod
    def unrestricted(cls, purposes: tuple[str, ...] = DEFAULT_PURPOSES) -> Principal:
        """Auth off (local dev stack only) or an internal call: admin on every bank, every
        audience, every purpose. Never built from a request when auth is on."""
        return cls(member_id=None, is_admin=True, all_audiences=True,
                   default_purposes=tuple(purposes), purposes_all=tuple(purposes))

    def role(self, bank_id: str) -> str | None:
        """The caller's role on ``bank_id`` (``admin`` for a deployment admin), or ``None``."""
        if self.is_admin:
            return "admin"
        g = self.grants.get(bank_id)
        return g.role if g else None

    def can(self, bank_id: str, role: str) -> bool:
        """Whether the caller holds ``role`` (or a higher one) on ``bank_id``."""
        have = self.role(bank_id)
        return have is not None and role_rank(have) >= role_rank(role)

    def require(self, bank_id: str, role: str) -> None:
        """Raise :class:`rcll.errors.Forbidden` (403 ``forbidden``) unless :meth:`can`."""
        if not self.can(bank_id, role):
            raise Forbidden(f"{role} access to bank {bank_id!r} is not granted to this key",
                            {"bank_id": bank_id, "needed": role, "have": self.role(bank_id)})

    def purposes(self, bank_id: str) -> tuple[str, ...]:
        """Purposes the caller may recall for on ``bank_id`` (all for a deployment admin)."""
        if self.is_admin:
            return self.purposes_all
        g = self.grants.get(bank_id)
        return g.purposes if g else ()
