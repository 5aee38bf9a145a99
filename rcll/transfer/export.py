"""Write a bank as ``rcll-bank`` lines (:mod:`rcll.transfer.format`), one at a time.

:func:`export_lines` reads inside one ``REPEATABLE READ READ ONLY`` transaction (one
snapshot: a unit written meanwhile is in neither the units nor the links) through one
server-side cursor per record type, :data:`FETCH` rows per round trip, so memory holds a
batch whatever the bank's size. The caller's :class:`~rcll.access.visibility.Rule` decides
what is written: units and document versions by the rule (the rule applies to both tables);
chunks of written documents; links, mentions, revisions and feedback of written units only;
entities, for a caller with an audience or purpose limit, only those a written unit
mentions; closets and proposals only when every unit (entity) they name is written. A
``documents`` subset (Hindsight's ``document_id``) keeps the units of those documents only.

Vectors are the configured embedder's rows at its input stamp, spliced in as pgvector
prints them (the shortest text that reads back to the same float4). Mentions are written in
the order they were made (``unit_entities.seq``): the graph channel reads an entity's most
recent mentions first, so an import keeps that order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from psycopg import Connection

from rcll.access.visibility import Rule
from rcll.transfer.format import FORMAT, VERSION

FETCH = 2000  # rows per round trip of each server-side cursor

DOC_COLS = ("id", "document_id", "content_hash", "metadata", "created_at", "updated_at",
            "revision", "version_item", "tags", "context", "mentioned_at", "audience",
            "purposes")
CHUNK_COLS = ("id", "document_id", "index", "text", "content_hash")
ENTITY_COLS = ("id", "name", "normalized", "entity_type", "aliases", "merged_into_id",
               "created_at", "updated_at")
UNIT_COLS = ("id", "document_id", "chunk_id", "chunk_hash", "kind", "text", "context",
             "heading", "room", "hall", "layer", "audience", "purposes", "origin",
             "confidence", "revision", "superseded_by_id", "invalidated_reason",
             "occurred_start", "occurred_end", "mentioned_at", "created_at", "forgotten_at",
             "metadata", "tags", "token_count", "document_revision", "extraction_version",
             "entity_names", "nb_len")
CLOSET_COLS = ("id", "room", "hall", "summary", "unit_id", "model", "prompt_version",
               "source_unit_ids", "created_at")
DEDUP_COLS = ("id", "unit_a", "unit_b", "members", "cosine", "state", "decided_by",
              "decided_at", "created_at")
ENTITY_PROPOSAL_COLS = ("id", "entity_a", "entity_b", "score", "reason", "state",
                        "decided_by", "decided_at", "created_at")


@dataclass(frozen=True)
class Selection:
    """What an export holds beyond the bank row: ``vectors`` (the embedder's vectors),
    ``grants`` (the bank's grants; the caller checked the role), ``data`` (``False``: the
    header and the end record only), ``config`` (``False``: the header's bank config is
    empty), ``documents`` (external document ids: only those documents and their units;
    ``None``: the whole bank)."""

    vectors: bool = True
    grants: bool = False
    data: bool = True
    config: bool = True
    documents: tuple[str, ...] | None = None

    def to_json(self) -> dict:
        return {"vectors": self.vectors, "grants": self.grants, "data": self.data,
                "config": self.config,
                "documents": list(self.documents) if self.documents is not None else None}

    @classmethod
    def from_json(cls, d: dict) -> Selection:
        docs = d.get("documents")
        return cls(bool(d.get("vectors", True)), bool(d.get("grants", False)),
                   bool(d.get("data", True)), bool(d.get("config", True)),
                   tuple(docs) if docs is not None else None)


@dataclass(frozen=True)
class Embedding:
    """The configured embedder: ``model`` (``None``: no embedder, no vectors), ``dim``,
    ``stamp`` (:func:`rcll.models.embedder.input_stamp`)."""

    model: str | None
    dim: int
    stamp: str | None


def _default(v):
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, UUID):
        return str(v)
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")


def line(obj: dict, vector: str | None = None) -> bytes:
    """One record as a line (UTF-8, ``\\n``-terminated); ``vector``: pgvector's text of a
    vector (a JSON array already), added as the record's last field ``vector``."""
    text = json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)
    if vector is not None:
        text = f'{text[:-1]},"vector":{vector}}}'
    return (text + "\n").encode("utf-8")


def _cursor(conn: Connection, name: str, sql: str, params: dict) -> Iterator[dict]:
    with conn.cursor(name=f"rcll_export_{name}") as cur:
        cur.itersize = FETCH
        cur.execute(sql, params)
        yield from cur


