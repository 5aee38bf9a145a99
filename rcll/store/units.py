"""Documents, chunks and memory units: one document version applied per transaction.

A document lineage (``bank_id``, ``document_id``, ``audience``, ``purposes``; what makes it
one is :mod:`rcll.identity`) has versions; exactly the latest one is live. The
latest is the one with the highest version key ``(job seq, item index)``: the submission
order of the jobs, then the order of items in a job. Applying a version takes the documents
row lock first (``INSERT … ON CONFLICT DO UPDATE … RETURNING``), so versions of one document
are applied one at a time whatever the interleaving of workers and sync requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from psycopg import Connection
from psycopg.types.json import Jsonb

from rcll.identity import canonical_purposes, sha256
from rcll.store import document_events

EMPTY_CONTENT_HASH = sha256("")  # a retired file part's version: no text
PAGE, SECTION = "p", "s"  # the kinds of a file's part (rcll.files.stage)


def file_part_id(file_document_id: str, kind: str, n: int) -> str:
    """The document id of part ``n`` (1-based) of a file: ``<file id>#p<page>`` for a PDF
    page (``kind`` :data:`PAGE`), ``<file id>#s<index>`` for a section (:data:`SECTION`);
    what :func:`retire_file_parts` recognises as the file's parts."""
    return f"{_part_prefix(file_document_id, kind)}{n}"


def _part_prefix(file_document_id: str, kind: str) -> str:
    """What every part id of ``kind`` starts with (``PAGE`` and ``SECTION`` prefixes have
    one length, which :func:`retire_file_parts` relies on)."""
    return f"{file_document_id}#{kind}"


@dataclass
class UnitDraft:
    """One unit to store: a chunk of an item with its classification and timestamps."""

    text: str
    chunk_hash: str
    chunk_index: int
    room: str
    hall: str
    layer: int
    context: str | None = None
    mentioned_at: datetime | None = None
    metadata: dict = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    kind: str = "chunk"
    token_count: int | None = None
    audience: str = "bank"
    purposes: tuple[str, ...] = ("assist", "operate", "audit", "personal")
    # the chunk's context (its document's title and heading path; migration 0023): read by
    # the lexical and dense channels, never part of the returned text
    heading: str | None = None


@dataclass(frozen=True)
class DocumentVersion:
    """What one item says about its document.

    ``version_seq`` is the job's submission sequence (``jobs.seq``) and ``version_item`` the
    item's index in the job; together they order versions. The other fields are the
    document-level values every live unit of the document ends with; ``audience`` and
    ``purposes`` (with ``external_id``) name the lineage (:func:`rcll.identity.lineage_key`).
    """

    external_id: str
    content_hash: str
    audience: str
    purposes: tuple[str, ...]
    metadata: dict
    tags: list[str]
    context: str | None
    mentioned_at: datetime | None
    version_seq: int
    version_item: int


@dataclass(frozen=True)
class VersionResult:
    """``created``/``skipped`` units; ``superseded`` when a newer version was already live
    (nothing written); ``revision`` is the document's revision after this call; ``left``:
    ids of units that were live before and are now invalidated (``document_replaced``) or
    re-scoped (room, hall or layer changed) — what the caller removes from the cascade's
    caches after the commit; ``forgotten``: chunks that match a unit forgotten on request
    (its tombstone stays: forget is not undone by re-retaining; counted in ``skipped``)."""

    created: int
    skipped: int
    superseded: bool
    revision: int
    left: tuple[str, ...] = ()
    forgotten: int = 0


