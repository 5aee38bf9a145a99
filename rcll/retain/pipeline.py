"""Retain pipeline stages run by workers: chunk (chunk, classify, store) and embed, and the
job's end (:func:`finish_job`). The stage order is data in :mod:`rcll.retain.stages`.

Stages are idempotent: units are keyed on (bank, document, chunk hash) and embeddings on
(unit, model), so a redelivered or repeated job writes nothing twice. A stage re-reads its
job and does nothing if the job is gone or already ended (STYLE §8).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from rcll.cascade import invalidation
from rcll.db import is_transient
from rcll.hierarchy.classifier import Classifier
from rcll.identity import chunk_keys, content_document_id, sha256
from rcll.models.embedder import EmbedderHandle, embed_input, input_stamp
from rcll.models.tokenizer import TokenCounter
from rcll.retain.chunking import chunk_headings, chunk_text
from rcll.retain.markup import is_markup_only, strip_markup
from rcll.retain.models import RetainItem
from rcll.search.recipes import CHUNK_CONTEXT
from rcll.store import embeddings, jobs, units
from rcll.store.units import UnitDraft

T = TypeVar("T")

log = logging.getLogger(__name__)
PROGRESS_EVERY = 50


class TextDropped(ValueError):
    """Chunking kept fewer non-blank characters than the item holds: the item fails (its
    job is not ``succeeded``) rather than store part of it silently."""


@dataclass
class RetainContext:
    """What the write path needs: a pool, the classifier, the token counter, the embedder,
    and the LLM client (``None`` in chunk mode) with how many earlier facts extraction shows."""

    pool: ConnectionPool
    classifier: Classifier
    tokens: TokenCounter
    embedder: EmbedderHandle
    chunk_max_tokens: int = 512
    skip_stages: frozenset[str] = frozenset()
    semantic_link_top_k: int = 5
    semantic_link_min_cosine: float = 0.60
    llm: object | None = None  # rcll.llm.client.LLMClient; None in chunk mode
    extract_recent_facts: int = 20
    hot: object | None = None  # rcll.cascade.hot.HotTier: invalidated after commits; or None
    convert_limits: object | None = None  # rcll.files.convert.ConvertLimits; None: defaults


def drafts_for(item: RetainItem, ctx: RetainContext) -> list[UnitDraft]:
    """Chunk and classify one item into unit drafts (no I/O).

    The item's text loses its markup-only lines first (table separator rows, rows of empty
    cells, rules, link-only navigation: :func:`rcll.retain.markup.strip_markup`); an item made
    only of markup gives ``[]``. Chunking must then keep every non-blank character of that
    *cleaned* text — the check is against the cleaned text, not the item's content — else
    :class:`TextDropped`; a chunk that is markup only (:func:`rcll.retain.markup.is_markup_only`)
    after that is dropped."""
    out = []
    known: dict[str, int] = {}  # chunking counts tokens already; count each text once

    def count(texts: list[str]) -> list[int]:
        if len(known) > 4096:  # hard splits count many prefixes: keep memory bounded
            known.clear()
        todo = [t for t in dict.fromkeys(texts) if t not in known]
        known.update(zip(todo, ctx.tokens.count_many(todo), strict=True))
        return [known[t] for t in texts]

    cleaned = strip_markup(item.content)  # markup is not memory
    chunks = chunk_text(cleaned, ctx.chunk_max_tokens, count)
    held, given = _non_blank(chunks), _non_blank([cleaned])
    if held < given:  # chunking promises every non-blank character (rcll.retain.chunking)
        raise TextDropped(f"chunking kept {held} of the item's {given} non-blank characters "
                          "(after markup-only lines were removed)")
    # a long line of words and markup (a navigation table on one line) can still split into
    # pieces of markup alone: those pieces are not units either
    chunks = [c for c in chunks if not is_markup_only(c)]
    sizes = count(chunks) if ctx.tokens.exact else [None] * len(chunks)
    keys = chunk_keys(chunks)  # a repeated chunk is a chunk of its own (rcll.identity)
    title = item.metadata.get("title") if isinstance(item.metadata.get("title"), str) else None
    headings = (chunk_headings(cleaned, chunks, title) if CHUNK_CONTEXT
                else [None] * len(chunks))
    for i, (text, size, key, heading) in enumerate(zip(chunks, sizes, keys, headings,
                                                        strict=True)):
        room, hall = ctx.classifier.classify(text, item.room, item.hall)
        out.append(UnitDraft(text=text, chunk_hash=key, chunk_index=i, room=room,
                             hall=hall, layer=item.layer, context=item.context,
                             mentioned_at=item.timestamp, metadata=item.metadata, tags=item.tags,
                             token_count=size, audience=item.audience or "bank",
                             heading=heading,
                             purposes=tuple(item.purposes or UnitDraft.purposes)))
    return out


_BLANK = re.compile(r"\s+")


def _non_blank(texts: list[str]) -> int:
    """Characters of ``texts`` that are not whitespace (``\\s``, as the chunker splits)."""
    return sum(len(_BLANK.sub("", t)) for t in texts)


class JobGone(Exception):
    """The job's row is gone (its bank was deleted) or the job already ended: stop."""


