"""The documents service: list, read, retag and delete documents, their chunks and their
history; list a bank's memories and tags; clear a bank — the one implementation HTTP, MCP
and the CLI call (re-making a document's version is a retain: the retain service's
``reprocess``).

Every method takes the caller's :class:`~rcll.access.principal.Principal` first, checks its
role on the bank itself, and filters by the one visibility rule
(:func:`rcll.access.visibility.rule_for`), applied to document lineages and units alike
(:mod:`rcll.identity`). Reads run in a READ ONLY transaction on the read pool; a write owns
its transaction, its audit entry and the tier-1 invalidation after the commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import grants_filter, rule_for
from rcll.cascade import invalidation
from rcll.db import read_only
from rcll.errors import InvalidInput
from rcll.store import audit, banks, chunks, document_events, documents, mental_models

if TYPE_CHECKING:

    from rcll.bootstrap import Services


GRAPH_LINKS_PER_UNIT = 20  # the memory graph's bound on links, per unit shown


class DocumentService:
    """Documents and bank contents for one process (pools and tier 1 from ``services``)."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def _read(self):
        """A READ ONLY transaction on the read pool (:func:`rcll.db.read_only`)."""
        return read_only(self._services.read_pool)

    def list_documents(self, principal: Principal, bank_id: str, limit: int, offset: int, *,
                       q: str | None = None, tags: Sequence[str] | None = None
                       ) -> tuple[list[dict], int]:
        """One page of the document lineages the caller sees and the total
        (:func:`rcll.store.documents.list_page`). 403 ``forbidden``, 404 ``bank_not_found``."""
        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            return documents.list_page(conn, bank_id, limit, offset,
                                       rule=rule_for(principal, bank_id), q=q, tags=tags)

    def get_document(self, principal: Principal, bank_id: str, document_id: str) -> dict:
        """The lineage of ``document_id`` the caller sees (its own first, then the newest), with its text
        (:func:`rcll.store.documents.get`). 403 ``forbidden``, 404 ``bank_not_found``,
        404 ``document_not_found`` (also when the caller sees none of it)."""
        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            return documents.get(conn, bank_id, document_id, rule=rule_for(principal, bank_id))

    def chunks(self, principal: Principal, bank_id: str, document_id: str, limit: int,
               offset: int) -> tuple[list[dict], int]:
        """One page of the chunks of ``document_id``'s live version — the lineage
        :meth:`get_document` shows — that hold a unit the caller sees, by index
        (:func:`rcll.store.chunks.page`), and their total. 403 ``forbidden``, 404
        ``bank_not_found``, 404 ``document_not_found`` (also when the caller sees none of
        it)."""
        principal.require(bank_id, "read")
        rule = rule_for(principal, bank_id)
        with self._read() as conn:
            banks.get(conn, bank_id)
            doc = documents.lineage(conn, bank_id, document_id, rule=rule)
            return chunks.page(conn, doc["pk"], limit, offset, rule=rule)

    def chunk(self, principal: Principal, chunk_id: str) -> dict:
        """One chunk by id in any bank the caller may read, while it holds a unit the
        caller sees there (:func:`rcll.store.chunks.get` with
        :func:`rcll.access.visibility.grants_filter`). 404 ``chunk_not_found`` for a
        malformed id, a missing chunk, a chunk of a bank the caller may not read and one
        whose units it may not see — one answer, so no chunk id is confirmed to exist."""
        with self._read() as conn:
            return chunks.get(conn, chunk_id, grants_filter(principal, "u"))

    def history(self, principal: Principal, bank_id: str, document_id: str, limit: int,
                offset: int) -> dict:
        """The changes of ``document_id`` — the lineage :meth:`get_document` shows — newest
        first (:func:`rcll.store.document_events.page`: versions, reprocesses, retags, and
        the lifecycle verbs on its units the caller sees): ``{"document_id", "revision",
        "audience", "purposes", "items", "total"}``. 403 ``forbidden``, 404
        ``bank_not_found`` / ``document_not_found``."""
        principal.require(bank_id, "read")
        rule = rule_for(principal, bank_id)
        with self._read() as conn:
            banks.get(conn, bank_id)
            doc = documents.lineage(conn, bank_id, document_id, rule=rule)
            items, total = document_events.page(conn, doc["pk"], limit, offset, rule=rule)
        return {"document_id": document_id, "revision": doc["revision"],
                "audience": doc["audience"], "purposes": doc["purposes"], "items": items,
                "total": total}

    def retag(self, principal: Principal, bank_id: str, document_id: str,
              tags: Sequence[str]) -> dict:
        """Replace the tags of ``document_id`` — every lineage of it the caller may read, and
        their units it sees (:func:`rcll.store.documents.retag`: the array replaces, ``[]``
        clears) — with a ``retag`` event in each lineage's history and an audit entry
        ``document.retag``; after the commit the units leave tier 1 (their cached tags are
        stale) and the bank's cues are forgotten. A later version of the document sets its
        own tags again. → ``{"document_id", "tags", "lineages", "units"}``. 403
        ``forbidden`` (no write role), 404 ``bank_not_found`` / ``document_not_found``."""
        principal.require(bank_id, "write")
        tags = list(dict.fromkeys(tags))
        svc = self._services
        with svc.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            docs, ids = documents.retag(conn, bank_id, document_id, tags,
                                        rule=rule_for(principal, bank_id))
            for pk in docs:
                document_events.record_retag(conn, pk, principal.member_id, tags, len(ids))
            audit.record(conn, principal.member_id, "document.retag", bank_id,
                         details={"document_id": document_id, "tags": tags, "units": len(ids),
                                  "lineages": len(docs)})
        invalidation.units_left(svc.hot_tier, bank_id, ids)
        invalidation.bank_written(svc.hot_tier, bank_id)
        return {"document_id": document_id, "tags": tags, "lineages": len(docs),
                "units": len(ids)}

    def delete_document(self, principal: Principal, bank_id: str, document_id: str) -> list[str]:
        """Delete what the caller may read of ``document_id``
        (:func:`rcll.store.documents.delete`), audited as ``document.delete``; the mental
        models written from the deleted units lose their content in the same transaction
        (:func:`rcll.store.mental_models.erase_seen`); the deleted units leave tier 1 after
        the commit. Returns their ids. 403 ``forbidden`` (no write
        role), 404 ``bank_not_found``, 404 ``document_not_found`` (missing or invisible:
        one answer)."""
        principal.require(bank_id, "write")
        svc = self._services
        with svc.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            ids = documents.delete(conn, bank_id, document_id,
                                   rule=rule_for(principal, bank_id))
            erased = mental_models.erase_seen(conn, ids, principal.member_id)
            audit.record(conn, principal.member_id, "document.delete", bank_id,
                         details={"document_id": document_id, "units": len(ids),
                                  "mental_models": erased})
        invalidation.units_left(svc.hot_tier, bank_id, ids)
        invalidation.bank_written(svc.hot_tier, bank_id)
        return ids

    def list_memories(self, principal: Principal, bank_id: str, limit: int, offset: int,
                      **filters) -> tuple[list[dict], int]:
        """One page of the bank's units the caller sees and the total
        (:func:`rcll.store.documents.list_units`; ``filters`` are its keyword filters).
        403 ``forbidden``, 404 ``bank_not_found``."""
        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            return documents.list_units(conn, bank_id, limit, offset,
                                        visible=rule_for(principal, bank_id).sql("u"),
                                        **filters)

    def memory_graph(self, principal: Principal, bank_id: str, limit: int,
                     **filters) -> dict:
        """The caller's newest ``limit`` units (``filters`` as :meth:`list_memories`) and the
        links among them (:func:`rcll.store.documents.links_among`, at most
        :data:`GRAPH_LINKS_PER_UNIT` per unit): ``{"units": [...], "links": [...],
        "total": n}`` (``total``: the units the filters match). 403 ``forbidden``, 404
        ``bank_not_found``."""
        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            units, total = documents.list_units(conn, bank_id, limit, 0,
                                                visible=rule_for(principal, bank_id).sql("u"),
                                                **filters)
            links = documents.links_among(conn, [u["id"] for u in units],
                                          GRAPH_LINKS_PER_UNIT * max(1, len(units)))
        return {"units": units, "links": links, "total": total}

    def timeseries(self, principal: Principal, bank_id: str, period: str,
                   time_field: str) -> dict:
        """The caller's live units counted per time bucket and kind
        (:func:`rcll.store.documents.timeseries`). 400 ``invalid_request`` for a period
        not in :data:`~rcll.store.documents.TIMESERIES_PERIODS` (an unknown ``time_field``
        falls back to ``created_at``, as Hindsight's does), 403, 404 ``bank_not_found``."""
        if period not in documents.TIMESERIES_PERIODS:
            raise InvalidInput(f"period must be one of {', '.join(documents.TIMESERIES_PERIODS)}",
                               {"field": "period"})
        if time_field not in documents.TIMESERIES_FIELDS:
            time_field = "created_at"
        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            out = documents.timeseries(conn, bank_id, period, time_field,
                                       visible=rule_for(principal, bank_id).sql("u"))
        return {**out, "period": period, "time_field": time_field}

    def room_hall_grid(self, principal: Principal, bank_id: str) -> dict:
        """The caller's live units of the bank counted per room and hall
        (:func:`rcll.store.documents.room_hall_counts`): ``{"rooms": [room, ...],
        "halls": [hall, ...], "cells": {(room, hall): n}, "total": n}`` — rooms and halls
        in :data:`rcll.hierarchy.ROOMS` / :data:`~rcll.hierarchy.HALLS` order, only those
        holding a unit, ``None`` (unclassified) last. 403 ``forbidden``, 404
        ``bank_not_found``."""
        from rcll.hierarchy import HALLS, ROOMS

        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            rows = documents.room_hall_counts(conn, bank_id,
                                              visible=rule_for(principal, bank_id).sql("u"))
        cells = {(r["room"], r["hall"]): r["n"] for r in rows}

        def order(names, known):
            rank = {n: i for i, n in enumerate(known)}
            return sorted(set(names), key=lambda n: (n is None, rank.get(n, len(known)), n or ""))

        return {"rooms": order((r for r, _ in cells), ROOMS),
                "halls": order((h for _, h in cells), HALLS), "cells": cells,
                "total": sum(cells.values())}

    def tags(self, principal: Principal, bank_id: str, limit: int, offset: int, *,
             q: str | None = None) -> tuple[list[dict], int]:
        """The tags on the units the caller sees (:func:`rcll.store.documents.tags`)."""
        principal.require(bank_id, "read")
        with self._read() as conn:
            banks.get(conn, bank_id)
            return documents.tags(conn, bank_id, limit, offset,
                                  visible=rule_for(principal, bank_id).sql("u"), q=q)

    def clear(self, principal: Principal, bank_id: str,
              kinds: Sequence[str] | None = None) -> list[str]:
        """Delete every unit of the bank (``kinds``: only those), audited as ``bank.clear``;
        the mental models written from them lose their content in the same transaction
        (:func:`rcll.store.mental_models.erase_seen`); tier 1 drops the bank after the
        commit. Admins only: it removes every member's
        memories. 403 ``forbidden``, 404 ``bank_not_found``. Returns the deleted ids."""
        principal.require(bank_id, "admin")
        svc = self._services
        with svc.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            ids = documents.clear_bank(conn, bank_id, kinds)
            erased = mental_models.erase_seen(conn, ids, principal.member_id)
            audit.record(conn, principal.member_id, "bank.clear", bank_id,
                         details={"kinds": list(kinds) if kinds else None, "units": len(ids),
                                  "mental_models": erased})
        invalidation.bank_dropped(svc.hot_tier, bank_id)
        return ids