def apply_version(conn: Connection, bank_id: str, job_id: str, version: DocumentVersion,
                  drafts: list[UnitDraft]) -> VersionResult:
    """Make ``version`` (with its chunk ``drafts``) the live version of its lineage.

    Run inside a transaction. Locks the lineage's documents row (created if new), then: an
    older version key than the stored one is ``superseded`` and writes nothing; an equal key
    (a redelivered job) re-applies without a new revision; a newer key bumps ``revision``.
    Applying stores missing chunks and units (each draft's ``chunk_hash`` is its identity in
    the version, :func:`rcll.identity.chunk_keys`), revives invalidated units whose chunk is
    in this version, refreshes metadata, tags, context, times, chunk position and
    ``document_revision`` on all of them, invalidates (``document_replaced``, history
    kept) every other live unit of the lineage, and records the version in the lineage's
    history (:func:`rcll.store.document_events.record_version`). A unit's ``audience`` and
    ``purposes`` are never changed here: they are the lineage's (part of its key), or narrower where a
    lifecycle verb narrowed one unit — such a unit no longer belongs to the lineage's
    versions: a later version (perhaps another member's, who cannot see it) never revives,
    rewrites or replaces it. Another lineage of the same document id — another audience or
    purpose set — is never read or written.
    """
    aud, purposes = version.audience, canonical_purposes(version.purposes)
    doc = conn.execute(
        """INSERT INTO documents (bank_id, document_id, audience, purposes, content_hash,
                                  metadata, tags, context, mentioned_at, revision,
                                  version_seq, version_item)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 1, %s, %s)
           ON CONFLICT (bank_id, document_id, audience, purposes)
             DO UPDATE SET bank_id = documents.bank_id
           RETURNING id, revision, version_seq, version_item, (xmax = 0) AS inserted""",
        (bank_id, version.external_id, aud, purposes, version.content_hash,
         Jsonb(version.metadata), version.tags, version.context, version.mentioned_at,
         version.version_seq, version.version_item),
    ).fetchone()
    doc_uuid = str(doc["id"])
    revision = doc["revision"]
    if not doc["inserted"]:  # the row existed: it is locked now; compare version keys
        new_key = (version.version_seq, version.version_item)
        old_key = (doc["version_seq"], doc["version_item"])
        if new_key < old_key:
            return VersionResult(0, len(drafts), True, revision)
        if new_key > old_key:
            revision += 1
        conn.execute(
            """UPDATE documents SET content_hash = %s, metadata = %s, tags = %s, context = %s,
                      mentioned_at = %s, revision = %s, version_seq = %s, version_item = %s,
                      updated_at = now()
               WHERE id = %s""",
            (version.content_hash, Jsonb(version.metadata), version.tags, version.context,
             version.mentioned_at, revision, version.version_seq, version.version_item,
             doc_uuid),
        )
    scope_before = {} if doc["inserted"] else {
        r["chunk_hash"]: (str(r["id"]), r["room"], r["hall"], r["layer"])
        for r in conn.execute(
            """SELECT id, chunk_hash, room, hall, layer FROM memory_units
               WHERE document_id = %s AND invalidated_reason IS NULL
                 AND superseded_by_id IS NULL""", (doc_uuid,)).fetchall()}
    left: list[str] = []
    for d in drafts:
        before = scope_before.get(d.chunk_hash)
        if before is not None and before[1:] != (d.room, d.hall, d.layer):
            left.append(before[0])
    created, forgotten = _store_chunks(conn, bank_id, job_id, doc_uuid, revision, aud,
                                       list(version.purposes), drafts)
    replaced: list[str] = []
    if not doc["inserted"]:  # a new document has no other units
        # derived units (facts) stay live while the chunk they derive from is in this version
        hashes = [d.chunk_hash for d in drafts]
        replaced = [str(r["id"]) for r in conn.execute(
            """UPDATE memory_units mu SET invalidated_reason = 'document_replaced'
               WHERE mu.document_id = %s AND mu.invalidated_reason IS NULL
                 AND mu.audience = %s AND mu.purposes @> %s AND mu.purposes <@ %s
                 AND NOT (mu.chunk_hash = ANY(%s))
                 AND NOT (mu.origin = 'derived' AND EXISTS (
                     SELECT 1 FROM memory_links l JOIN memory_units c ON c.id = l.to_unit
                     WHERE l.from_unit = mu.id AND l.type = 'derived_from'
                       AND c.document_id = mu.document_id AND c.chunk_hash = ANY(%s)))
               RETURNING mu.id""",
            (doc_uuid, aud, purposes, purposes, hashes, hashes),
        ).fetchall()]
        left += replaced
    document_events.record_version(conn, doc_uuid, revision, job_id, created, len(replaced))
    return VersionResult(created, len(drafts) - created, False, revision, tuple(left),
                         forgotten)