ITEM_CONFLICT_RETRIES = 3


def version_for(item: RetainItem, seq: int, index: int) -> units.DocumentVersion:
    """The document version an item states: its lineage (document id — default: a hash of
    the content, :func:`rcll.identity.content_document_id` — audience and purposes), content
    hash, document-level values, and version key ``(seq, index)``."""
    return units.DocumentVersion(
        external_id=item.document_id or content_document_id(item.content),
        content_hash=sha256(item.content), audience=item.audience or "bank",
        purposes=tuple(item.purposes or UnitDraft.purposes), metadata=item.metadata,
        tags=item.tags,
        context=item.context, mentioned_at=item.timestamp, version_seq=seq, version_item=index)


def relaxed_commit(conn: psycopg.Connection) -> None:
    """Inside a transaction: let its COMMIT return before the WAL reaches the disk
    (``SET LOCAL synchronous_commit = off``; the data stays consistent, a crash can lose
    only the last fraction of a second of such commits). The write path uses it for units
    and vectors, which a stage replays idempotently: the job's own stage transition
    (:func:`rcll.store.jobs.progress`, :func:`rcll.store.jobs.finish`) commits
    synchronously, and that flush makes every earlier commit durable too (the WAL is one
    sequence), so a job never says a stage is done whose rows a crash could lose."""
    conn.execute("SET LOCAL synchronous_commit = off")


def store_item(ctx: RetainContext, bank_id: str, job_id: str, item: RetainItem,
               index: int = 0, conn: psycopg.Connection | None = None) -> units.VersionResult:
    """Apply one item (item ``index`` of the job) as its document's version, in one
    transaction that first locks the job row (:func:`rcll.store.jobs.lock_for_work`);
    on ``conn`` when given (an idle connection the caller holds for many items), else on a
    pooled one. The commit does not wait for the disk (:func:`relaxed_commit`).

    After the commit, the units the version replaced or re-scoped leave tier 1
    (:func:`rcll.cascade.invalidation.units_left`, best effort).
    Raises :class:`JobGone` when the job or its bank is gone; database errors propagate
    (the caller tells outages from bad data with :func:`rcll.db.is_transient`).
    """
    drafts = drafts_for(item, ctx)
    if conn is None:
        with ctx.pool.connection() as own:
            return store_item(ctx, bank_id, job_id, item, index, own)
    with conn.transaction():
        relaxed_commit(conn)
        seq = jobs.lock_for_work(conn, job_id)
        if seq is None:
            raise JobGone(job_id)
        result = units.apply_version(conn, bank_id, job_id, version_for(item, seq, index),
                                     drafts)
    # committed: replaced or re-scoped units leave the cascade's tier 1 at once
    invalidation.units_left(ctx.hot, bank_id, result.left)
    return result


