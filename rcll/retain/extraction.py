"""The ``extract`` stage: per chunk unit of a job, LLM facts stored as derived units.

Chunk mode (no LLM client) returns ``{}`` at once. Otherwise each live chunk unit the job
created is sent to the model (prompt :mod:`rcll.llm.prompts.extract_facts`) and its facts
are written in one transaction (after :func:`rcll.store.jobs.lock_for_work`):
``origin='derived'``, the chunk's bank/document/chunk/room/hall/layer, ``chunk_hash`` =
sha256(chunk hash | prompt version | fact index) so a replay writes nothing twice,
``extraction_version``, ``entity_names``, ``mentioned_at`` = the item's time,
``occurred_start/end`` only when grounded (:func:`grounded_time`); links ``derived_from``
(fact → chunk), ``causal`` (cause → effect) and ``supersedes`` (new → old, the old unit's
``superseded_by_id`` set). A chunk whose facts exist already (a redelivered stage) is not
sent again. The LLM usage of every call is added to ``jobs.llm_usage`` in the same
transaction as the chunk's facts or error.

A chunk whose reply stays invalid (or whose call fails) is a ``job_item_errors`` row with the
raw reply and an entry in ``counts["errors"]``: the job ends ``partial``, or ``failed`` here
when no chunk could be extracted — never an empty success. Three chunks in a row meeting an
unavailable provider stop the stage (the rest are counted as not extracted).
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import UTC, datetime

from rcll.cascade import invalidation
from rcll.llm.client import LLMError, LLMUnavailable
from rcll.llm.prompts import extract_facts
from rcll.llm.request_log import CallInfo
from rcll.retain.pipeline import RetainContext
from rcll.store import facts, item_errors, jobs

log = logging.getLogger(__name__)
STAGE = "extract"
# Chosen, not measured: three chunks in a row is a provider outage, not one bad chunk.
STOP_AFTER_UNAVAILABLE = 3
PROGRESS_EVERY = 10
MAX_ENTITY_CHARS = 200
MAX_ENTITIES = 20
# Chosen bounds: years outside them are not a plausible time of something said in a memory.
MIN_YEAR, MAX_YEAR = 1000, 2200
# How far (days) a date grounded only by a relative expression may lie from the item's time:
# a year and a month covers "last year", "next spring" (chosen, not measured).
RELATIVE_WINDOW_DAYS = 400
_TIME_WORDS = re.compile(
    r"\b(today|tonight|yesterday|tomorrow|ago|last|next|this (?:week|month|year|weekend|"
    r"morning|afternoon|evening|summer|winter|spring|fall|autumn)|weekend|recently|earlier|"
    r"later|since|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|"
    r"march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|"
    r"jun|jul|aug|sep|sept|oct|nov|dec|\d{1,2}[/.-]\d{1,2})\b", re.I)


def fact_key(chunk_hash: str, index: int) -> str:
    """The idempotency key of fact ``index`` of a chunk at the current prompt version."""
    raw = f"{chunk_hash}|{extract_facts.VERSION}|{index}"
    return hashlib.sha256(raw.encode()).hexdigest()


def _parse(value: str, base: datetime | None) -> datetime | None:
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        import dateparser

        settings = {"PREFER_DATES_FROM": "past", "RETURN_AS_TIMEZONE_AWARE": True}
        if base is not None:
            settings["RELATIVE_BASE"] = base.replace(tzinfo=None)
        try:
            dt = dateparser.parse(value, settings=settings)
        except Exception:
            return None
    if dt is None:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def grounded_time(value: str | None, text: str, mentioned_at: datetime | None) -> datetime | None:
    """The date ``value`` the model gave, or ``None`` when it cannot be trusted.

    Kept only when it parses (ISO 8601, else :mod:`dateparser`), its year is in
    [``MIN_YEAR``, ``MAX_YEAR``], and it is grounded: its year is written in ``text``, or it
    falls on the item's day (``mentioned_at``), or ``text`` has a time expression (weekday,
    month, "yesterday", "last week", a d/m date…) and it lies within
    ``RELATIVE_WINDOW_DAYS`` of ``mentioned_at``. Anything else is dropped, not invented.
    """
    if not value or not value.strip():
        return None
    dt = _parse(value, mentioned_at)
    if dt is None or not MIN_YEAR <= dt.year <= MAX_YEAR:
        return None
    if str(dt.year) in text:
        return dt
    if mentioned_at is None:
        return None
    ref = mentioned_at if mentioned_at.tzinfo else mentioned_at.replace(tzinfo=UTC)
    if dt.date() == ref.date():
        return dt
    if _TIME_WORDS.search(text) and abs((dt - ref).days) <= RELATIVE_WINDOW_DAYS:
        return dt
    return None


def _clean(text: str) -> str:
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8").strip()


def _entity_names(names: list[str]) -> list[str]:
    out: dict[str, None] = {}
    for n in names:
        n = _clean(n)[:MAX_ENTITY_CHARS]
        if n:
            out.setdefault(n, None)
    return list(out)[:MAX_ENTITIES]


def _item_index(items: list[dict]) -> dict[str, int]:
    """Document external id → item index (the id a retain item states, else its content
    hash, as :func:`rcll.retain.pipeline.version_for` names it)."""
    out = {}
    for i, raw in enumerate(items):
        ext = raw.get("document_id") or (
            "sha256:" + hashlib.sha256(str(raw.get("content", "")).encode()).hexdigest()[:32])
        out.setdefault(ext, i)
    return out


def store_facts(conn, chunk: dict, job_id: str, reply: extract_facts.ExtractionReply,
                earlier: dict[str, str], superseded: list[str] | None = None) -> int:
    """Write one chunk's facts and links (inside the caller's transaction); returns how many
    fact units were new. ``earlier``: short id → unit id of the facts shown in the prompt.
    ``superseded``, when given, receives the ids of the earlier facts superseded here (the
    caller removes them from the cascade's tier 1 after the commit)."""
    bank = chunk["bank_id"]
    ids: list[str] = []
    created = 0
    for i, f in enumerate(reply.facts):
        text = _clean(f.text)
        if not text:
            ids.append("")
            continue
        start = grounded_time(f.occurred_start, chunk["text"], chunk["mentioned_at"])
        end = grounded_time(f.occurred_end, chunk["text"], chunk["mentioned_at"])
        if start and end and end < start:
            end = None
        unit_id, new = facts.insert_derived(
            conn, bank_id=bank, document_id=chunk["document_id"], chunk_id=chunk["chunk_id"],
            chunk_hash=fact_key(chunk["chunk_hash"], i), job_id=job_id, kind=f.kind, text=text,
            context=chunk["context"], room=chunk["room"], hall=chunk["hall"],
            layer=chunk["layer"], mentioned_at=chunk["mentioned_at"], occurred_start=start,
            occurred_end=end, extraction_version=extract_facts.VERSION,
            entity_names=_entity_names(f.entities), metadata=chunk["metadata"],
            tags=chunk["tags"], audience=chunk["audience"], purposes=list(chunk["purposes"]))
        created += new
        ids.append(unit_id)
        facts.link(conn, unit_id, chunk["id"], bank, "derived_from")
    for i, f in enumerate(reply.facts):
        if not ids[i]:
            continue
        for j in f.caused_by:
            if 0 <= j < len(ids) and j != i and ids[j]:
                facts.link(conn, ids[j], ids[i], bank, "causal")
        for sid in f.supersedes:
            old = earlier.get(sid.strip())
            if old:
                facts.supersede(conn, ids[i], old, bank)
                if superseded is not None:
                    superseded.append(old)
    return created


def run_extract(ctx: RetainContext, job_id: str) -> dict | None:
    """The extract stage (see the module docstring). Returns the counts to merge
    (``facts_created``, ``chunks_extracted``, ``chunks_failed``, ``errors``), ``{}`` in chunk
    mode, or ``None`` when the job is gone, ended, or failed here."""
    llm = getattr(ctx, "llm", None)
    if llm is None:
        return {}
    with ctx.pool.connection() as conn:
        loaded = jobs.payload(conn, job_id)
        if loaded is None or loaded[0]["state"] in jobs.TERMINAL:
            return None
        job, items = loaded
        chunks = facts.chunks_for_job(conn, job_id)
    index_of = _item_index(items)
    errors: list[str] = list(job["counts"].get("errors") or [])
    counts = {"facts_created": int(job["counts"].get("facts_created", 0)),
              "chunks_extracted": 0, "chunks_failed": 0, "chunks_not_extracted": 0}
    unavailable_in_row = 0
    recent_n = getattr(ctx, "extract_recent_facts", 20)
    for n, chunk in enumerate(chunks, 1):
        if unavailable_in_row >= STOP_AFTER_UNAVAILABLE:
            counts["chunks_not_extracted"] = len(chunks) - n + 1
            errors.append(f"extract: stopped, LLM provider unavailable; "
                          f"{counts['chunks_not_extracted']} chunks not extracted")
            break
        item = index_of.get(chunk["external_id"])
        with ctx.pool.connection() as conn:
            if facts.extracted(conn, chunk["id"], extract_facts.VERSION):
                counts["chunks_extracted"] += 1
                continue
            shown = facts.recent_facts(conn, chunk["bank_id"], recent_n, chunk["audience"],
                                       list(chunk["purposes"]))
        earlier = {f"E{k}": str(r["id"]) for k, r in enumerate(shown, 1)}
        messages = extract_facts.build_messages(
            chunk["text"], context=chunk["context"], mentioned_at=chunk["mentioned_at"],
            earlier_facts=[(f"E{k}", r["text"]) for k, r in enumerate(shown, 1)])
        try:
            result = llm.complete_json(messages, extract_facts.ExtractionReply, call=CallInfo(
                bank_id=chunk["bank_id"], operation="retain", scope="extract",
                trace_id=str(job_id), document_id=chunk["external_id"]))
        except LLMError as exc:
            unavailable_in_row = unavailable_in_row + 1 if isinstance(exc, LLMUnavailable) else 0
            raw = getattr(exc, "raw_reply", None)
            with ctx.pool.connection() as conn, conn.transaction():
                if jobs.lock_for_work(conn, job_id) is None:
                    return None
                item_errors.add(conn, job_id, STAGE, f"{type(exc).__name__}: {exc}",
                                item_index=item, unit_id=str(chunk["id"]), raw_reply=raw)
                facts.add_usage(conn, job_id, exc.usage)
            counts["chunks_failed"] += 1
            shown_raw = f"; raw reply: {raw[:200]!r}" if raw is not None else ""
            errors.append(f"extract: item {item} chunk {chunk['chunk_index']}: "
                          f"{type(exc).__name__}: {str(exc)[:300]}{shown_raw}")
            log.warning("job %s: extraction of unit %s failed: %s", job_id, chunk["id"], exc)
            continue
        unavailable_in_row = 0
        superseded: list[str] = []
        with ctx.pool.connection() as conn, conn.transaction():
            if jobs.lock_for_work(conn, job_id) is None:
                return None
            counts["facts_created"] += store_facts(conn, chunk, job_id, result.parsed, earlier,
                                                   superseded)
            facts.add_usage(conn, job_id, result.usage)
        invalidation.units_left(getattr(ctx, "hot", None), chunk["bank_id"], superseded)
        counts["chunks_extracted"] += 1
        if n % PROGRESS_EVERY == 0:
            with ctx.pool.connection() as conn:
                jobs.progress(conn, job_id, counts)
    with ctx.pool.connection() as conn:
        counts["facts_created"] = facts.count_for_job(conn, job_id)
    if chunks and counts["chunks_extracted"] == 0:
        with ctx.pool.connection() as conn:
            jobs.finish(conn, job_id, "failed", {**counts, "errors": errors[:20]},
                        "; ".join(errors)[:4000] or "extract: no chunk could be extracted")
        return None
    return {**counts, "errors": errors[:20]}
