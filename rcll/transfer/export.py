"""Write a bank as an ``rcll-bank`` stream (:mod:`rcll.transfer.format`), one line at a time.

:func:`export_lines` reads the bank inside one ``REPEATABLE READ READ ONLY`` transaction (a
consistent snapshot: a unit written meanwhile is in neither the units nor the links), one
server-side cursor per record type fetching :data:`FETCH` rows at a time, so memory stays
bounded by a batch whatever the bank's size. What a caller may see decides what is written
(:class:`rcll.access.visibility.Rule`): units by the rule; document versions and their chunks
by the same rule on ``documents``; a unit whose document version is not written keeps no
document reference; links only between written units; mentions, revisions and feedback only
of written units; entities, for a caller with an audience or purpose limit, only those
mentioned by a written unit; closets only when their summary unit and every source unit are
written. Vectors are the bank's rows for ``model`` (the configured embedder), spliced in as
pgvector prints them (shortest float4 text, which reads back to the same float4).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from uuid import UUID

from psycopg import Connection

from rcll.access.visibility import Rule
from rcll.transfer.format import FORMAT, VERSION

FETCH = 2000  # rows per round trip of each server-side cursor

DOC_COLS = ("id", "document_id", "content_hash", "metadata", "created_at", "updated_at",
            "revision", "version_seq", "version_item", "tags", "context", "mentioned_at",
            "audience", "purposes")
CHUNK_COLS = ("id", "document_id", "index", "text", "content_hash")
ENTITY_COLS = ("id", "name", "normalized", "entity_type", "aliases", "merged_into_id",
               "created_at", "updated_at")
UNIT_COLS = ("id", "document_id", "chunk_id", "chunk_hash", "kind", "text", "context", "room",
             "hall", "layer", "audience", "purposes", "origin", "confidence", "revision",
             "superseded_by_id", "invalidated_reason", "occurred_start", "occurred_end",
             "mentioned_at", "created_at", "metadata", "tags", "token_count",
             "document_revision", "extraction_version", "entity_names", "forgotten_at",
             "nb_len", "heading")
CLOSET_COLS = ("id", "room", "hall", "summary", "unit_id", "model", "prompt_version",
               "source_unit_ids", "created_at")


def _default(v):
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, UUID):
        return str(v)
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")


def _line(obj: dict, vector: str | None = None) -> bytes:
    text = json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":"))
    if vector is not None:  # pgvector's text form is a JSON array already
        text = f'{text[:-1]},"vector":{vector}}}'
    return (text + "\n").encode("utf-8")


def _cursor(conn: Connection, name: str, sql: str, params: dict) -> Iterator[dict]:
    with conn.cursor(name=f"rcll_export_{name}") as cur:
        cur.itersize = FETCH
        cur.execute(sql, params)
        yield from cur


def export_lines(conn: Connection, bank_id: str, rule: Rule, *, model: str | None,
                 dim: int, stamp: str | None, vectors: bool, grants: bool) -> Iterator[bytes]:
    """The bank's export as lines (UTF-8, ``\\n``-terminated), header first and the ``end``
    record last. ``conn``: a connection with no transaction open (this opens and ends its
    own snapshot transaction; close the generator to end it early). ``rule``: what the
    caller may see. ``model``/``dim``/``stamp``: the configured embedder (``model=None``:
    none, no vectors written). ``grants``: write the bank's grants (the caller checked that
    it is a bank admin). Raises :class:`rcll.errors.BankNotFound` before the first line."""
    from rcll.store import banks

    counts: dict[str, int] = {}
    full = rule.member is None and rule.purposes is None
    uvis, up = rule.sql("u", "uv")
    dvis, dp = rule.sql("d", "dv")
    params = {"bank": bank_id, "model": model, "stamp": stamp, **up, **dp}
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        bank = banks.get(conn, bank_id)
        yield _line({
            "type": "header", "format": FORMAT, "version": VERSION,
            "bank": {"id": bank["id"], "name": bank["name"], "config": bank["config"] or {},
                     "created_at": bank["created_at"]},
            "embedding": {"model": model, "dim": dim, "input_stamp": stamp} if model else None,
            "vectors": bool(vectors and model), "grants": grants,
            "scope": "full" if full else "member",
            "exported_at": datetime.now(UTC)})

        def emit(kind: str, rows: Iterator[dict], cols: tuple[str, ...], extra=None):
            for row in rows:
                rec = {"type": kind, **{c: row[c] for c in cols}}
                vec = None
                if extra is not None:
                    vec = extra(rec, row)
                counts[kind] = counts.get(kind, 0) + 1
                yield _line(rec, vec)

        # A visible document version; units whose version is not written drop the reference.
        yield from emit("document", _cursor(conn, "documents", f"""
            SELECT {', '.join('d.' + c for c in DOC_COLS)} FROM documents d
            WHERE d.bank_id = %(bank)s AND {dvis} ORDER BY d.id""", params), DOC_COLS)
        yield from emit("chunk", _cursor(conn, "chunks", f"""
            SELECT {', '.join('c.' + ('"index"' if c == 'index' else c) for c in CHUNK_COLS)}
            FROM chunks c JOIN documents d ON d.id = c.document_id
            WHERE d.bank_id = %(bank)s AND {dvis} ORDER BY c.id""", params), CHUNK_COLS)
        seen_entity = "TRUE" if full else f"""EXISTS (
            SELECT 1 FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id
            WHERE ue.entity_id = e.id AND {uvis})"""
        yield from emit("entity", _cursor(conn, "entities", f"""
            SELECT {', '.join('e.' + c for c in ENTITY_COLS)} FROM entities e
            WHERE e.bank_id = %(bank)s AND {seen_entity} ORDER BY e.id""", params), ENTITY_COLS)

        def unit_extra(rec: dict, row: dict) -> str | None:
            rec["document_id"] = row["document_id"] if row["doc_ok"] else None
            rec["chunk_id"] = row["chunk_id"] if row["doc_ok"] else None
            rec["revisions"] = row["revisions"] or []
            rec["feedback"] = row["feedback"]
            return row["vector"] if vectors else None

        vec_sql = ("(SELECT e.embedding::text FROM memory_embeddings e WHERE e.unit_id = u.id "
                   "AND e.model = %(model)s AND e.input_stamp = %(stamp)s)"
                   if vectors and model else "NULL::text")
        yield from emit("unit", _cursor(conn, "units", f"""
            SELECT {', '.join('u.' + c for c in UNIT_COLS)},
                   (d.id IS NOT NULL) AS doc_ok,
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
            WHERE u.bank_id = %(bank)s AND {uvis} ORDER BY u.id""", params),
            UNIT_COLS, unit_extra)
        avis, ap = rule.sql("a", "av")
        bvis, bp = rule.sql("b", "bv")
        lparams = {**params, **ap, **bp}
        both = f"""JOIN memory_units a ON a.id = l.from_unit AND {avis}
                   JOIN memory_units b ON b.id = l.to_unit AND {bvis}""" if not full else ""
        yield from emit("link", _cursor(conn, "links", f"""
            SELECT l.from_unit, l.to_unit, l.type AS link_type, l.weight, l.created_at
            FROM memory_links l {both}
            WHERE l.bank_id = %(bank)s ORDER BY l.from_unit, l.to_unit, l.type""", lparams),
            ("from_unit", "to_unit", "link_type", "weight", "created_at"))
        yield from emit("mention", _cursor(conn, "mentions", f"""
            SELECT ue.unit_id, ue.entity_id, ue.mention, ue.source
            FROM unit_entities ue JOIN memory_units u ON u.id = ue.unit_id AND {uvis}
            WHERE ue.bank_id = %(bank)s ORDER BY ue.unit_id, ue.entity_id""", params),
            ("unit_id", "entity_id", "mention", "source"))
        sources_ok = "TRUE" if full else f"""NOT EXISTS (
            SELECT 1 FROM unnest(c.source_unit_ids) s(id)
            WHERE NOT EXISTS (SELECT 1 FROM memory_units u WHERE u.id = s.id AND {uvis}))"""
        cvec = ("CASE WHEN c.model = %(model)s THEN c.embedding::text END"
                if vectors and model else "NULL::text")
        yield from emit("closet", _cursor(conn, "closets", f"""
            SELECT {', '.join('c.' + x for x in CLOSET_COLS)}, {cvec} AS vector
            FROM closets c JOIN memory_units u ON u.id = c.unit_id AND {uvis}
            WHERE c.bank_id = %(bank)s AND {sources_ok} ORDER BY c.id""", params),
            CLOSET_COLS, lambda rec, row: row["vector"])
        if grants:
            yield from emit("grant", _cursor(conn, "grants", """
                SELECT member_id, role, purposes FROM bank_grants WHERE bank_id = %(bank)s
                ORDER BY member_id""", params), ("member_id", "role", "purposes"))
    yield _line({"type": "end", "counts": counts})
