"""The entity service: what HTTP (``/v1/default/banks/{bank}/entities…``) calls to list and
read a bank's entities and merge proposals, and to merge, split or reject (spec §3, §4).

Every method takes the caller's :class:`~rcll.access.principal.Principal` first and checks
its role itself (``read`` to read; ``admin`` to merge, split or decide a proposal). Only
units the caller may see count for entities, their mentions and proposals
(:func:`rcll.access.visibility.unit_filter`, alias ``vu``). Each edit owns its transaction,
its audit entry (``entity.merge``, ``entity.split``, ``entity.proposal_reject``) and the cache
invalidation after its commit: a merge or split changes which units tier 2's entity drawer
finds for a query, so tier 1 forgets the bank's cached answers (cues,
:func:`rcll.cascade.invalidation.bank_written`) and a re-asked question is answered afresh.

The edit methods take the request's fields as sent and check them themselves, in the order
the HTTP answers have always had (unknown fields, then the bank, then each field), so every
channel refuses a bad request the same way (400 ``invalid_request``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.cascade import invalidation
from rcll.db import read_only
from rcll.errors import InvalidInput
from rcll.store import audit, banks, entities, entity_edits

if TYPE_CHECKING:
    from rcll.bootstrap import Services

PROPOSAL_STATES = ("open", "merged", "rejected")
MAX_IDS = 1000
MERGE_FIELDS = frozenset({"actor", "entity_ids"})
PROPOSAL_FIELDS = frozenset({"actor", "proposal_id", "keep_id", "decision"})
SPLIT_FIELDS = frozenset({"aliases", "unit_ids", "name", "actor"})


def check_state(state: str | None) -> str | None:
    """``state`` if it is ``None`` or a proposal state; else 400 ``invalid_request``."""
    if state is not None and state not in PROPOSAL_STATES:
        raise InvalidInput(f"state must be one of {', '.join(PROPOSAL_STATES)}",
                           {"field": "state"})
    return state


def check_fields(body: dict, allowed: set[str] | frozenset[str]) -> None:
    """400 ``invalid_request`` naming fields the request does not take (a typo, or a field
    of the other form: ``proposal_id`` with ``entity_ids``, ``decision`` without a proposal)."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown or contradictory fields: {', '.join(unknown)}",
                           {"fields": unknown, "allowed": sorted(allowed)})


def check_string(body: dict, field: str, required: bool = True) -> str | None:
    """``body[field]``: a string of 1-500 characters (``None`` when absent and not
    ``required``); else 400 ``invalid_request``."""
    value = body.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 500:
        raise InvalidInput(f"{field} must be a string of 1-500 characters", {"field": field})
    return value


def check_ids(body: dict, field: str) -> list[str]:
    """``body[field]``: a list of 1-:data:`MAX_IDS` strings of 1-500 characters; else 400."""
    value = body.get(field)
    if (not isinstance(value, list) or not 1 <= len(value) <= MAX_IDS
            or not all(isinstance(v, str) and 1 <= len(v) <= 500 for v in value)):
        raise InvalidInput(f"{field} must be a list of 1-{MAX_IDS} non-empty strings",
                           {"field": field})
    return value