def retire_file_parts(conn: Connection, bank_id: str, job_id: str, file_document_id: str,
                      produced: list[str], template: DocumentVersion) -> list[VersionResult]:
    """Retire the parts of a file that a new version of it no longer has.

    A file job stores one document per page or section (:mod:`rcll.files.stage`):
    ``<file id>#p<n>``, ``<file id>#s<n>``, or the bare file id for one section, each naming
    the file in ``metadata.file.document_id``. A new version with fewer pages, or with one
    section where there were several, leaves the old parts' ids unwritten, so their units
    would stay live. Run inside a transaction after the job stored its items
    (``produced``: their document ids). Within ``template``'s lineage (audience, purposes),
    a part is retired when all of these hold: its id is one of the file's part ids and its
    metadata names the file (a document that only claims the file in its metadata is not a
    part); it still holds live units; this job did not write it; and its version is older
    than this job (``version_seq < template.version_seq``). A part written by anything
    newer (a newer upload, a reprocess) is never touched, even while that job is half done
    or after it was cancelled. Each part retired gets an empty version (:func:`apply_version`
    with no chunks, key ``(template.version_seq, template.version_item + k)``): its units
    are invalidated ``document_replaced`` (history kept), its metadata stays, its history
    records the version.

    Left as it is: an older upload whose job ends after a newer one's keeps the pages the
    newer version lacks (each job retires only what is older than itself). Returns the
    :class:`VersionResult` of each part retired."""
    aud, purposes = template.audience, canonical_purposes(template.purposes)
    rows = conn.execute(
        """SELECT d.document_id, d.metadata, d.tags, d.context, d.mentioned_at
           FROM documents d
           WHERE d.bank_id = %(bank)s AND d.metadata ? 'file'
             AND d.metadata -> 'file' ->> 'document_id' = %(file)s
             AND d.audience = %(aud)s AND d.purposes = %(purposes)s
             AND (d.document_id = %(file)s
                  OR (left(d.document_id, length(%(page)s)) IN (%(page)s, %(section)s)
                      AND substr(d.document_id, length(%(page)s) + 1) ~ '^[0-9]+$'))
             AND d.version_seq < %(seq)s
             AND NOT (d.document_id = ANY(%(produced)s))
             AND EXISTS (SELECT 1 FROM memory_units u
                         WHERE u.document_id = d.id AND u.invalidated_reason IS NULL
                           AND u.superseded_by_id IS NULL)
           ORDER BY d.document_id""",
        {"bank": bank_id, "file": file_document_id, "aud": aud, "purposes": purposes,
         "page": _part_prefix(file_document_id, PAGE),
         "section": _part_prefix(file_document_id, SECTION),
         "seq": template.version_seq, "produced": produced}).fetchall()
    return [apply_version(conn, bank_id, job_id,
                          replace(template, external_id=r["document_id"],
                                  content_hash=EMPTY_CONTENT_HASH, metadata=r["metadata"],
                                  tags=r["tags"], context=r["context"],
                                  mentioned_at=r["mentioned_at"],
                                  version_item=template.version_item + k), [])
            for k, r in enumerate(rows)]