def header(bank: dict, rule: Rule, emb: Embedding, sel: Selection) -> dict:
    """The header record of an export of ``bank`` (its row)."""
    import rcll

    full = rule.member is None and rule.purposes is None
    return {
        "type": "header", "format": FORMAT, "version": VERSION,
        "bank": {"id": bank["id"], "name": bank["name"],
                 "config": (bank["config"] or {}) if sel.config else {},
                 "created_at": bank["created_at"]},
        "embedding": ({"model": emb.model, "dim": emb.dim, "input_stamp": emb.stamp}
                      if emb.model else None),
        "vectors": bool(sel.vectors and emb.model and sel.data), "grants": sel.grants,
        "scope": {"full": full, "member": rule.member,
                  "purposes": list(rule.purposes) if rule.purposes is not None else None},
        "documents": list(sel.documents) if sel.documents is not None else None,
        "exported_at": datetime.now(UTC), "producer": {"name": "rcll",
                                                       "version": rcll.__version__}}


def export_lines(conn: Connection, bank: dict, rule: Rule, emb: Embedding,
                 sel: Selection) -> Iterator[bytes]:
    """The export of ``bank`` (its row, read in this snapshot by the caller) as lines,
    header first and the ``end`` record last. ``conn``: inside the caller's ``REPEATABLE
    READ READ ONLY`` transaction, kept open while the lines are read. ``rule``: what the
    caller may see; ``emb``: the configured embedder; ``sel``: what to write."""
    yield line(header(bank, rule, emb, sel))
    counts: dict[str, int] = {}
    if sel.data:
        yield from _records(conn, bank["id"], rule, emb, sel, counts)
    if sel.grants:
        yield from _emit(counts, "grant", _cursor(conn, "grants", """
            SELECT member_id, role, purposes FROM bank_grants WHERE bank_id = %(bank)s
            ORDER BY member_id""", {"bank": bank["id"]}), ("member_id", "role", "purposes"))
    yield line({"type": "end", "counts": counts})


def _emit(counts: dict, kind: str, rows: Iterator[dict], cols: tuple[str, ...],
          extra=None) -> Iterator[bytes]:
    for row in rows:
        rec = {"type": kind, **{c: row[c] for c in cols}}
        vec = extra(rec, row) if extra is not None else None
        counts[kind] = counts.get(kind, 0) + 1
        yield line(rec, vec)