def _retry_conflicts(fn: Callable[[], T]) -> T:
    """``fn()``, run again in place on a deadlock or serialization failure (at most
    :data:`ITEM_CONFLICT_RETRIES` runs; the last one's error propagates)."""
    for attempt in range(ITEM_CONFLICT_RETRIES):
        try:
            return fn()
        except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
            if attempt == ITEM_CONFLICT_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def _store_with_retry(ctx: RetainContext, bank_id: str, job_id: str, item: RetainItem,
                      index: int, conn: psycopg.Connection | None = None) -> units.VersionResult:
    """:func:`store_item`, retried in place on a deadlock or serialization failure."""
    return _retry_conflicts(lambda: store_item(ctx, bank_id, job_id, item, index, conn))


def run_chunk(ctx: RetainContext, job_id: str) -> dict | None:
    """Chunk, classify and store every item of a job. Returns the counts, or ``None`` if the
    job is gone (bank deleted) or already ended. A failing item is counted and reported
    (``items_failed``, ``errors``) without losing the others; if every item fails the job
    ends ``failed`` here, otherwise the runner moves the job to the next stage.

    A database outage is not an item failure: a transient error (:func:`rcll.db.is_transient`)
    propagates so the task retries the stage, which replays the items idempotently.
    An item whose document already has a newer version live is ``items_superseded``.
    """
    with ctx.pool.connection() as conn:
        loaded = jobs.payload(conn, job_id)
        if loaded is None or jobs.start(conn, job_id, "chunk") is None:
            return None
    job, raw_items = loaded
    bank_id = job["bank_id"]
    counts = {"items": len(raw_items), "items_done": 0, "units_created": 0, "units_skipped": 0,
              "items_failed": 0, "items_superseded": 0, "units_forgotten": 0}
    errors: list[str] = []
    # items whose text made no unit: only markup, navigation or boilerplate (an earlier
    # version of the same document is then no longer live)
    empty: list[str] = []
    # one connection for the items (a pooled checkout costs a check round trip each), one
    # transaction per item; the progress update commits synchronously (relaxed_commit)
    with ctx.pool.connection() as conn:
        for n, raw in enumerate(raw_items, 1):
            try:
                item = RetainItem(**raw)
                res = _store_with_retry(ctx, bank_id, job_id, item, n - 1, conn)
                if not res.superseded and res.created + res.skipped == 0:
                    empty.append(item.document_id or f"item {n - 1}")
                counts["units_created"] += res.created
                counts["units_skipped"] += res.skipped
                counts["items_superseded"] += res.superseded
                counts["units_forgotten"] += res.forgotten
            except JobGone:
                log.warning("retain job %s stopped at item %d: the job or its bank is gone",
                            job_id, n - 1)
                return None
            except Exception as exc:  # one bad item must not lose the others
                if is_transient(exc):
                    raise
                log.exception("retain job %s item %d failed", job_id, n - 1)
                counts["items_failed"] += 1
                errors.append(f"item {n - 1}: {type(exc).__name__}: {exc}")
            counts["items_done"] = n
            if n % PROGRESS_EVERY == 0:
                with conn.transaction():  # its own transaction, not around the next items
                    jobs.progress(conn, job_id, counts)
    if job["counts"].get("files") and raw_items:  # a file job: its pages or sections
        try:
            counts["file_parts_retired"] = _retire_file_parts(ctx, bank_id, job_id, raw_items)
        except JobGone:
            return None
    with ctx.pool.connection() as conn:
        # counts over every attempt: a redelivered job's earlier units are its own, not skips
        seen = counts["units_created"] + counts["units_skipped"]
        counts["units_created"] = units.count_for_job(conn, job_id)
        counts["units_skipped"] = max(seen - counts["units_created"], 0)
        if raw_items and counts["items_failed"] == len(raw_items):
            jobs.finish(conn, job_id, "failed", counts, "; ".join(errors[:20]))
            return None
    out = {**counts, "errors": errors[:20]}
    if counts["units_forgotten"]:  # not a silent empty success (spec §1.7): the job says why
        out["warnings"] = [*job["counts"].get("warnings", []),
                           f"{counts['units_forgotten']} chunk(s) match units forgotten on "
                           "request and were not stored again (forget is kept; retain the "
                           "text under another document_id to store it anew)"]
    if empty:  # said, not a warning: the job did what it was asked (the CLI shows them)
        out["items_without_units"] = len(empty)
        out["without_units"] = empty[:20]
    return out


