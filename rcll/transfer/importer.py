"""Load an ``rcll-bank`` stream (:mod:`rcll.transfer.format`) into a bank, in one transaction.

:func:`import_stream` checks every line (:func:`rcll.transfer.format.read_stream`) and writes
the records in batches of :data:`BATCH` inside the caller's transaction, so the bank holds
the whole export or — on any error — nothing of it; memory holds one batch. References that
may point forward (a unit's ``superseded_by_id``, an entity's ``merged_into_id``) go to a
temporary table and are set at the end, when every row exists; a reference to a row the
export does not hold (an export by a member leaves out what it may not see) is dropped.

Ids: ``ids="keep"`` writes the export's ids (a restore into another deployment: the same
ids, so the same tie-breaks and the same recall results); ``ids="new"`` derives every id as
``uuid5(NAMESPACE, "<target bank>/<id>")`` (an import beside the source bank in the same
deployment; deterministic, so references map without a lookup table). Vectors are written
when the export carries them for the same embedder model and input stamp as this
deployment's; otherwise units are written without and embedded after the commit
(:func:`rcll.retain.pipeline.embed_missing`, the path that repairs a lost vector index).
Jobs do not transfer: units keep ``job_id`` NULL, closets ``job_id`` NULL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.transfer import format as fmt
from rcll.transfer.format import ExportLineError

BATCH = 1000
NAMESPACE = uuid.UUID("6f1d3c1e-6a0b-4c1e-9d43-2b8e1c0a7e55")  # RCLL bank import ids


@dataclass
class ImportResult:
    """What an import wrote: ``counts`` per record type, ``vectors`` written from the
    export, ``to_embed`` units left for the embedder, ``grants_skipped`` (member unknown
    here), ``header`` the export's header."""

    header: fmt.Header | None = None
    counts: dict[str, int] = field(default_factory=dict)
    vectors: int = 0
    to_embed: int = 0
    grants_skipped: int = 0
    lines: int = 0

    def to_json(self) -> dict:
        h = self.header
        return {"counts": self.counts, "vectors_imported": self.vectors,
                "units_to_embed": self.to_embed, "grants_skipped": self.grants_skipped,
                "lines": self.lines,
                "source_bank_id": h.bank.id if h else None,
                "source_model": h.embedding.model if h and h.embedding else None}


def id_mapper(bank_id: str, mode: str) -> Callable[[object], str | None]:
    """The id map of an import (module doc): identity for ``keep``, uuid5 for ``new``."""
    if mode == "keep":
        return lambda v: None if v is None else str(v)
    if mode != "new":
        raise ValueError(f"ids must be keep or new, not {mode!r}")
    return lambda v: None if v is None else str(uuid.uuid5(NAMESPACE, f"{bank_id}/{v}"))


def _vec(values: list[float] | None) -> str | None:
    return None if values is None else "[" + ",".join(repr(float(x)) for x in values) + "]"


