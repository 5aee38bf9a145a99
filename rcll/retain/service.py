"""The retain service: what HTTP, the CLI and (later) MCP call to retain items.

It owns the request rules in one place — limits (items per request, characters per item,
items in a synchronous request), the idempotency key (header or body, one check, one error
code), storing the job, enqueue after commit through an injected ``enqueue(task_name,
job_id)`` (so ``rcll`` never imports Celery), requeue of a job whose enqueue failed, and the
synchronous path (every stage of :mod:`rcll.retain.stages` in this process).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from rcll.access.principal import BANK_AUDIENCE, DEFAULT_PURPOSES, Principal
from rcll.access.purposes import unit_access
from rcll.config import Settings
from rcll.errors import Rejected
from rcll.retain import stages
from rcll.retain.models import RetainItem
from rcll.retain.pipeline import RetainContext
from rcll.retain.submit import send_after_commit, submit_retain
from rcll.store import audit, jobs
from rcll.validation import clean_text

Enqueue = Callable[[str, str], None]
MAX_KEY_CHARS = 200

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetainLimits:
    """Request-safety limits (not document-size limits): ``max_items`` per request,
    ``max_item_chars`` characters of content per item, ``sync_max_items`` items in an
    ``async: false`` request (it runs inside the request)."""

    max_items: int = 1000
    max_item_chars: int = 32_000_000
    sync_max_items: int = 100

    @classmethod
    def from_settings(cls, s: Settings) -> RetainLimits:
        """The limits configured by ``RCLL_MAX_ITEMS_PER_REQUEST`` and
        ``RCLL_MAX_ITEM_CHARS``."""
        return cls(max_items=s.max_items_per_request, max_item_chars=s.max_item_chars)


class RetainService:
    """Accepts retain requests. ``context()`` gives the :class:`RetainContext` for the sync
    path; ``enqueue(task_name, job_id)`` sends a stage to the workers."""

    def __init__(self, pool: ConnectionPool, context: Callable[[], RetainContext],
                 enqueue: Enqueue, limits: RetainLimits,
                 purposes: tuple[str, ...] = DEFAULT_PURPOSES):
        self.pool = pool
        self.context = context
        self.enqueue = enqueue
        self.limits = limits
        self.purposes = tuple(purposes)  # RCLL_PURPOSES, the closed set

    def with_access(self, bank_id: str, items: list[RetainItem],
                    principal: Principal | None) -> list[RetainItem]:
        """``items`` with ``audience`` and ``purposes`` checked and filled in for the writer
        ``principal`` (None: an internal call) by :func:`rcll.access.purposes.unit_access`;
        an audience naming another member must name an existing one (400
        ``unknown_member``). Raises what ``unit_access`` raises and
        :class:`~rcll.errors.Forbidden` when the principal lacks ``write`` on the bank."""
        if principal is not None:
            principal.require(bank_id, "write")
        out, others = [], set()
        for item in items:
            aud, purposes = unit_access(principal, bank_id, item.audience, item.purposes,
                                        known=self.purposes)
            if aud != BANK_AUDIENCE and (principal is None or aud != principal.member_id):
                others.add(aud)
            out.append(item.model_copy(update={"audience": aud, "purposes": purposes}))
        if others:
            with self.pool.connection() as conn:
                found = {r["id"] for r in conn.execute(
                    "SELECT id FROM members WHERE id = ANY(%s)", (sorted(others),)).fetchall()}
            missing = sorted(others - found)
            if missing:
                raise Rejected(400, "unknown_member",
                               f"audience names no member: {', '.join(missing[:5])}",
                               {"audience": missing[:20]})
        return out

    def check_item_count(self, n: int) -> None:
        """Raise ``413 too_many_items`` over :attr:`RetainLimits.max_items` (callers check
        this before parsing a large body)."""
        if n > self.limits.max_items:
            raise Rejected(413, "too_many_items", f"at most {self.limits.max_items} items per request",
                           {"items": n, "max": self.limits.max_items})

    @staticmethod
    def idempotency_key(body_key: object = None, header_key: object = None) -> str | None:
        """The request's idempotency key, from the body field or the ``Idempotency-Key``
        header: each given one must be a string of 1-200 characters of clean text (no NUL,
        no lone surrogate, :func:`rcll.validation.clean_text`), and when both are given they
        must be equal. Raises ``400 invalid_idempotency_key``."""
        given = [k for k in (body_key, header_key) if k is not None]
        for key in given:
            if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS or not _clean(key):
                raise Rejected(400, "invalid_idempotency_key",
                               f"an idempotency key must be 1-{MAX_KEY_CHARS} characters "
                               "without NUL or lone surrogates")
        if len(set(given)) > 1:
            raise Rejected(400, "invalid_idempotency_key",
                           "the Idempotency-Key header and the idempotency_key field differ")
        return given[0] if given else None

    def retain(self, bank_id: str, items: list[RetainItem], *, async_: bool = True,
               idempotency_key: str | None = None,
               principal: Principal | None = None) -> tuple[dict, bool]:
        """Store a retain job for ``items`` written by ``principal`` and run or enqueue it;
        ``(job, created)``.

        Every item's ``audience`` and ``purposes`` are resolved first (:meth:`with_access`),
        so the stored job — and its idempotency request hash — holds the values its units
        get.

        ``async_``: enqueue the first stage after commit and return the job as committed
        (``queued``, though a worker may already have taken it); otherwise
        run every stage here and return the ended job. A repeated key returns the first job
        (``created=False``), re-enqueued if its enqueue had failed. Raises
        :class:`~rcll.errors.Rejected`: ``400 unknown_purpose``, ``400 invalid_purposes``,
        ``400 invalid_audience``, ``400 unknown_member``, ``403 audience_not_allowed``,
        ``413 too_many_items``, ``413 item_too_large``,
        ``400 sync_batch_too_large``, ``503 queue_unavailable`` (the job is ``failed`` with
        ``enqueue failed`` and can be retried with the same key).

        A new job writes one audit entry ``retain`` (actor: ``principal``'s member id;
        details ``operation_id``, ``items``), in the job's transaction; a repeated key none.
        """
        self.check_item_count(len(items))
        for i, item in enumerate(items):
            if len(item.content) > self.limits.max_item_chars:
                raise Rejected(413, "item_too_large",
                               f"item {i} has {len(item.content)} characters; "
                               f"the limit is {self.limits.max_item_chars}",
                               {"index": i, "chars": len(item.content),
                                "max": self.limits.max_item_chars})
        if not async_ and len(items) > self.limits.sync_max_items:
            raise Rejected(400, "sync_batch_too_large",
                           f"async=false takes at most {self.limits.sync_max_items} items; "
                           "send async", {"items": len(items), "max": self.limits.sync_max_items})
        items = self.with_access(bank_id, items, principal)
        with self.pool.connection() as conn:
            actor = principal.member_id if principal is not None else None
            job, created = submit_retain(conn, bank_id, items, idempotency_key, actor=actor)
            if created:
                audit.record(conn, actor, "retain", bank_id, None,
                             {"operation_id": str(job["id"]), "items": len(items)})
        committed = created  # ``job`` is then the row as committed (jobs.create returns it)
        job_id = str(job["id"])
        if not created and job["state"] == "failed":  # a retry of a job never enqueued
            with self.pool.connection() as conn:
                created = jobs.requeue_failed_enqueue(conn, job_id)
        if created:
            if async_:
                send_after_commit(self.enqueue, self.pool, stages.first().task_name, job_id,
                                  message="could not enqueue the job; retry later with the "
                                          "same key")
                if committed:
                    # the job as committed: a worker may already have taken it, and the
                    # answer to an async submit says it was accepted (queued), not a race
                    return job, created
            else:
                stages.run_sync(self.context(), job_id)
        with self.pool.connection() as conn:
            return jobs.get(conn, job_id), created


    def reprocess(self, bank_id: str, document_id: str, principal: Principal) -> dict:
        """Re-run the retain pipeline on the stored latest version of ``document_id`` as a
        new queued job: the lineage the caller sees that ``GET …/documents/{id}`` shows
        (:func:`rcll.store.documents.lineage`), its live text (its live chunks in order,
        :func:`rcll.store.documents.live_text` — what forget erased stays erased) and its
        document-level values (metadata, tags, context, time, audience, purposes) as one
        item under the same document id, so it is the lineage's next version, chunked and
        classified with the current settings. The job's counts carry ``reprocess`` (the
        document id; its history shows a ``reprocess`` event) and one audit entry
        ``document.reprocess`` is written in its transaction. Returns the queued job.

        Raises 403 ``forbidden`` (no write role), 404 ``bank_not_found`` /
        ``document_not_found``, 409 ``nothing_to_reprocess`` (no live chunk left), 413
        ``item_too_large``, 503 ``queue_unavailable``."""
        from rcll.access.visibility import rule_for
        from rcll.store import banks, documents

        principal.require(bank_id, "write")
        rule = rule_for(principal, bank_id)
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            doc = documents.lineage(conn, bank_id, document_id, rule=rule)
            text = documents.live_text(conn, doc["pk"], rule=rule)
        if not text or not text.strip():
            raise Rejected(409, "nothing_to_reprocess",
                           f"document {document_id!r} has no live text left to reprocess",
                           {"document_id": document_id})
        if len(text) > self.limits.max_item_chars:
            raise Rejected(413, "item_too_large",
                           f"the document's text has {len(text)} characters; the limit is "
                           f"{self.limits.max_item_chars}",
                           {"chars": len(text), "max": self.limits.max_item_chars})
        item = RetainItem(content=text, document_id=document_id, metadata=doc["metadata"],
                          tags=doc["tags"], context=doc["context"],
                          timestamp=doc["mentioned_at"], audience=doc["audience"],
                          purposes=doc["purposes"])
        [item] = self.with_access(bank_id, [item], principal)
        actor = principal.member_id
        with self.pool.connection() as conn, conn.transaction():
            job, _ = submit_retain(conn, bank_id, [item], actor=actor,
                                   counts={"reprocess": document_id})
            audit.record(conn, actor, "document.reprocess", bank_id, None,
                         {"operation_id": str(job["id"]), "document_id": document_id,
                          "from_revision": doc["revision"]})
        send_after_commit(self.enqueue, self.pool, stages.first().task_name, str(job["id"]))
        return job

    def retain_sync_sliced(self, bank_id: str, items: list[RetainItem], *,
                           idempotency_key: str | None = None,
                           principal: Principal | None = None) -> list[dict]:
        """Hindsight's synchronous retain of any batch (its ``async`` defaults to false and
        it has no per-request sync cap): ``items`` in consecutive slices of at most
        :attr:`RetainLimits.sync_max_items`, each slice one job run here (:meth:`retain`
        with ``async_=False``), one after another; returns the jobs in order. The first
        slice's idempotency key is ``idempotency_key`` (so Hindsight's ``operation_id``
        still names the first operation), slice ``i``'s is ``"{key}#{i}"``; a repeated
        request returns the same jobs. A slice that fails stops the run (its job is
        ``failed``, returned last; the later slices are not stored). Raises what
        :meth:`retain` raises (``413 too_many_items`` over ``max_items``)."""
        self.check_item_count(len(items))
        step = max(1, self.limits.sync_max_items)
        out: list[dict] = []
        for i in range(0, len(items), step):
            n = i // step
            key = None if idempotency_key is None else (
                idempotency_key if n == 0 else f"{idempotency_key}#{n}")
            job, _ = self.retain(bank_id, items[i:i + step], async_=False, idempotency_key=key,
                                 principal=principal)
            out.append(job)
            if job["state"] == "failed":
                break
        return out


def _clean(text: str) -> bool:
    try:
        clean_text(text)
    except ValueError:
        return False
    return True