def _retire_file_parts(ctx: RetainContext, bank_id: str, job_id: str,
                       raw_items: list[dict]) -> int:
    """After a file job's items: :func:`rcll.store.units.retire_file_parts` for the file
    they came from (``metadata.file.document_id``), in one transaction under the job's lock,
    retried on a deadlock or serialization failure; the units it invalidated leave tier 1
    after the commit. Returns how many parts were retired. Raises :class:`JobGone`."""
    first = RetainItem(**raw_items[0])  # the lineage and the version key; the rest as sent
    file_id = ((first.metadata or {}).get("file") or {}).get("document_id")
    if not file_id:
        return 0
    # every item's id, stored or failed: a page that failed here is not an old page
    produced = [r["document_id"] for r in raw_items if r.get("document_id")]

    def retire() -> list[units.VersionResult]:
        with ctx.pool.connection() as conn, conn.transaction():
            seq = jobs.lock_for_work(conn, job_id)
            if seq is None:
                raise JobGone(job_id)
            return units.retire_file_parts(conn, bank_id, job_id, file_id, produced,
                                           version_for(first, seq, len(raw_items)))

    results = _retry_conflicts(retire)
    invalidation.units_left(ctx.hot, bank_id, [u for r in results for u in r.left])
    return sum(1 for r in results if not r.superseded)


def live_job(ctx: RetainContext, job_id: str) -> dict | None:
    """The job row (:func:`rcll.store.jobs.get`) if it exists and has not ended, else
    ``None``: the check every stage makes before working."""
    with ctx.pool.connection() as conn:
        try:
            job = jobs.get(conn, job_id)
        except Exception:
            return None
    return None if job["state"] in jobs.TERMINAL else job


def skipped_without_embedder(ctx: RetainContext, counts: dict, what: str) -> dict:
    """The counts of a stage that needs the embedder and could not load it: one more job
    warning (the job ends ``partial`` with it), never a failure."""
    return {"warnings": [*counts.get("warnings", []),
                         f"{what} skipped, embedder unavailable: {ctx.embedder.error}"]}


def run_embed(ctx: RetainContext, job_id: str, batch: int = 128) -> dict | None:
    """Embed the units a job created (chunks and derived units). Returns the counts, or
    ``None`` when the job is gone or ended. An unavailable embedder is a job warning (the
    job ends ``partial``; units stay searchable lexically and ``rcll embeddings rebuild``
    fills the gap), not a failure."""
    job = live_job(ctx, job_id)
    if job is None:
        return None
    counts = dict(job["counts"])
    embedder = ctx.embedder.get()
    if embedder is None:
        return skipped_without_embedder(ctx, counts, "embedding")
    done = int(counts.get("units_embedded", 0))

    def report(n: int) -> None:
        with ctx.pool.connection() as conn:
            jobs.progress(conn, job_id, {"units_embedded": done + n})

    inner = getattr(embedder, "inner", embedder)  # under a QueryBatcher
    wide = getattr(inner, "wide_passes", None)
    made = embed_missing(ctx, job_id=job_id, batch=batch, on_batch=report)
    if wide is not None:  # rcll.models.cores: passes that also ran on idle cores
        log.info("embed for job %s: %d vectors, %d passes on borrowed cores", job_id, made,
                 inner.wide_passes - wide)
    return {"units_embedded": done + made}