class EntityService:
    """Entities over the process's read-write pool (``services.pool``)."""

    def __init__(self, services: Services) -> None:
        self._services = services

    @property
    def pool(self):
        return self._services.pool

    @staticmethod
    def _visible(principal: Principal, bank_id: str) -> tuple[str, dict]:
        return unit_filter(principal, bank_id, alias="vu")

    def list(self, principal: Principal, bank_id: str, limit: int, offset: int,
             q: str | None = None) -> tuple[list[dict], int]:
        """One page of the bank's entities, most mentioned first (``read``), as
        :func:`rcll.store.entities.public`; ``(entities, total)``."""
        principal.require(bank_id, "read")
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            rows, total = entities.list_page(conn, bank_id, limit, offset, q,
                                             visible=self._visible(principal, bank_id))
        return [entities.public(r) for r in rows], total

    def get(self, principal: Principal, bank_id: str, entity_id: str, limit: int,
            offset: int) -> dict:
        """An entity (``read``) with one page of its mentions: ``{"entity": public,
        "mentions": [...], "mentions_total", "linked_entities", "history"}`` — mentions,
        counts and co-mentions only from units the caller sees (an entity only others'
        units mention is 404 ``entity_not_found``)."""
        principal.require(bank_id, "read")
        with self.pool.connection() as conn:
            vis = self._visible(principal, bank_id)
            row = entities.get(conn, bank_id, entity_id, visible=vis)
            eid = str(row["id"])
            return {"entity": entities.public(row),
                    "mentions": entities.mentions(conn, eid, limit, offset, vis),
                    "mentions_total": int(row["mentions"]),
                    "linked_entities": entities.linked(conn, eid, visible=vis),
                    "history": entity_edits.history(conn, eid)}

    def graph(self, principal: Principal, bank_id: str, limit: int, min_count: int = 1,
              tags: list[str] | None = None, tags_match: str = "any") -> dict:
        """The co-occurrence graph (``read``) over the units the caller sees, only those
        ``tags`` match when given (``tags_match`` as recall's,
        :data:`rcll.search.scope.TAGS_SQL`): :func:`rcll.store.entities.cooccurrence`."""
        from rcll.search.scope import TAGS_SQL

        principal.require(bank_id, "read")
        sql, params = self._visible(principal, bank_id)
        if tags:
            sql = f"({sql}) AND {TAGS_SQL[tags_match].format(a='vu')}"
            params = {**params, "scope_tags": list(tags)}
        with read_only(self._services.read_pool) as conn:
            banks.get(conn, bank_id)
            return entities.cooccurrence(conn, bank_id, limit, min_count, visible=(sql, params))

    def proposals(self, principal: Principal, bank_id: str, state: str | None, limit: int,
                  offset: int) -> tuple[list[dict], int]:
        """One page of entity-merge proposals (``read``), newest first, optionally in one
        ``state`` (:data:`PROPOSAL_STATES`); ``(rows, total)``."""
        principal.require(bank_id, "read")
        check_state(state)
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            return entities.proposals_page(conn, bank_id, state, limit, offset,
                                           visible=self._visible(principal, bank_id))

    def merge(self, principal: Principal, bank_id: str, body: dict) -> dict:
        """Merge (``admin``; only entities the caller's units mention, others 404 as
        :meth:`get`): ``{"entity_ids": [keep, other, ...]}``, or
        ``{"proposal_id", "keep_id"?}`` (merge the proposal), or ``{"proposal_id",
        "decision": "reject"}`` (close it); optional ``"actor"``. Returns ``{"entity":
        public}`` after a merge, ``{"proposal_id", "state": "rejected"}`` after a reject.
        Audit ``entity.merge`` / ``entity.proposal_reject``."""
        principal.require(bank_id, "admin")
        check_fields(body, PROPOSAL_FIELDS if "proposal_id" in body else MERGE_FIELDS)
        actor = check_string(body, "actor", required=False)
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            vis = self._visible(principal, bank_id)
            if "proposal_id" in body:
                pid = check_string(body, "proposal_id")
                decision = body.get("decision", "merge")
                if decision not in ("merge", "reject"):
                    raise InvalidInput("decision must be merge or reject", {"field": "decision"})
                if decision == "reject":
                    if "keep_id" in body:
                        raise InvalidInput("keep_id applies to a merge only",
                                           {"fields": ["keep_id"]})
                    entity_edits.reject_proposal(conn, bank_id, pid, actor)
                    audit.record(conn, principal.member_id, "entity.proposal_reject", bank_id,
                                 None, {"proposal_id": pid, "actor": actor})
                    return {"proposal_id": pid, "state": "rejected"}
                kept = entity_edits.merge_proposal(conn, bank_id, pid, actor,
                                                   check_string(body, "keep_id", required=False),
                                                   visible=vis)
                merged: dict = {"proposal_id": pid}
            else:
                ids = check_ids(body, "entity_ids")
                kept = entity_edits.merge(conn, bank_id, ids, actor, visible=vis)
                merged = {"entity_ids": ids}
            audit.record(conn, principal.member_id, "entity.merge", bank_id, None,
                         {**merged, "kept": str(kept["id"]), "actor": actor})
        invalidation.bank_written(self._services.hot_tier, bank_id)
        return {"entity": entities.public(kept)}

    def split(self, principal: Principal, bank_id: str, entity_id: str, body: dict) -> dict:
        """Split a new entity off (``admin``): ``{"aliases": [...]}`` or ``{"unit_ids":
        [...]}``, optional ``"name"`` and ``"actor"``. Returns ``{"entity": public}`` (the
        new one). Audit ``entity.split``."""
        principal.require(bank_id, "admin")
        check_fields(body, SPLIT_FIELDS)
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            new = entity_edits.split(
                conn, bank_id, entity_id,
                aliases=check_ids(body, "aliases") if "aliases" in body else None,
                unit_ids=check_ids(body, "unit_ids") if "unit_ids" in body else None,
                name=check_string(body, "name", required=False),
                actor=check_string(body, "actor", required=False),
                visible=self._visible(principal, bank_id))
            audit.record(conn, principal.member_id, "entity.split", bank_id, None,
                         {"entity_id": entity_id, "new_id": str(new["id"]),
                          "aliases": body.get("aliases"), "unit_ids": body.get("unit_ids")})
        invalidation.bank_written(self._services.hot_tier, bank_id)
        return {"entity": entities.public(new)}
