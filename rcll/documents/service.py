"""The documents service: list, read and delete documents; list a bank's memories and
tags; clear a bank — the one implementation HTTP, MCP and the CLI call.

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
from rcll.access.visibility import rule_for
from rcll.cascade import invalidation
from rcll.db import read_only
from rcll.errors import NotFound
from rcll.store import audit, banks, document_views, documents

if TYPE_CHECKING:

    from rcll.bootstrap import Services


class ChunkNotFound(NotFound):
    code = "chunk_not_found"


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

    def delete_document(self, principal: Principal, bank_id: str, document_id: str) -> list[str]:
        """Delete what the caller may read of ``document_id``
        (:func:`rcll.store.documents.delete`), audited as ``document.delete``; the deleted
        units leave tier 1 after the commit. Returns their ids. 403 ``forbidden`` (no write
        role), 404 ``bank_not_found``, 404 ``document_not_found`` (missing or invisible:
        one answer)."""
        principal.require(bank_id, "write")
        svc = self._services
        with svc.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            ids = documents.delete(conn, bank_id, document_id,
                                   rule=rule_for(principal, bank_id))
            audit.record(conn, principal.member_id, "document.delete", bank_id,
                         details={"document_id": document_id, "units": len(ids)})
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
        tier 1 drops the bank after the commit. Admins only: it removes every member's
        memories. 403 ``forbidden``, 404 ``bank_not_found``. Returns the deleted ids."""
        principal.require(bank_id, "admin")
        svc = self._services
        with svc.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            ids = documents.clear_bank(conn, bank_id, kinds)
            audit.record(conn, principal.member_id, "bank.clear", bank_id,
                         details={"kinds": list(kinds) if kinds else None, "units": len(ids)})
        invalidation.bank_dropped(svc.hot_tier, bank_id)
        return ids

    # -- Hindsight's document family (issue 25 item 2) --------------------------------------
    def chunks(self, principal: Principal, bank_id: str, document_id: str, limit: int,
               offset: int) -> tuple[list[dict], int]:
        """The chunks of the document lineage the caller sees that hold a unit it sees,
        in order (:func:`rcll.store.document_views.chunks`). 403, 404 ``bank_not_found`` /
        ``document_not_found``."""
        principal.require(bank_id, "read")
        rule = rule_for(principal, bank_id)
        with self._read() as conn:
            banks.get(conn, bank_id)
            doc = document_views.lineage(conn, bank_id, document_id, rule=rule)
            return document_views.chunks(conn, doc["pk"], limit, offset, rule=rule)

    def chunk(self, principal: Principal, chunk_id: str) -> dict:
        """One chunk by id (``/v1/default/chunks/{id}``: no bank in the path). 404
        ``chunk_not_found`` when it does not exist, or the caller may not read its bank or
        sees no unit on it — one answer."""
        missing = ChunkNotFound(f"chunk {chunk_id!r} does not exist", {"chunk_id": chunk_id})
        with self._read() as conn:
            bank_id = document_views.chunk_bank(conn, chunk_id)
            if bank_id is None or not principal.can(bank_id, "read"):
                raise missing
            row = document_views.chunk(conn, chunk_id, rule=rule_for(principal, bank_id))
        if row is None:
            raise missing
        return row

    def history(self, principal: Principal, bank_id: str, document_id: str) -> list[dict]:
        """The document's events as the caller sees them, newest first
        (:func:`rcll.store.document_views.history`). 403, 404."""
        principal.require(bank_id, "read")
        rule = rule_for(principal, bank_id)
        with self._read() as conn:
            banks.get(conn, bank_id)
            doc = document_views.lineage(conn, bank_id, document_id, rule=rule)
            return document_views.history(conn, bank_id, doc["pk"], rule=rule)

    def retag(self, principal: Principal, bank_id: str, document_id: str,
              tags: Sequence[str]) -> list[str]:
        """Replace the tags of the document lineage the caller sees and of its units it
        sees (``write``); audit ``document.retag``; those units leave tier 1 after the
        commit (their cached tags changed). Returns their ids. 403, 404."""
        principal.require(bank_id, "write")
        rule = rule_for(principal, bank_id)
        svc = self._services
        with svc.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            doc = document_views.lineage(conn, bank_id, document_id, rule=rule)
            ids = document_views.retag(conn, doc["pk"], tags, rule=rule)
            audit.record(conn, principal.member_id, "document.retag", bank_id, details={
                "document_id": document_id, "document_pk": str(doc["pk"]),
                "tags": list(tags), "units": len(ids)})
        invalidation.units_left(svc.hot_tier, bank_id, ids)
        invalidation.bank_written(svc.hot_tier, bank_id)
        return ids

    def reprocess(self, principal: Principal, bank_id: str, document_id: str, retain) -> dict:
        """Run the document's stored text (what :meth:`get_document` shows the caller) through
        the retain pipeline again as a new queued job of ``retain``
        (:class:`rcll.retain.service.RetainService`), with its document id, tags, metadata,
        audience and purposes; chunks already stored are kept (idempotent by content),
        anything the current pipeline makes differently is written. Audit
        ``document.reprocess``. Returns the job. 403, 404, and the retain errors."""
        from rcll.retain.models import RetainItem

        principal.require(bank_id, "write")
        rule = rule_for(principal, bank_id)
        with self._read() as conn:
            banks.get(conn, bank_id)
            doc = documents.get(conn, bank_id, document_id, rule=rule)
            lin = document_views.lineage(conn, bank_id, document_id, rule=rule)
        if not doc.get("original_text"):
            raise documents._not_found(bank_id, document_id)
        item = RetainItem(content=doc["original_text"], document_id=document_id,
                          tags=list(doc["tags"]), metadata=doc["document_metadata"] or {},
                          audience=lin["audience"], purposes=list(lin["purposes"]))
        job, _ = retain.retain(bank_id, [item], async_=True, principal=principal)
        with self._services.pool.connection() as conn, conn.transaction():
            audit.record(conn, principal.member_id, "document.reprocess", bank_id, details={
                "document_id": document_id, "document_pk": str(lin["pk"]),
                "operation_id": str(job["id"])})
        return job
