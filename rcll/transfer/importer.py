"""Load an ``rcll-bank`` stream (:mod:`rcll.transfer.format`) into one bank, inside the
caller's transaction, a batch at a time.

:class:`Importer` checks every line (:func:`rcll.transfer.format.parse_record`) and writes
the records with ``COPY`` in batches of :data:`BATCH_ROWS` rows (or :data:`BATCH_BYTES` of
lines), so memory holds one batch and the bank holds the whole export or — the caller rolls
back on any error — nothing of it. Before a batch is written its references are checked
against what this import wrote so far (the target bank was empty, so every row of it is the
import's): a chunk's document, a unit's document and chunk, a link's two units, a mention's
unit and entity, a closet's and a proposal's units — a reference to anything else (a row of
another bank included) is a :class:`~rcll.transfer.format.FormatError` naming the line. Ids
already taken in this database are 409 ``ids_in_use``. References that may point forward (a
unit's ``superseded_by_id``, an entity's ``merged_into_id``) go to a temporary table and are
set at the end; one to a row the export does not hold (an export limited to what its caller
may see) is dropped — a unit whose successor is missing stays out of recall
(``invalidated_reason`` ``superseded``).

Ids (``ids``): ``keep`` writes the export's own ids — a restore or a move to another
deployment, where the same ids give the same tie-breaks and the same lexical sample, so the
same recall results; ``new`` moves every id by a shift of its time part (:func:`id_mapper`)
— an import beside its source in the same database (a clone): deterministic, so references
map without a lookup table, and order-preserving, so ties broken by id fall as in the
source; ``auto`` is ``new`` when a bank with the export's source id exists here under
another id than the target, else ``keep``. Either way an id that exists already is refused
(409 ``ids_in_use``), never overwritten.

Vectors are written when the header's embedder (model, dimension, input stamp) is this
deployment's; otherwise, and for a unit that came without one, the unit is left for the
embedder (the caller's ``import_embed`` job). Document versions are re-sequenced
(``version_seq`` 0): a retain into the imported bank is newer than every imported version.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import psycopg
from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.access.principal import Principal
from rcll.access.purposes import unit_access
from rcll.errors import Rejected
from rcll.transfer import format as fmt
from rcll.transfer.export import Embedding
from rcll.transfer.format import FormatError

BATCH_ROWS = 1000
BATCH_BYTES = 8 << 20
SHIFT_RANGE = 1 << 20  # new ids: the time part moved by up to 2**20 ms (about 17 minutes)
IDS = ("auto", "keep", "new")


@dataclass
class ImportResult:
    """What an import wrote: ``counts`` per record type, ``vectors_reused`` (written from the
    export), ``units_to_embed`` (left for the embedder), ``grants_applied`` /
    ``grants_skipped`` (member unknown here, or a purpose not configured),
    ``dangling`` (forward references to rows the export does not hold), ``ids``
    (the mode used), ``lines`` read, the export's ``header``."""

    header: fmt.Header | None = None
    ids: str = "keep"
    counts: dict[str, int] = field(default_factory=dict)
    vectors_reused: int = 0
    units_to_embed: int = 0
    grants_applied: list[str] = field(default_factory=list)
    grants_skipped: list[str] = field(default_factory=list)
    dangling: int = 0
    lines: int = 0

    def to_json(self) -> dict:
        h = self.header
        return {"counts": dict(self.counts), "ids": self.ids,
                "vectors_reused": self.vectors_reused, "units_to_embed": self.units_to_embed,
                "grants_applied": len(self.grants_applied),
                "grants_skipped": self.grants_skipped[:50], "dangling_references": self.dangling,
                "lines": self.lines,
                "source_bank_id": h.bank.id if h else None,
                "source_embedding": h.embedding.model_dump() if h and h.embedding else None}


