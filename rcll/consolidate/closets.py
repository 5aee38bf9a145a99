"""Closets: an LLM summary of a room × hall group's live units (spec §3, §4 step 7).

A ``closets`` job (queue ``consolidate``; made by ``POST …/closets`` or by the beat check
:func:`enqueue_due` when a group passes ``closet_min_units`` new units) summarises, per
group, the newest ``closet_max_units`` live units (prompt
:mod:`rcll.llm.prompts.summarize_closet`). Each closet is stored twice: a ``closets`` row
(summary, embedding, model, prompt version, source unit ids, job) and a memory unit
``kind='summary'``, ``origin='derived'`` with ``derived_from`` links to its sources, embedded
like any unit so recall returns it as ``kind = summary``. A newer closet of a group
supersedes the previous one's summary unit (kept, ``superseded_by_id`` set). A replayed job
makes each group's closet once. Chunk mode makes none.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from rcll.cascade import invalidation
from rcll.llm.client import LLMError
from rcll.llm.prompts import summarize_closet
from rcll.llm.request_log import CallInfo
from rcll.retain.pipeline import RetainContext, embed_missing
from rcll.store import closets, facts, item_errors, jobs

log = logging.getLogger(__name__)
JOB_KIND = "closets"
STAGE = "closets"
MAX_GROUPS_PER_JOB = 20


def create_job(conn, bank_id: str, room: str | None, hall: str | None,
               submitted_by: str | None = None) -> dict:
    """A queued ``closets`` job for one bank (optionally one room and/or hall); its stage is
    ``closets`` from the start, so the recovery sweep re-sends it to the closets task. It
    holds no member's items (scopes ``[]``): every reader of the bank sees it (its item
    errors stay filtered per unit)."""
    job, _ = jobs.create(conn, bank_id, JOB_KIND, [{"room": room, "hall": hall}],
                         {"groups": 0, "closets_created": 0}, submitted_by=submitted_by,
                         scopes=[])
    conn.execute("UPDATE jobs SET stage = %s WHERE id = %s", (STAGE, job["id"]))
    return jobs.get(conn, job["id"])


def _summary_key(job_id: str, room: str, hall: str) -> str:
    raw = f"{job_id}|{room}|{hall}|{summarize_closet.VERSION}"
    return hashlib.sha256(raw.encode()).hexdigest()


def shared_purposes(units: list[dict]) -> tuple[list[dict], list[str]]:
    """The units a closet may summarise and the purposes it gets (spec §7: a derived unit
    gets the intersection of its sources' purposes): newest first, a unit is kept while the
    running intersection of purposes stays non-empty. ``([], [])`` for no units."""
    kept, common = [], None
    for u in units:
        p = set(u.get("purposes") or ())
        nxt = p if common is None else common & p
        if nxt:
            kept.append(u)
            common = nxt
    order = list(units[0].get("purposes") or ()) if units else []
    return kept, [p for p in order if common and p in common]


def run_closets(ctx: RetainContext, job_id: str, max_units: int = 40) -> None:
    """Run a closets job to its end (``succeeded``, ``partial`` when some groups failed,
    ``failed`` when all did or no LLM is configured). Always returns ``None`` (the job is
    ended here; there is no next stage)."""
    with ctx.pool.connection() as conn:
        loaded = jobs.payload(conn, job_id)
        if loaded is None or jobs.start(conn, job_id, STAGE) is None:
            return None
        job, spec = loaded
        if ctx.llm is None:
            jobs.finish(conn, job_id, "failed", None, "llm_not_configured: closets need an LLM")
            return None
        want = (spec or [{}])[0] or {}
        todo = closets.groups(conn, job["bank_id"], want.get("room"), want.get("hall"),
                              MAX_GROUPS_PER_JOB)
    bank = job["bank_id"]
    counts = {"groups": len(todo), "closets_created": 0, "groups_failed": 0}
    errors: list[str] = []
    for g in todo:
        room, hall = g["room"], g["hall"]
        with ctx.pool.connection() as conn:
            if closets.for_job(conn, job_id, room, hall):
                counts["closets_created"] += 1
                continue
            units = closets.group_units(conn, bank, room, hall, max_units)
        units, purposes = shared_purposes(units)
        if not units:
            continue
        messages = summarize_closet.build_messages(
            room, hall, [((u["mentioned_at"].date().isoformat() if u["mentioned_at"] else ""),
                          u["text"][:1500]) for u in units])
        try:
            result = ctx.llm.complete_json(messages, summarize_closet.ClosetReply, call=CallInfo(
                bank_id=bank, operation="consolidation", scope="closets", trace_id=str(job_id)))
        except LLMError as exc:
            with ctx.pool.connection() as conn, conn.transaction():
                if jobs.lock_for_work(conn, job_id) is None:
                    return None
                item_errors.add(conn, job_id, STAGE, f"{room}/{hall}: {type(exc).__name__}: {exc}",
                                raw_reply=getattr(exc, "raw_reply", None))
                facts.add_usage(conn, job_id, exc.usage)
            counts["groups_failed"] += 1
            raw = getattr(exc, "raw_reply", None)
            errors.append(f"closets: {room}/{hall}: {type(exc).__name__}: {str(exc)[:300]}"
                          + (f"; raw reply: {raw[:200]!r}" if raw is not None else ""))
            continue
        reply = result.parsed
        sources = [str(u["id"]) for u in units]
        newest = max((u["mentioned_at"] for u in units if u["mentioned_at"]), default=None)
        with ctx.pool.connection() as conn, conn.transaction():
            if jobs.lock_for_work(conn, job_id) is None:
                return None
            unit_id, _ = facts.insert_derived(
                conn, bank_id=bank, document_id=None, chunk_id=None,
                chunk_hash=_summary_key(job_id, room, hall), job_id=job_id, kind="summary",
                text=reply.summary.strip(), context=reply.title or None, room=room, hall=hall,
                layer=2, mentioned_at=newest, occurred_start=None, occurred_end=None,
                extraction_version=summarize_closet.VERSION, entity_names=[],
                metadata={"closet": True, "title": reply.title, "sources": len(sources)},
                audience="bank", purposes=purposes)
            previous = closets.latest_unit(conn, bank, room, hall, exclude_job=job_id)
            for src in sources:
                facts.link(conn, unit_id, src, bank, "derived_from")
            if previous:
                facts.supersede(conn, unit_id, previous, bank)
            closets.insert(conn, bank_id=bank, room=room, hall=hall, summary=reply.summary.strip(),
                           unit_id=unit_id, model=ctx.llm.model,
                           prompt_version=summarize_closet.VERSION, source_unit_ids=sources,
                           job_id=job_id)
            facts.add_usage(conn, job_id, result.usage)
        if previous:  # committed: the closet it replaces leaves tier 1
            invalidation.units_left(getattr(ctx, "hot", None), bank, [previous])
        counts["closets_created"] += 1
    warnings = []
    if ctx.embedder.get() is not None:
        embed_missing(ctx, job_id=job_id)
        with ctx.pool.connection() as conn:
            closets.set_embedding(conn, job_id)
    else:
        warnings.append(f"closets not embedded, embedder unavailable: {ctx.embedder.error}")
    with ctx.pool.connection() as conn:
        if todo and counts["closets_created"] == 0:
            jobs.finish(conn, job_id, "failed", {**counts, "errors": errors[:20]},
                        "; ".join(errors)[:4000] or "closets: no closet could be made")
        elif errors or warnings:
            jobs.finish(conn, job_id, "partial", {**counts, "errors": errors[:20],
                                                  "warnings": warnings},
                        "; ".join([*errors, *warnings])[:4000])
        else:
            jobs.finish(conn, job_id, "succeeded", counts)
    return None


def enqueue_due(pool, llm_configured: bool, min_units: int, send: Callable[[str], None],
                bank_id: str | None = None) -> list[str]:
    """The beat check: a ``closets`` job for a group with ``min_units`` live units newer than
    its latest closet (at most one job queued or running per bank; optionally one bank
    only), each sent with ``send(job_id)``. Chunk mode does nothing. Returns the job ids."""
    if not llm_configured:
        return []
    made = []
    with pool.connection() as conn:
        due = closets.due_groups(conn, min_units, bank_id=bank_id)
        seen_banks: set[str] = set()
        for g in due:
            if g["bank_id"] in seen_banks:
                continue
            seen_banks.add(g["bank_id"])
            with conn.transaction():
                job = create_job(conn, g["bank_id"], g["room"], g["hall"])
            made.append(str(job["id"]))
    for job_id in made:
        send(job_id)
    return made