def finish_job(ctx: RetainContext, job_id: str, counts: dict | None = None) -> None:
    """End a job after its last stage: ``partial`` when any stage recorded ``errors`` (items
    that failed) or ``warnings`` (a step skipped, e.g. no embedder), with them as the
    reason; ``succeeded`` otherwise. ``counts`` (the last stage's) are merged first. A job
    that created units makes tier 1 forget the bank's cues (re-asked questions go to the
    cold tier once and see the new units; :func:`rcll.cascade.invalidation.bank_written`)."""
    with ctx.pool.connection() as conn:
        try:
            job = jobs.get(conn, job_id)
        except Exception:
            return
        if job["state"] in jobs.TERMINAL:
            return
        final = {**job["counts"], **(counts or {})}
        reasons = [*(final.get("errors") or []), *(final.get("warnings") or [])]
        if reasons:
            jobs.finish(conn, job_id, "partial", final, "; ".join(reasons)[:4000])
        else:
            jobs.finish(conn, job_id, "succeeded", final)
    if final.get("units_created"):
        # new units are searchable now: answers cached for re-asked questions may miss them
        invalidation.bank_written(ctx.hot, job["bank_id"])


def embed_missing(ctx: RetainContext, *, job_id: str | None = None, bank_id: str | None = None,
                  batch: int = 256, on_batch=None) -> int:
    """Embed every unit (of a job, of a bank, or all) lacking a vector at the current stamp.

    This is ``rcll embeddings rebuild`` too: vectors are a derived index (spec §1.3), so a
    lost table or a changed model/input stamp is repaired by running it. For a job, each
    batch is written under the job's row lock and stops when the job or its bank is gone;
    units deleted meanwhile get no vector. Returns how many vectors were written;
    ``on_batch(total_so_far)`` after each batch. Raises :class:`RuntimeError` when the
    embedder cannot load.
    """
    embedder = ctx.embedder.get()
    if embedder is None:
        raise RuntimeError(f"embedder unavailable: {ctx.embedder.error}")
    stamp = input_stamp(embedder.stamp)
    written = 0
    while True:
        with ctx.pool.connection() as conn:
            rows = embeddings.units_missing(conn, model=embedder.stamp, stamp=stamp,
                                            job_id=job_id, bank_id=bank_id, limit=batch)
        if not rows:
            return written
        # the chunk stage counted each unit's tokens: the batching reuses the count (an
        # input with a heading is longer than the text it counted)
        vectors = embedder.embed([embed_input(r["text"], r.get("heading")) for r in rows],
                                 token_counts=[None if r.get("heading") else r.get("token_count")
                                               for r in rows])
        with ctx.pool.connection() as conn, conn.transaction():
            relaxed_commit(conn)  # a lost vector is re-made by this same function
            if job_id is not None and jobs.lock_for_work(conn, job_id) is None:
                log.warning("embed for job %s stopped: the job or its bank is gone", job_id)
                return written
            written += embeddings.write(conn, rows, vectors, model=embedder.stamp,
                                        stamp=stamp)
        if on_batch:
            on_batch(written)


def fail(pool: ConnectionPool, job_id: str, error: str) -> None:
    """End a job ``failed`` with ``error`` (a stage raised past its retries, or its enqueue
    was refused) unless it already ended. Needs only the pool, so the failure path never
    waits for a retain context to be built (models, LLM client)."""
    with pool.connection() as conn:
        try:
            job = jobs.get(conn, job_id)
        except Exception:
            return
        if job["state"] not in jobs.TERMINAL:
            jobs.finish(conn, job_id, "failed", None, error[:4000])