def id_shift(bank_id: str, source_bank_id: str) -> int:
    """The shift of ``new`` ids: 1 to 2**20, from a hash of the two bank ids."""
    digest = hashlib.sha256(f"{source_bank_id}\x00{bank_id}".encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") % SHIFT_RANGE


def id_mapper(bank_id: str, mode: str, source_bank_id: str = ""
              ) -> Callable[[uuid.UUID | None], uuid.UUID | None]:
    """The id map of an import (module doc): identity for ``keep``; for ``new``, each id's
    top 48 bits (a UUIDv7's millisecond time) plus :func:`id_shift`, modulo 2**128 — the
    version and variant bits stay, and the map keeps the order of ids (a shifted id wraps
    only from the top 2**-28 of the range), so every tie a query breaks by id falls the same
    way in the copy as in its source."""
    if mode == "keep":
        return lambda v: v
    if mode != "new":
        raise ValueError(f"ids must be keep or new, not {mode!r}")
    delta = id_shift(bank_id, source_bank_id) << 80
    return lambda v: None if v is None else uuid.UUID(int=(v.int + delta) % (1 << 128))


def ids_in_use(table: str, some: object) -> Rejected:
    return Rejected(409, "ids_in_use",
                    f"the export's ids are already used in this database ({table} {some}): it "
                    "was imported here before, or its source bank is here; import with "
                    "ids=new", {"table": table, "id": str(some)})


def _pairs(a, b):
    return (a, b) if a < b else (b, a)


class Importer:
    """One import into ``bank_id`` (which exists, is empty and is locked by the caller's
    open transaction on ``conn``). ``ids``: :data:`IDS`; ``emb``: this deployment's embedder;
    ``purposes``: the configured purpose set; ``principal``: the importer, held to the write
    rule of a retain for every unit's and document's audience and purposes
    (:meth:`_check_access`; ``None``: an internal call);
    ``grants``: write the export's grants (members unknown here are skipped); ``data`` /
    ``config``: restore the records / the bank's name and config (Hindsight's
    ``include_data`` / ``include_bank_config``); ``job_id``: the import's job, stamped on
    every unit (its embed step finds the units left without a vector by it);
    ``on_progress(result)`` after every batch."""

    def __init__(self, conn: Connection, bank_id: str, *, ids: str, emb: Embedding,
                 purposes: Iterable[str], principal: Principal | None = None,
                 grants: bool = True, data: bool = True, config: bool = True,
                 job_id: str | None = None,
                 on_progress: Callable[[ImportResult], None] | None = None) -> None:
        if ids not in IDS:
            raise ValueError(f"ids must be one of {IDS}")
        self.conn, self.bank, self.mode, self.emb = conn, bank_id, ids, emb
        self.known = tuple(purposes)
        self.purposes = frozenset(self.known)
        self.principal = principal
        self._allowed: set[tuple] = set()
        self.grants, self.data, self.config, self.job_id = grants, data, config, job_id
        self.on_progress = on_progress
        self.result = ImportResult()
        self.m: Callable = id_mapper(bank_id, "keep")
        self.vectors_ok = False
        self._buf: list[tuple[int, fmt._Rec]] = []
        self._buf_bytes = 0
        self._kind: str | None = None

    # -- driving ---------------------------------------------------------------------------
    def run(self, lines: Iterable[tuple[int, bytes]]) -> ImportResult:
        """Read ``lines`` (``(line number, raw line)``, header first) to the end record and
        write them. Raises :class:`FormatError` (a bad line, a reference to nothing, a
        stream without its end record) or ``Rejected`` 409 ``ids_in_use``; the caller rolls
        back."""
        after: str | None = None
        seen: dict[str, int] = {}
        ended = False
        last = 0
        for n, raw in lines:
            last = n
            self.result.lines = n
            if self.result.header is None:
                self._header(fmt.parse_header(raw))
                continue
            rec = fmt.parse_record(raw, n, after)
            kind = rec.type  # type: ignore[attr-defined]
            after = kind
            if kind == "end":
                if rec.counts != seen:  # type: ignore[attr-defined]
                    raise FormatError(n, f"the end record counts {rec.counts} but the export "  # type: ignore[attr-defined]
                                         f"holds {seen}")
                ended = True
                continue
            seen[kind] = seen.get(kind, 0) + 1
            if not self.data and kind != "grant":
                continue
            if kind == "grant" and not self.grants:
                continue
            self._add(n, rec, len(raw))
        if self.result.header is None:
            raise FormatError(1, "empty: an export starts with its header line")
        if not ended:
            raise FormatError(last + 1, "the export ends without its end record (cut short?)")
        self._flush()
        self._finish_refs()
        return self.result

    def _header(self, head: fmt.Header) -> None:
        self.result.header = head
        mode = self.mode
        if mode == "auto":
            other = head.bank.id != self.bank and self.conn.execute(
                "SELECT 1 FROM memory_banks WHERE id = %s", (head.bank.id,)).fetchone()
            mode = "new" if other else "keep"
        self.result.ids = mode
        self.m = id_mapper(self.bank, mode, head.bank.id)
        e = head.embedding
        self.vectors_ok = bool(head.vectors and e is not None and self.emb.model
                               and e.model == self.emb.model and e.dim == self.emb.dim
                               and e.input_stamp == self.emb.stamp)
        if self.config:
            name = self.bank if head.bank.name == head.bank.id else head.bank.name
            self.conn.execute("UPDATE memory_banks SET name = %s, config = %s WHERE id = %s",
                              (name, Jsonb(head.bank.config), self.bank))
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS _rcll_import_refs "
                          "(kind text, id uuid, ref uuid) ON COMMIT DROP")
        self.conn.execute("DELETE FROM _rcll_import_refs")

    def _add(self, n: int, rec: fmt._Rec, size: int) -> None:
        kind = rec.type  # type: ignore[attr-defined]
        if kind != self._kind:
            self._flush()
            self._kind = kind
        self._buf.append((n, rec))
        self._buf_bytes += size
        if len(self._buf) >= BATCH_ROWS or self._buf_bytes >= BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        rows, self._buf, self._buf_bytes = self._buf, [], 0
        kind = self._kind
        try:
            getattr(self, f"_w_{kind}")(rows)
        except (psycopg.errors.IntegrityError, psycopg.errors.DataError) as exc:
            diag = exc.diag
            text = diag.message_primary or str(exc)
            if diag.message_detail:
                text += f" ({diag.message_detail})"
            raise FormatError(rows[0][0], f"{kind} records of lines {rows[0][0]}-{rows[-1][0]} "
                                          f"cannot be stored: {text}") from None
        self.result.counts[kind] = self.result.counts.get(kind, 0) + len(rows)
        if self.on_progress is not None:
            self.on_progress(self.result)

    # -- checks ----------------------------------------------------------------------------
    def _fresh(self, table: str, rows, ids: Callable) -> None:
        """Raise 409 ``ids_in_use`` (or a :class:`FormatError` for an id the export holds
        twice) when one of the batch's new ids exists already."""
        wanted = [i for _, r in rows for i in ids(r)]
        found = self.conn.execute(f"SELECT id, bank_id FROM {table} WHERE id = ANY(%s::uuid[])",
                                  (wanted,)).fetchall() if table != "chunks" else \
            self.conn.execute("""SELECT c.id, d.bank_id FROM chunks c
                                 JOIN documents d ON d.id = c.document_id
                                 WHERE c.id = ANY(%s::uuid[])""", (wanted,)).fetchall()
        if not found:
            seen: set = set()
            for n, r in rows:
                for i in ids(r):
                    if i in seen:
                        raise FormatError(n, f"{r.type} id {i} appears twice")  # type: ignore[attr-defined]
                    seen.add(i)
            return
        hit = found[0]
        if hit["bank_id"] != self.bank:
            raise ids_in_use(table, hit["id"])
        for n, r in rows:
            if hit["id"] in ids(r):
                raise FormatError(n, f"{r.type} id {hit['id']} appears twice")  # type: ignore[attr-defined]
        raise FormatError(rows[0][0], f"{table} id {hit['id']} appears twice")

    def _present(self, rows, what: str, refs: Callable, sql: str) -> None:
        """Raise a :class:`FormatError` at the first row of the batch whose references
        (``refs(rec)``: mapped ids, ``None`` skipped) are not rows of this bank written
        earlier by the import (``sql``: ``SELECT id … WHERE id = ANY(%(ids)s) AND
        <in this bank>``)."""
        wanted = {i for _, r in rows for i in refs(r) if i is not None}
        if not wanted:
            return
        found = {r["id"] for r in self.conn.execute(
            sql, {"ids": list(wanted), "bank": self.bank}).fetchall()}
        if len(found) == len(wanted):
            return
        for n, r in rows:
            for i in refs(r):
                if i is not None and i not in found:
                    raise FormatError(n, f"{r.type} record refers to {what} "  # type: ignore[attr-defined]
                                         f"{self._shown(i)}, which is not among the export's "
                                         f"earlier records")

    def _shown(self, mapped):
        return mapped if self.result.ids == "keep" else f"(mapped) {mapped}"

    def _check_access(self, n: int, rec) -> None:
        """The write rule of a retain (:func:`rcll.access.purposes.unit_access`) for the
        record's ``audience`` and ``purposes``: purposes this deployment configures, one of
        them granted to the importer, an audience of ``'bank'``, the importer itself or —
        for a deployment admin — another member. Raises its 400 / 403, naming the line."""
        key = (rec.audience, tuple(rec.purposes))
        if key in self._allowed:
            return
        try:
            unit_access(self.principal, self.bank, rec.audience, rec.purposes,
                        known=self.known)
        except Rejected as exc:
            raise Rejected(exc.status, exc.code, f"line {n}: {rec.type} record: {exc.message}",
                           {**exc.details, "line": n}) from None
        self._allowed.add(key)

    _UNITS = "SELECT id FROM memory_units WHERE id = ANY(%(ids)s::uuid[]) AND bank_id = %(bank)s"
    _DOCS = "SELECT id FROM documents WHERE id = ANY(%(ids)s::uuid[]) AND bank_id = %(bank)s"
    _CHUNKS = ("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
               "WHERE c.id = ANY(%(ids)s::uuid[]) AND d.bank_id = %(bank)s")
    _ENTITIES = "SELECT id FROM entities WHERE id = ANY(%(ids)s::uuid[]) AND bank_id = %(bank)s"

    def _copy(self, sql: str, rows: Iterable[tuple]) -> None:
        with self.conn.cursor() as cur, cur.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)

    def _defer(self, kind: str, pairs: list[tuple]) -> None:
        if pairs:
            self._copy("COPY _rcll_import_refs (kind, id, ref) FROM STDIN",
                       ((kind, a, b) for a, b in pairs))

    # -- writers, one per record type ------------------------------------------------------
    def _w_document(self, rows) -> None:
        m = self.m
        for n, r in rows:
            self._check_access(n, r)
        self._fresh("documents", rows, lambda r: [m(r.id)])
        self._copy(
            """COPY documents (id, bank_id, document_id, content_hash, metadata, created_at,
                   updated_at, revision, version_seq, version_item, tags, context,
                   mentioned_at, audience, purposes) FROM STDIN""",
            ((m(r.id), self.bank, r.document_id, r.content_hash, Jsonb(r.metadata),
              r.created_at, r.updated_at, r.revision, 0, r.version_item, r.tags, r.context,
              r.mentioned_at, r.audience, r.purposes) for _, r in rows))

    def _w_chunk(self, rows) -> None:
        m = self.m
        self._present(rows, "document", lambda r: [m(r.document_id)], self._DOCS)
        self._fresh("chunks", rows, lambda r: [m(r.id)])
        self._copy('COPY chunks (id, document_id, "index", text, content_hash) FROM STDIN',
                   ((m(r.id), m(r.document_id), r.index, r.text, r.content_hash)
                    for _, r in rows))

    def _w_entity(self, rows) -> None:
        m = self.m
        self._fresh("entities", rows, lambda r: [m(r.id)])
        self._copy(
            """COPY entities (id, bank_id, name, normalized, entity_type, aliases, created_at,
                   updated_at) FROM STDIN""",
            ((m(r.id), self.bank, r.name, r.normalized, r.entity_type, r.aliases,
              r.created_at, r.updated_at) for _, r in rows))
        self._defer("entity", [(m(r.id), m(r.merged_into_id)) for _, r in rows
                               if r.merged_into_id is not None])

    def _w_unit(self, rows) -> None:
        m, dim = self.m, self.emb.dim
        for n, r in rows:
            self._check_access(n, r)
            if self.vectors_ok and r.vector is not None and len(r.vector) != dim:
                raise FormatError(n, f"unit vector has {len(r.vector)} values; the header's "
                                     f"embedding dim is {dim}")
        self._present(rows, "document", lambda r: [m(r.document_id)], self._DOCS)
        self._present(rows, "chunk", lambda r: [m(r.chunk_id)], self._CHUNKS)
        self._fresh("memory_units", rows, lambda r: [m(r.id)])
        self._copy(
            """COPY memory_units (id, bank_id, document_id, chunk_id, chunk_hash, job_id, kind,
                   text, context, heading, room, hall, layer, audience, purposes, origin,
                   confidence, revision, invalidated_reason, occurred_start, occurred_end,
                   mentioned_at, created_at, forgotten_at, metadata, tags, token_count,
                   document_revision, extraction_version, entity_names, nb_len) FROM STDIN""",
            ((m(r.id), self.bank, m(r.document_id), m(r.chunk_id), r.chunk_hash, self.job_id,
              r.kind, r.text, r.context, r.heading, r.room, r.hall, r.layer, r.audience,
              r.purposes, r.origin, r.confidence, r.revision, r.invalidated_reason,
              r.occurred_start, r.occurred_end, r.mentioned_at, r.created_at, r.forgotten_at,
              Jsonb(r.metadata), r.tags, r.token_count, r.document_revision,
              r.extraction_version, r.entity_names, r.nb_len) for _, r in rows))
        self._defer("unit", [(m(r.id), m(r.superseded_by_id)) for _, r in rows
                             if r.superseded_by_id is not None])
        revs = [(m(r.id), v.revision, v.text, Jsonb(v.fields), v.changed_by, v.changed_at)
                for _, r in rows for v in r.revisions]
        if revs:
            self._copy("""COPY memory_unit_revisions (unit_id, revision, text, fields,
                              changed_by, changed_at) FROM STDIN""", revs)
        fb = [(m(r.id), self.bank, r.feedback.success, r.feedback.failure,
               r.feedback.updated_at or r.created_at) for _, r in rows if r.feedback is not None]
        if fb:
            self._copy("""COPY unit_feedback (unit_id, bank_id, success, failure, updated_at)
                          FROM STDIN""", fb)
        vecs = [(m(r.id), self.bank, self.emb.model, self.emb.stamp, _vector(r.vector))
                for _, r in rows if self.vectors_ok and r.vector is not None]
        if vecs:
            self._copy("""COPY memory_embeddings (unit_id, bank_id, model, input_stamp,
                              embedding) FROM STDIN""", vecs)
        self.result.vectors_reused += len(vecs)
        self.result.units_to_embed += sum(  # a forgotten unit has no text to embed
            1 for _, r in rows if r.forgotten_at is None
            and not (self.vectors_ok and r.vector is not None))

    def _w_link(self, rows) -> None:
        m = self.m
        self._present(rows, "unit", lambda r: [m(r.from_unit), m(r.to_unit)], self._UNITS)
        self._copy("""COPY memory_links (from_unit, to_unit, bank_id, type, weight, created_at)
                      FROM STDIN""",
                   ((m(r.from_unit), m(r.to_unit), self.bank, r.link_type, r.weight,
                     r.created_at) for _, r in rows))

    def _w_mention(self, rows) -> None:
        m = self.m
        self._present(rows, "unit", lambda r: [m(r.unit_id)], self._UNITS)
        self._present(rows, "entity", lambda r: [m(r.entity_id)], self._ENTITIES)
        self._copy("""COPY unit_entities (unit_id, entity_id, bank_id, mention, source)
                      FROM STDIN""",
                   ((m(r.unit_id), m(r.entity_id), self.bank, r.mention, r.source)
                    for _, r in rows))

    def _w_closet(self, rows) -> None:
        m, ok = self.m, self.vectors_ok
        for n, r in rows:
            if ok and r.vector is not None and len(r.vector) != self.emb.dim:
                raise FormatError(n, f"closet vector has {len(r.vector)} values; the header's "
                                     f"embedding dim is {self.emb.dim}")
        self._present(rows, "unit", lambda r: [m(r.unit_id), *map(m, r.source_unit_ids)],
                      self._UNITS)
        self._fresh("closets", rows, lambda r: [m(r.id)])

        def vec(r):
            keep = ok and r.vector is not None and r.model == self.emb.model
            return (_vector(r.vector) if keep else None), (r.model if keep else None)

        self._copy("""COPY closets (id, bank_id, room, hall, summary, unit_id, embedding, model,
                          prompt_version, source_unit_ids, created_at) FROM STDIN""",
                   ((m(r.id), self.bank, r.room, r.hall, r.summary, m(r.unit_id), *vec(r),
                     r.prompt_version, [m(s) for s in r.source_unit_ids], r.created_at)
                    for _, r in rows))

    def _w_dedup_proposal(self, rows) -> None:
        m = self.m
        for n, r in rows:
            if r.unit_a not in r.members or r.unit_b not in r.members:
                raise FormatError(n, "dedup_proposal: unit_a and unit_b must be among members")
        self._present(rows, "unit", lambda r: [m(x) for x in r.members], self._UNITS)
        self._fresh("dedup_proposals", rows, lambda r: [m(r.id)])
        self._copy("""COPY dedup_proposals (id, bank_id, unit_a, unit_b, members, cosine, state,
                          decided_by, decided_at, created_at) FROM STDIN""",
                   ((m(r.id), self.bank, *_pairs(m(r.unit_a), m(r.unit_b)),
                     [m(x) for x in r.members], r.cosine, r.state, r.decided_by, r.decided_at,
                     r.created_at) for _, r in rows))

    def _w_entity_proposal(self, rows) -> None:
        m = self.m
        for n, r in rows:
            if r.entity_a == r.entity_b:
                raise FormatError(n, "entity_proposal: entity_a and entity_b must differ")
        self._present(rows, "entity", lambda r: [m(r.entity_a), m(r.entity_b)], self._ENTITIES)
        self._fresh("entity_merge_proposals", rows, lambda r: [m(r.id)])
        self._copy("""COPY entity_merge_proposals (id, bank_id, entity_a, entity_b, score,
                          reason, state, decided_by, decided_at, created_at) FROM STDIN""",
                   ((m(r.id), self.bank, *_pairs(m(r.entity_a), m(r.entity_b)), r.score,
                     r.reason, r.state, r.decided_by, r.decided_at, r.created_at)
                    for _, r in rows))

    def _w_grant(self, rows) -> None:
        from rcll.store import members

        known = {r["id"] for r in self.conn.execute(
            "SELECT id FROM members WHERE id = ANY(%s)", ([r.member_id for _, r in rows],))}
        for _, r in rows:
            if r.member_id in known and set(r.purposes) <= self.purposes:
                members.upsert_grant(self.conn, r.member_id, self.bank, r.role,
                                     tuple(r.purposes))
                self.result.grants_applied.append(r.member_id)
            else:
                self.result.grants_skipped.append(r.member_id)

    # -- the end ---------------------------------------------------------------------------
    def _finish_refs(self) -> None:
        """Set the deferred references whose target this import wrote; a unit whose
        successor it did not write stays out of recall (``invalidated_reason``
        ``superseded``); count the dropped ones."""
        c = self.conn
        c.execute("""UPDATE memory_units u SET superseded_by_id = r.ref
                     FROM _rcll_import_refs r JOIN memory_units t ON t.id = r.ref
                     WHERE r.kind = 'unit' AND u.id = r.id AND t.bank_id = %s""", (self.bank,))
        lost = c.execute("""UPDATE memory_units u
                            SET invalidated_reason = coalesce(u.invalidated_reason, 'superseded')
                            FROM _rcll_import_refs r
                            WHERE r.kind = 'unit' AND u.id = r.id AND u.superseded_by_id IS NULL
                            RETURNING u.id""").fetchall()
        c.execute("""UPDATE entities e SET merged_into_id = r.ref
                     FROM _rcll_import_refs r JOIN entities t ON t.id = r.ref
                     WHERE r.kind = 'entity' AND e.id = r.id AND t.bank_id = %s""", (self.bank,))
        gone = c.execute("""SELECT count(*) AS n FROM _rcll_import_refs r JOIN entities e
                            ON e.id = r.id WHERE r.kind = 'entity'
                            AND e.merged_into_id IS NULL""").fetchone()["n"]
        self.result.dangling = len(lost) + int(gone)
        c.execute("DELETE FROM _rcll_import_refs")


def _vector(values: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in values) + "]"