def _records(conn: Connection, bank_id: str, rule: Rule, emb: Embedding, sel: Selection,
             counts: dict) -> Iterator[bytes]:
    full = rule.member is None and rule.purposes is None
    uvis, up = rule.sql("u", "uv")
    dvis, dp = rule.sql("d", "dv")
    params = {"bank": bank_id, "model": emb.model, "stamp": emb.stamp,
              "docs": list(sel.documents or ()), **up, **dp}
    if sel.documents is not None:
        dvis = f"{dvis} AND d.document_id = ANY(%(docs)s)"
        uvis = (f"{uvis} AND u.document_id IN (SELECT d.id FROM documents d WHERE "
                f"d.bank_id = %(bank)s AND {dvis})")
        full = False
    # the units written, as a condition on any alias (links, mentions, closets, proposals)
    def written(col: str) -> str:
        return "TRUE" if full else (f"EXISTS (SELECT 1 FROM memory_units u WHERE "
                                    f"u.id = {col} AND u.bank_id = %(bank)s AND {uvis})")

    yield from _emit(counts, "document", _cursor(conn, "documents", f"""
        SELECT {', '.join('d.' + c for c in DOC_COLS)} FROM documents d
        WHERE d.bank_id = %(bank)s AND {dvis} ORDER BY d.id""", params), DOC_COLS)
    yield from _emit(counts, "chunk", _cursor(conn, "chunks", f"""
        SELECT c.id, c.document_id, c."index", c.text, c.content_hash
        FROM chunks c JOIN documents d ON d.id = c.document_id
        WHERE d.bank_id = %(bank)s AND {dvis} ORDER BY c.id""", params), CHUNK_COLS)
    mentioned = "TRUE" if full else f"""EXISTS (
        SELECT 1 FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id
        WHERE ue.entity_id = e.id AND {uvis})"""
    yield from _emit(counts, "entity", _cursor(conn, "entities", f"""
        SELECT {', '.join('e.' + c for c in ENTITY_COLS)} FROM entities e
        WHERE e.bank_id = %(bank)s AND {mentioned} ORDER BY e.id""", params), ENTITY_COLS)

    with_vectors = bool(sel.vectors and emb.model)
    vec_sql = ("(SELECT e.embedding::text FROM memory_embeddings e WHERE e.unit_id = u.id "
               "AND e.model = %(model)s AND e.input_stamp = %(stamp)s)"
               if with_vectors else "NULL::text")

    def unit_extra(rec: dict, row: dict) -> str | None:
        if not row["doc_ok"]:  # its document version is not written
            rec["document_id"] = rec["chunk_id"] = None
        rec["revisions"] = row["revisions"] or []
        rec["feedback"] = row["feedback"]
        if with_vectors and row["vector"] is None:
            rec["vector"] = None
        return row["vector"] if with_vectors else None

    yield from _emit(counts, "unit", _cursor(conn, "units", f"""
        SELECT {', '.join('u.' + c for c in UNIT_COLS)},
               (u.document_id IS NULL OR d.id IS NOT NULL) AS doc_ok,
               (SELECT jsonb_agg(jsonb_build_object(
                    'revision', r.revision, 'text', r.text, 'fields', r.fields,
                    'changed_by', r.changed_by, 'changed_at', r.changed_at)
                    ORDER BY r.revision)
                FROM memory_unit_revisions r WHERE r.unit_id = u.id) AS revisions,
               (SELECT jsonb_build_object('success', f.success, 'failure', f.failure,
                                          'updated_at', f.updated_at)
                FROM unit_feedback f WHERE f.unit_id = u.id) AS feedback,
               {vec_sql} AS vector
        FROM memory_units u
        LEFT JOIN documents d ON d.id = u.document_id AND {dvis}
        WHERE u.bank_id = %(bank)s AND {uvis} ORDER BY u.id""", params), UNIT_COLS, unit_extra)
    yield from _emit(counts, "link", _cursor(conn, "links", f"""
        SELECT l.from_unit, l.to_unit, l.type AS link_type, l.weight, l.created_at
        FROM memory_links l
        WHERE l.bank_id = %(bank)s AND {written('l.from_unit')} AND {written('l.to_unit')}
        ORDER BY l.from_unit, l.to_unit, l.type""", params),
        ("from_unit", "to_unit", "link_type", "weight", "created_at"))
    yield from _emit(counts, "mention", _cursor(conn, "mentions", f"""
        SELECT ue.unit_id, ue.entity_id, ue.mention, ue.source FROM unit_entities ue
        WHERE ue.bank_id = %(bank)s AND {written('ue.unit_id')} ORDER BY ue.seq""", params),
        ("unit_id", "entity_id", "mention", "source"))
    cvec = ("CASE WHEN c.model = %(model)s THEN c.embedding::text END" if with_vectors
            else "NULL::text")
    all_sources = "TRUE" if full else (
        f"NOT EXISTS (SELECT 1 FROM unnest(c.source_unit_ids) s(id) WHERE NOT {written('s.id')})")
    summary_ok = "TRUE" if full else f"(c.unit_id IS NULL OR {written('c.unit_id')})"
    yield from _emit(counts, "closet", _cursor(conn, "closets", f"""
        SELECT {', '.join('c.' + x for x in CLOSET_COLS)}, {cvec} AS vector FROM closets c
        WHERE c.bank_id = %(bank)s AND {summary_ok} AND {all_sources} ORDER BY c.id""", params),
        CLOSET_COLS, lambda rec, row: row["vector"])
    all_members = "TRUE" if full else (
        f"NOT EXISTS (SELECT 1 FROM unnest(p.members) s(id) WHERE NOT {written('s.id')})")
    yield from _emit(counts, "dedup_proposal", _cursor(conn, "dedup", f"""
        SELECT {', '.join('p.' + x for x in DEDUP_COLS)} FROM dedup_proposals p
        WHERE p.bank_id = %(bank)s AND {all_members} ORDER BY p.id""", params), DEDUP_COLS)
    both = "TRUE" if full else (
        f"p.entity_a IN (SELECT e.id FROM entities e WHERE e.bank_id = %(bank)s AND "
        f"{mentioned}) AND p.entity_b IN (SELECT e.id FROM entities e WHERE "
        f"e.bank_id = %(bank)s AND {mentioned})")
    yield from _emit(counts, "entity_proposal", _cursor(conn, "entity_proposals", f"""
        SELECT {', '.join('p.' + x for x in ENTITY_PROPOSAL_COLS)}
        FROM entity_merge_proposals p
        WHERE p.bank_id = %(bank)s AND {both} ORDER BY p.id""", params), ENTITY_PROPOSAL_COLS)


def gzip_lines(lines: Iterator[bytes], level: int = 6, flush_bytes: int = 1 << 20
               ) -> Iterator[bytes]:
    """``lines`` as one gzip member, compressed as they come: a piece is sent every
    ``flush_bytes`` of input (a sync flush), so a slow reader still sees the stream move."""
    import zlib

    z = zlib.compressobj(level, zlib.DEFLATED, 31)
    pending = 0
    for ln in lines:
        out = z.compress(ln)
        pending += len(ln)
        if pending >= flush_bytes:
            out += z.flush(zlib.Z_SYNC_FLUSH)
            pending = 0
        if out:
            yield out
    yield z.flush()