class _Writer:
    """Buffers records of one type and writes them with one ``executemany`` per batch."""

    def __init__(self, conn: Connection, bank_id: str, m, *, vectors_ok: bool, model: str,
                 stamp: str, dim: int, result: ImportResult) -> None:
        self.conn, self.bank, self.m = conn, bank_id, m
        self.vectors_ok, self.model, self.stamp, self.dim = vectors_ok, model, stamp, dim
        self.result = result
        self.buf: list[tuple[int, object]] = []
        self.kind: str | None = None

    def add(self, line: int, rec) -> None:
        if rec.type != self.kind:
            self.flush()
            self.kind = rec.type
        self.buf.append((line, rec))
        if len(self.buf) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.buf:
            return
        rows, self.buf = self.buf, []
        getattr(self, f"_w_{self.kind}")(rows)
        self.result.counts[self.kind] = self.result.counts.get(self.kind, 0) + len(rows)

    def _many(self, sql: str, params: list) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(sql, params)

    def _missing(self, rows, table: str, refs: Callable) -> None:
        """Raise :class:`ExportLineError` at the first row referring (``refs(rec)``: the
        export's ids) to a row of ``table`` that is not in the bank (written earlier in this
        import); the message names the export's id."""
        m = self.m
        wanted = {m(r) for _, rec in rows for r in refs(rec) if r is not None}
        if not wanted:
            return
        found = {str(r["id"]) for r in self.conn.execute(
            f"SELECT id FROM {table} WHERE id = ANY(%s::uuid[])", (list(wanted),))}
        for line, rec in rows:
            for r in refs(rec):
                if r is not None and m(r) not in found:
                    raise ExportLineError(line, f"{rec.type} record refers to {r}, which is "
                                                f"not among the export's earlier records")

    def _w_document(self, rows) -> None:
        m = self.m
        self._many(
            """INSERT INTO documents (id, bank_id, document_id, content_hash, metadata,
                   created_at, updated_at, revision, version_seq, version_item, tags, context,
                   mentioned_at, audience, purposes)
               VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)""",
            [(m(r.id), self.bank, r.document_id, r.content_hash, Jsonb(r.metadata),
              r.created_at, r.updated_at, r.revision, r.version_seq, r.version_item, r.tags,
              r.context, r.mentioned_at, r.audience, r.purposes) for _, r in rows])

    def _w_chunk(self, rows) -> None:
        m = self.m
        self._missing(rows, "documents", lambda r: [r.document_id])
        self._many(
            """INSERT INTO chunks (id, document_id, "index", text, content_hash)
               VALUES (%s,%s,%s,%s,%s)""",
            [(m(r.id), m(r.document_id), r.index, r.text, r.content_hash) for _, r in rows])

    def _w_entity(self, rows) -> None:
        m = self.m
        self._many(
            """INSERT INTO entities (id, bank_id, name, normalized, entity_type, aliases,
                   created_at, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)""",
            [(m(r.id), self.bank, r.name, r.normalized, r.entity_type, r.aliases,
              r.created_at, r.updated_at) for _, r in rows])
        self._defer("entity", [(m(r.id), m(r.merged_into_id)) for _, r in rows
                               if r.merged_into_id is not None])

    def _defer(self, kind: str, pairs: list[tuple[str, str]]) -> None:
        if pairs:
            self._many("INSERT INTO _rcll_import_refs (kind, id, ref) VALUES (%s, %s, %s)",
                       [(kind, a, b) for a, b in pairs])

    def _w_unit(self, rows) -> None:
        m = self.m
        self._missing(rows, "documents", lambda r: [r.document_id])
        self._missing(rows, "chunks", lambda r: [r.chunk_id])
        self._many(
            """INSERT INTO memory_units (id, bank_id, document_id, chunk_id, chunk_hash, kind,
                   text, context, room, hall, layer, audience, purposes, origin, confidence,
                   revision, invalidated_reason, occurred_start, occurred_end, mentioned_at,
                   created_at, metadata, tags, token_count, document_revision,
                   extraction_version, entity_names, forgotten_at, nb_len, heading)
               VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,
                       %s,%s,%s,%s,%s,%s,%s)""",
            [(m(r.id), self.bank, m(r.document_id), m(r.chunk_id), r.chunk_hash, r.kind,
              r.text, r.context, r.room, r.hall, r.layer, r.audience, r.purposes, r.origin,
              r.confidence, r.revision, r.invalidated_reason, r.occurred_start,
              r.occurred_end, r.mentioned_at, r.created_at, Jsonb(r.metadata), r.tags,
              r.token_count, r.document_revision, r.extraction_version, r.entity_names,
              r.forgotten_at, r.nb_len, r.heading) for _, r in rows])
        self._defer("unit", [(m(r.id), m(r.superseded_by_id)) for _, r in rows
                             if r.superseded_by_id is not None])
        revs = [(m(r.id), v.revision, v.text, Jsonb(v.fields), v.changed_by, v.changed_at)
                for _, r in rows for v in r.revisions]
        if revs:
            self._many("""INSERT INTO memory_unit_revisions (unit_id, revision, text, fields,
                              changed_by, changed_at) VALUES (%s,%s,%s,%s,%s,%s)""", revs)
        fb = [(m(r.id), self.bank, r.feedback.success, r.feedback.failure,
               r.feedback.updated_at) for _, r in rows if r.feedback is not None]
        if fb:
            self._many("""INSERT INTO unit_feedback (unit_id, bank_id, success, failure,
                              updated_at) VALUES (%s,%s,%s,%s,coalesce(%s, now()))""", fb)
        vecs = []
        for line, r in rows:
            if self.vectors_ok and r.vector is not None:
                if len(r.vector) != self.dim:
                    raise ExportLineError(line, f"unit vector has {len(r.vector)} values; "
                                                f"the header's embedding dim is {self.dim}")
                vecs.append((m(r.id), self.bank, self.model, self.stamp, _vec(r.vector)))
            else:
                self.result.to_embed += 1
        if vecs:
            self._many("""INSERT INTO memory_embeddings (unit_id, bank_id, model, input_stamp,
                              embedding) VALUES (%s,%s,%s,%s,%s::vector)""", vecs)
            self.result.vectors += len(vecs)

    def _w_link(self, rows) -> None:
        m = self.m
        self._missing(rows, "memory_units", lambda r: [r.from_unit, r.to_unit])
        self._many(
            """INSERT INTO memory_links (from_unit, to_unit, bank_id, type, weight, created_at)
               VALUES (%s,%s,%s,%s,%s,%s)""",
            [(m(r.from_unit), m(r.to_unit), self.bank, r.link_type, r.weight, r.created_at)
             for _, r in rows])

    def _w_mention(self, rows) -> None:
        m = self.m
        self._missing(rows, "memory_units", lambda r: [r.unit_id])
        self._missing(rows, "entities", lambda r: [r.entity_id])
        self._many(
            """INSERT INTO unit_entities (unit_id, entity_id, bank_id, mention, source)
               VALUES (%s,%s,%s,%s,%s)""",
            [(m(r.unit_id), m(r.entity_id), self.bank, r.mention, r.source) for _, r in rows])

    def _w_closet(self, rows) -> None:
        m = self.m
        self._missing(rows, "memory_units", lambda r: [r.unit_id])
        self._many(
            """INSERT INTO closets (id, bank_id, room, hall, summary, unit_id, embedding, model,
                   prompt_version, source_unit_ids, created_at)
               VALUES (%s,%s,%s,%s,%s,%s,%s::vector,%s,%s,%s::uuid[],%s)""",
            [(m(r.id), self.bank, r.room, r.hall, r.summary, m(r.unit_id),
              _vec(r.vector) if self.vectors_ok and r.model == self.model else None,
              r.model if self.vectors_ok and r.model == self.model else None,
              r.prompt_version, [m(s) for s in r.source_unit_ids], r.created_at)
             for _, r in rows])

    def _w_grant(self, rows) -> None:
        known = {r["id"] for r in self.conn.execute(
            "SELECT id FROM members WHERE id = ANY(%s)", ([r.member_id for _, r in rows],))}
        keep = [(r.member_id, self.bank, r.role, r.purposes) for _, r in rows
                if r.member_id in known]
        self.result.grants_skipped += len(rows) - len(keep)
        if keep:
            self._many("""INSERT INTO bank_grants (member_id, bank_id, role, purposes)
                          VALUES (%s,%s,%s,%s) ON CONFLICT (member_id, bank_id) DO NOTHING""",
                       keep)

    def _w_end(self, rows) -> None:
        pass