def _store_chunks(conn: Connection, bank_id: str, job_id: str, doc_uuid: str, revision: int,
                  audience: str, purposes: list[str],
                  drafts: list[UnitDraft]) -> tuple[int, int]:
    """Store the drafts' chunks and units of one document version in one statement (the
    chunks in a data-modifying CTE, the units joined to them, in draft order): a missing
    chunk or unit is inserted, an invalidated unit of the lineage revived and refreshed.
    A unit forgotten on request or narrowed by a lifecycle verb is left alone. Returns
    ``(units created, chunks matching a forgotten unit)``."""
    if not drafts:
        return 0, 0
    rows = conn.execute(
        """WITH x AS (
               SELECT * FROM unnest(%(idx)s::int[], %(text)s::text[], %(hash)s::text[],
                                    %(kind)s::text[], %(context)s::text[], %(room)s::text[],
                                    %(hall)s::text[], %(layer)s::smallint[],
                                    %(mentioned)s::timestamptz[], %(metadata)s::jsonb[],
                                    %(tags)s::jsonb[], %(tokens)s::int[], %(heading)s::text[])
                    WITH ORDINALITY AS x(idx, text, hash, kind, context, room, hall, layer,
                                         mentioned_at, metadata, tags, token_count, heading,
                                         ord)),
           c AS (
               INSERT INTO chunks (document_id, index, text, content_hash)
               SELECT %(doc)s, x.idx, x.text, x.hash FROM x ORDER BY x.ord
               ON CONFLICT (document_id, content_hash) DO UPDATE SET index = EXCLUDED.index
               RETURNING id, content_hash)
           INSERT INTO memory_units (bank_id, document_id, chunk_id, chunk_hash, job_id, kind,
                  text, context, room, hall, layer, mentioned_at, metadata, tags, token_count,
                  document_revision, audience, purposes, heading)
           SELECT %(bank)s, %(doc)s, c.id, x.hash, %(job)s, x.kind, x.text, x.context, x.room,
                  x.hall, x.layer, x.mentioned_at, x.metadata,
                  ARRAY(SELECT jsonb_array_elements_text(x.tags)), x.token_count, %(rev)s,
                  %(aud)s, %(purposes)s, x.heading
           FROM x JOIN c ON c.content_hash = x.hash ORDER BY x.ord
           ON CONFLICT (bank_id, document_id, chunk_hash) DO UPDATE
             SET invalidated_reason = NULL, context = EXCLUDED.context,
                 room = EXCLUDED.room, hall = EXCLUDED.hall, layer = EXCLUDED.layer,
                 mentioned_at = EXCLUDED.mentioned_at, metadata = EXCLUDED.metadata,
                 tags = EXCLUDED.tags, document_revision = EXCLUDED.document_revision,
                 chunk_id = EXCLUDED.chunk_id
             WHERE memory_units.forgotten_at IS NULL
               AND memory_units.audience = EXCLUDED.audience
               AND memory_units.purposes @> EXCLUDED.purposes
               AND memory_units.purposes <@ EXCLUDED.purposes
           RETURNING chunk_hash, (xmax = 0) AS inserted""",
        {"idx": [d.chunk_index for d in drafts], "text": [d.text for d in drafts],
         "hash": [d.chunk_hash for d in drafts], "kind": [d.kind for d in drafts],
         "context": [d.context for d in drafts], "room": [d.room for d in drafts],
         "hall": [d.hall for d in drafts], "layer": [d.layer for d in drafts],
         "mentioned": [d.mentioned_at for d in drafts],
         "metadata": [Jsonb(d.metadata) for d in drafts],
         "tags": [Jsonb(list(d.tags)) for d in drafts],
         "tokens": [d.token_count for d in drafts], "heading": [d.heading for d in drafts],
         "doc": doc_uuid, "bank": bank_id, "job": job_id, "rev": revision, "aud": audience,
         "purposes": purposes}).fetchall()
    created = sum(bool(r["inserted"]) for r in rows)
    missing = list({d.chunk_hash for d in drafts} - {r["chunk_hash"] for r in rows})
    forgotten = 0
    if missing:  # forgotten on request (a tombstone stays), or narrowed (left alone)
        forgotten = conn.execute(
            """SELECT count(*) AS n FROM memory_units WHERE bank_id = %s AND document_id = %s
                 AND chunk_hash = ANY(%s) AND forgotten_at IS NOT NULL""",
            (bank_id, doc_uuid, missing)).fetchone()["n"]
    return created, forgotten


