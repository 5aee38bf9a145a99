"""The directive service: list, read, create, change and delete a bank's directives, and
pick the ones a reflect applies — the one implementation HTTP calls.

Guarded like the bank's configuration (:class:`rcll.banks.service.BankService`): ``read``
on the bank to list and read, ``admin`` to write. Each write owns its transaction and its
audit entry (``directive.create``, ``directive.update``, ``directive.delete``; details: the
directive's id and name, the fields changed — never its content). A create makes the bank
when it does not exist yet (as a retain does); reads of a missing bank are 404
``bank_not_found``. Reads run in a READ ONLY transaction on the read pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from rcll.access.principal import Principal
from rcll.db import read_only
from rcll.directives.models import DirectiveCreate, DirectiveUpdate
from rcll.errors import DirectiveNotFound, InvalidInput
from rcll.store import audit, banks, directives

if TYPE_CHECKING:
    from rcll.bootstrap import Services

MAX_IN_PROMPT = 100  # directives one reflect prompt carries at most (highest priority first)


def _directive_id(directive_id: str) -> str:
    """Canonical UUID text; 404 ``directive_not_found`` for anything else (no directive
    has another id)."""
    try:
        return str(UUID(directive_id))
    except (ValueError, AttributeError, TypeError):
        raise DirectiveNotFound(f"directive {directive_id!r} not found",
                                {"directive_id": directive_id}) from None


def _tags_match(value: str) -> str:
    if value not in directives.MATCH_MODES:
        raise InvalidInput(f"tags_match must be one of {', '.join(directives.MATCH_MODES)}",
                           {"field": "tags_match"})
    return value


class DirectiveService:
    """Directives over the process's pools (``services.pool``, ``services.read_pool``)."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def list(self, principal: Principal, bank_id: str, *, tags: list[str] | None = None,
             tags_match: str = "any", active_only: bool = True, limit: int = 100,
             offset: int = 0) -> tuple[list[dict], int]:
        """One page of the bank's directives, highest priority first, and the total
        (``read``): ``tags`` keeps the global ones and the tagged ones in the scope of those
        tags (:func:`rcll.store.directives.scope_sql`; none: all), ``active_only`` (default)
        the active ones. 400 ``invalid_request`` (tags_match), 403, 404 ``bank_not_found``."""
        principal.require(bank_id, "read")
        tags_match = _tags_match(tags_match)
        with read_only(self._services.read_pool) as conn:
            banks.get(conn, bank_id)
            return directives.list_page(conn, bank_id, tags=tags, tags_match=tags_match,
                                        active_only=active_only, limit=limit, offset=offset)

    def get(self, principal: Principal, bank_id: str, directive_id: str) -> dict:
        """One directive (``read``). 403, 404 ``bank_not_found`` / ``directive_not_found``."""
        principal.require(bank_id, "read")
        did = _directive_id(directive_id)
        with read_only(self._services.read_pool) as conn:
            banks.get(conn, bank_id)
            row = directives.get(conn, bank_id, did)
        if row is None:
            raise DirectiveNotFound(f"directive {directive_id!r} not found in bank {bank_id!r}",
                                    {"directive_id": directive_id})
        return row

    def create(self, principal: Principal, bank_id: str, fields: DirectiveCreate) -> dict:
        """Add a directive (``admin``; the bank is made when missing); audit
        ``directive.create``. The new row. 403."""
        principal.require(bank_id, "admin")
        with self._services.pool.connection() as conn, conn.transaction():
            banks.ensure(conn, bank_id)
            row = directives.insert(conn, bank_id, name=fields.name, content=fields.content,
                                    priority=fields.priority, is_active=fields.is_active,
                                    tags=fields.tags or [], created_by=principal.member_id)
            audit.record(conn, principal.member_id, "directive.create", bank_id, details={
                "directive_id": row["id"], "name": row["name"], "priority": row["priority"],
                "is_active": row["is_active"], "tags": row["tags"]})
        return row

    def update(self, principal: Principal, bank_id: str, directive_id: str,
               fields: DirectiveUpdate) -> dict:
        """Change the fields given (``admin``); audit ``directive.update`` (details: the
        fields). The row after it. 403, 404 ``bank_not_found`` / ``directive_not_found``."""
        principal.require(bank_id, "admin")
        did = _directive_id(directive_id)
        changes = fields.changes()
        with self._services.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            row = directives.update(conn, bank_id, did, changes)
            if row is None:
                raise DirectiveNotFound(
                    f"directive {directive_id!r} not found in bank {bank_id!r}",
                    {"directive_id": directive_id})
            audit.record(conn, principal.member_id, "directive.update", bank_id, details={
                "directive_id": did, "name": row["name"], "fields": sorted(changes)})
        return row

    def delete(self, principal: Principal, bank_id: str, directive_id: str) -> dict:
        """Delete the directive (``admin``); audit ``directive.delete``. The deleted row.
        403, 404 ``bank_not_found`` / ``directive_not_found``."""
        principal.require(bank_id, "admin")
        did = _directive_id(directive_id)
        with self._services.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            row = directives.delete(conn, bank_id, did)
            if row is None:
                raise DirectiveNotFound(
                    f"directive {directive_id!r} not found in bank {bank_id!r}",
                    {"directive_id": directive_id})
            audit.record(conn, principal.member_id, "directive.delete", bank_id,
                         details={"directive_id": did, "name": row["name"]})
        return row

    def for_reflect(self, principal: Principal, bank_id: str, tags: list[str] | None,
                    tags_match: str = "any", apply_all: bool = False) -> list[dict]:
        """The active directives a reflect of ``principal`` (``read``) with ``tags`` applies,
        highest priority first (then oldest), at most :data:`MAX_IN_PROMPT`: the global
        ones, and the tagged ones whose tags match the reflect's by ``tags_match`` (a
        reflect without tags gets the global ones only); every active one with
        ``apply_all``. A bank that does not exist has none."""
        principal.require(bank_id, "read")
        tags_match = _tags_match(tags_match)
        with read_only(self._services.read_pool) as conn:
            return directives.in_scope(conn, bank_id, tags, tags_match, apply_all,
                                       limit=MAX_IN_PROMPT)