def import_stream(conn: Connection, lines: Iterable, bank_id: str, *, ids: str,
                  model: str | None, stamp: str | None, dim: int, grants: bool = True,
                  on_progress: Callable[[ImportResult], None] | None = None) -> ImportResult:
    """Write the export read from ``lines`` into ``bank_id`` (which exists and is empty) in
    the caller's open transaction. ``ids``: ``keep`` or ``new`` (module doc); ``model``,
    ``stamp``, ``dim``: this deployment's embedder (``None``: no vectors kept). ``grants``:
    write the export's grants (members unknown here are skipped and counted). The bank's
    name and config are set from the header. ``on_progress(result)`` after each batch.
    Raises :class:`ExportLineError` for a bad line (nothing is written: roll back)."""
    result = ImportResult()
    conn.execute("""CREATE TEMP TABLE IF NOT EXISTS _rcll_import_refs
                    (kind text, id uuid, ref uuid) ON COMMIT DROP""")
    m = id_mapper(bank_id, ids)
    writer: _Writer | None = None
    for line, rec in fmt.read_stream(lines):
        result.lines = line
        if isinstance(rec, fmt.Header):
            result.header = rec
            emb = rec.embedding
            ok = bool(rec.vectors and emb and model and emb.model == model
                      and emb.input_stamp == stamp and emb.dim == dim)
            conn.execute("UPDATE memory_banks SET name = %s, config = config || %s WHERE id = %s",
                         (rec.bank.name, Jsonb(rec.bank.config), bank_id))
            writer = _Writer(conn, bank_id, m, vectors_ok=ok, model=model or "",
                             stamp=stamp or "", dim=dim, result=result)
            continue
        if rec.type == "grant" and not grants:
            continue
        before = writer.kind
        writer.add(line, rec)
        if on_progress and (writer.kind != before or not writer.buf):
            on_progress(result)
    writer.flush()
    conn.execute("""UPDATE memory_units u SET superseded_by_id = r.ref FROM _rcll_import_refs r
                    WHERE r.kind = 'unit' AND u.id = r.id
                      AND EXISTS (SELECT 1 FROM memory_units t WHERE t.id = r.ref)""")
    conn.execute("""UPDATE entities e SET merged_into_id = r.ref FROM _rcll_import_refs r
                    WHERE r.kind = 'entity' AND e.id = r.id
                      AND EXISTS (SELECT 1 FROM entities t WHERE t.id = r.ref)""")
    conn.execute("DELETE FROM _rcll_import_refs")
    result.counts.pop("end", None)
    return result