def move_to_lineage(conn: Connection, unit_id: str) -> str | None:
    """Move a document unit whose audience or purposes changed (a lifecycle verb) into the
    lineage of its new visibility (:mod:`rcll.identity`): the documents row of (bank,
    document id, its audience, its purposes) — made from the old one's document-level
    values when new — and a copy of its chunk there. So the old lineage's next version
    (perhaps another member's, who cannot see the unit) neither touches it nor skips a
    chunk of the same text for it. The old lineage's row and chunk go when nothing is left
    in them. In the caller's transaction. Returns the new lineage's id, or ``None`` when the
    unit has no document, is already in its lineage, or the lineage holds that chunk key
    already (the unit then stays where it is)."""
    row = conn.execute(
        """SELECT u.bank_id, u.audience, u.purposes, u.chunk_hash, u.chunk_id,
                  d.id AS doc, d.document_id, d.audience AS d_audience, d.purposes AS d_purposes,
                  d.content_hash, d.metadata, d.tags, d.context, d.mentioned_at,
                  d.version_seq, d.version_item, c.index AS c_index, c.text AS c_text
           FROM memory_units u JOIN documents d ON d.id = u.document_id
           LEFT JOIN chunks c ON c.id = u.chunk_id WHERE u.id = %s""", (unit_id,)).fetchone()
    if row is None:
        return None
    purposes = canonical_purposes(row["purposes"])
    if (row["audience"], purposes) == (row["d_audience"], list(row["d_purposes"])):
        return None
    doc = conn.execute(
        """INSERT INTO documents (bank_id, document_id, audience, purposes, content_hash,
                                  metadata, tags, context, mentioned_at, revision,
                                  version_seq, version_item)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 1, %s, %s)
           ON CONFLICT (bank_id, document_id, audience, purposes)
             DO UPDATE SET bank_id = documents.bank_id
           RETURNING id""",
        (row["bank_id"], row["document_id"], row["audience"], purposes, row["content_hash"],
         Jsonb(row["metadata"]), row["tags"], row["context"], row["mentioned_at"],
         row["version_seq"], row["version_item"])).fetchone()["id"]
    if conn.execute("SELECT 1 FROM memory_units WHERE bank_id = %s AND document_id = %s "
                    "AND chunk_hash = %s", (row["bank_id"], doc, row["chunk_hash"])).fetchone():
        return None
    chunk = None
    if row["chunk_id"] is not None:
        chunk = conn.execute(
            """INSERT INTO chunks (document_id, index, text, content_hash) VALUES (%s, %s, %s, %s)
               ON CONFLICT (document_id, content_hash) DO UPDATE SET index = chunks.index
               RETURNING id""",
            (doc, row["c_index"], row["c_text"], row["chunk_hash"])).fetchone()["id"]
    conn.execute("UPDATE memory_units SET document_id = %s, chunk_id = %s WHERE id = %s",
                 (doc, chunk, unit_id))
    if row["chunk_id"] is not None:
        conn.execute("""DELETE FROM chunks c WHERE c.id = %s AND NOT EXISTS (
                            SELECT 1 FROM memory_units u WHERE u.chunk_id = c.id)""",
                     (row["chunk_id"],))
    conn.execute("""DELETE FROM documents d WHERE d.id = %s AND NOT EXISTS (
                        SELECT 1 FROM memory_units u WHERE u.document_id = d.id)""",
                 (row["doc"],))
    return str(doc)


def count_for_job(conn: Connection, job_id: str) -> int:
    """Units a job created, over all its attempts."""
    return conn.execute("SELECT count(*) AS n FROM memory_units WHERE job_id = %s",
                        (job_id,)).fetchone()["n"]
