"""The bank transfer service: export a bank as an ``rcll-bank`` stream, import one into a new
or empty bank, clone a bank — what HTTP (``/banks/{id}/export|import``, Hindsight's
``…/transfer/export|import``, ``…/clone`` and ``/v1/default/files/download/{key}``) and the
CLI (``rcll bank export|import``, over HTTP) call.

Roles: every use case needs ``admin`` on the bank it reads or writes (403 ``forbidden``);
an export holds what its caller may see (:func:`rcll.access.visibility.rule_for`: a member's
private units stay out of another member's export; the header's ``scope`` says which).

An import runs in one transaction on one connection: it locks the target bank (created in
that transaction when it does not exist), checks that it holds nothing (409
``bank_not_empty``) and runs no job (409 ``bank_busy``), writes the job row of the import
(kind ``import``, or ``clone``), every record (:class:`rcll.transfer.importer.Importer`) and
the audit entry ``bank.import``, and commits — or, on a bad line, a reference to nothing, an
id taken, a stream cut short or larger than its limits, rolls everything back (a bank it
created is gone again). After the commit tier 1 forgets the bank's cues, the neighbour
lengths the links marked stale are refreshed, and the units left without a vector go to the
``import_embed`` step (:mod:`rcll.transfer.embed`), which ends the job; without such units
the job ends ``succeeded`` in the import's transaction.
"""

from __future__ import annotations

import itertools
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import IsolationLevel

from rcll.access.jobs import job_json
from rcll.access.principal import Principal
from rcll.access.visibility import rule_for
from rcll.banks.ids import check_bank_id
from rcll.cascade import invalidation
from rcll.errors import NotFound, Rejected
from rcll.models.embedder import input_stamp
from rcll.store import audit, banks, jobs, neighbour_length
from rcll.store.jobs import HINDSIGHT_STATUS
from rcll.transfer import embed
from rcll.transfer import format as fmt
from rcll.transfer.export import Embedding, Selection, export_lines, gzip_lines
from rcll.transfer.importer import Importer, ImportResult
from rcll.transfer.lines import Limits, read_lines

if TYPE_CHECKING:
    from rcll.bootstrap import Services

log = logging.getLogger(__name__)

IMPORT_KIND, CLONE_KIND, EXPORT_KIND = "import", "clone", "export"
DOWNLOAD_SUFFIX = ".rcll-bank.jsonl.gz"
WHOLE_BANK = Selection()  # the default export: every record, with vectors, without grants


class ExportNotFound(NotFound):
    code = "export_not_found"


def invalid_export(err: fmt.FormatError) -> Rejected:
    """400 ``invalid_export`` naming the line (``details``: ``line``, ``errors``)."""
    return Rejected(400, "invalid_export", str(err), {"line": err.line, "errors": err.errors})


class ExportStream:
    """The lines (or gzip pieces) of one export, read from a snapshot held open on a
    read-pool connection until the stream ends or :meth:`close` is called (a WSGI server
    calls it when the response is done or the client went away). ``header``: the export's
    header record; ``bytes``: what was sent so far."""

    def __init__(self, stack: ExitStack, lines: Iterator[bytes], header: dict) -> None:
        self._stack, self._it, self.header = stack, lines, header
        self.bytes = 0

    def __iter__(self) -> ExportStream:
        return self

    def __next__(self) -> bytes:
        try:
            piece = next(self._it)
        except BaseException:
            self.close()
            raise
        self.bytes += len(piece)
        return piece

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()
        self._stack.close()


class TransferService:
    """Export, import and clone over the process's pools (``services``); ``enqueue(task,
    job_id)`` sends the ``import_embed`` step (injected: ``rcll`` never imports Celery);
    ``limits``: the bounds of an import (default: from the settings)."""

    def __init__(self, services: Services, enqueue: Callable[[str, str], None],
                 limits: Limits | None = None) -> None:
        self._services = services
        self.enqueue = enqueue
        self.limits = limits or Limits.from_settings(services.settings)

    @property
    def pool(self):
        return self._services.pool

    def embedding(self) -> Embedding:
        """This deployment's embedder as an export's header names it (no model when the
        embedder is switched off)."""
        s = self._services.settings
        if not s.embedder_enabled:
            return Embedding(None, s.embedding_dim, None)
        model = self._services.embedder.model_name
        return Embedding(model, s.embedding_dim, input_stamp(model))

    # --- export ----------------------------------------------------------------------------
    def export(self, principal: Principal, bank_id: str, sel: Selection = WHOLE_BANK, *,
               gzip: bool = False, audit_action: str = "bank.export") -> ExportStream:
        """The bank as an ``rcll-bank`` stream (:func:`rcll.transfer.export.export_lines`;
        ``gzip``: compressed), read from one snapshot. 400 ``invalid_bank_id``, 403
        ``forbidden`` and 404 ``bank_not_found`` are raised here, before anything is sent.
        Audited ``bank.export`` (the selection, the scope)."""
        check_bank_id(bank_id)
        principal.require(bank_id, "admin")
        rule = rule_for(principal, bank_id)
        emb = self.embedding()
        stack = ExitStack()
        try:
            conn = stack.enter_context(self._services.read_pool.connection())
            conn.isolation_level = IsolationLevel.REPEATABLE_READ
            conn.read_only = True

            def reset() -> None:
                if not conn.closed:
                    conn.isolation_level = None
                    conn.read_only = None

            stack.callback(reset)
            stack.enter_context(conn.transaction())
            bank = banks.get(conn, bank_id)
            lines = export_lines(conn, bank, rule, emb, sel)
            first = next(lines)
            with self.pool.connection() as wconn, wconn.transaction():
                audit.record(wconn, principal.member_id, audit_action, bank_id, None,
                             {**sel.to_json(), "gzip": gzip,
                              "scope": "full" if rule.member is None and rule.purposes is None
                              else "caller"})
        except BaseException:
            stack.close()
            raise
        body = itertools.chain([first], lines)
        return ExportStream(stack, gzip_lines(body) if gzip else body, json.loads(first))

    def submit_export(self, principal: Principal, bank_id: str,
                      sel: Selection = WHOLE_BANK) -> dict:
        """Hindsight's ``POST …/transfer/export``: an ``export`` operation, done at once —
        RCLL keeps no archive files: its ``result_metadata.download_url``
        (``/v1/default/files/download/<id>.rcll-bank.jsonl.gz``) streams the export, gzip,
        from the bank as it is when downloaded, for the member who asked (:meth:`download`).
        Audited ``bank.export_requested``. Returns the job row."""
        check_bank_id(bank_id)
        principal.require(bank_id, "admin")
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            job, _ = jobs.create(conn, bank_id, EXPORT_KIND, [], {}, submitted_by=principal.member_id,
                                 scopes=None)
            key = f"{job['id']}{DOWNLOAD_SUFFIX}"
            meta = {"download_url": f"/v1/default/files/download/{key}", "storage_key": key,
                    "filename": f"{bank_id}{DOWNLOAD_SUFFIX}", "byte_size": None,
                    "format": fmt.FORMAT, "version": fmt.VERSION,
                    "content_type": fmt.GZIP_MEDIA_TYPE}
            jobs.finish(conn, str(job["id"]), "succeeded",
                        {"bank_id": bank_id, "selection": sel.to_json(),
                         "result_metadata": meta})
            audit.record(conn, principal.member_id, "bank.export_requested", bank_id, None,
                         {"operation_id": str(job["id"]), **sel.to_json()})
            return jobs.get(conn, job["id"])

    def download(self, principal: Principal, key: str) -> tuple[str, ExportStream]:
        """The export an ``export`` operation names by its storage key, gzip-compressed:
        ``(file name, stream)``. Only for the member who asked for it (or the unrestricted
        principal), still ``admin`` on its bank; anyone else, and an unknown key, gets 404
        ``export_not_found`` (no answer tells another member's export from none)."""
        missing = ExportNotFound(f"no export {key!r}", {"key": key})
        if not key.endswith(DOWNLOAD_SUFFIX):
            raise missing
        try:
            job_id = str(uuid.UUID(key[: -len(DOWNLOAD_SUFFIX)]))
        except ValueError:
            raise missing from None
        with self._services.read_pool.connection() as conn:
            row = conn.execute("SELECT bank_id, kind, state, submitted_by, counts FROM jobs "
                               "WHERE id = %s", (job_id,)).fetchone()
        mine = row is not None and (principal.all_audiences or (
            principal.member_id is not None and row["submitted_by"] == principal.member_id))
        if not mine or row["kind"] != EXPORT_KIND or not principal.can(row["bank_id"], "admin"):
            raise missing
        sel = Selection.from_json(row["counts"].get("selection") or {})
        try:
            stream = self.export(principal, row["bank_id"], sel, gzip=True)
        except NotFound:
            raise missing from None
        return f"{row['bank_id']}{DOWNLOAD_SUFFIX}", stream

    # --- import ----------------------------------------------------------------------------
    def import_stream(self, principal: Principal, bank_id: str | None, src: Any, *,
                      ids: str = "auto", grants: bool = True, data: bool = True,
                      config: bool = True, record_on: str | None = None) -> dict:
        """Import the export read from ``src`` (an object with ``read(n)``: a request body,
        an upload, a file; plain or gzip) into ``bank_id`` (``None``: the export's own bank
        id; an alias stands for its bank, :mod:`rcll.banks.aliases`), new or empty. ``ids``:
        ``auto``, ``keep`` or ``new``
        (:mod:`rcll.transfer.importer`); ``grants``: write the export's grants; ``data`` /
        ``config``: restore the records / the bank's name and config; ``record_on``: the
        bank the operation is recorded against (Hindsight's path bank; default the target;
        it must exist unless it is the target). Returns :meth:`answer`. Raises 400
        ``invalid_export`` (the line and why) / ``invalid_bank_id`` / ``invalid_request``,
        403 ``forbidden``, 404 ``bank_not_found`` (``record_on``), 409 ``bank_not_empty`` /
        ``bank_busy`` / ``ids_in_use``, 413 ``payload_too_large``; nothing is stored then."""
        if ids not in ("auto", "keep", "new"):
            raise Rejected(400, "invalid_request", "ids must be auto, keep or new",
                           {"field": "ids"})
        if bank_id is not None:
            bank_id = self._services.bank_aliases.resolve(check_bank_id(bank_id))
            principal.require(bank_id, "admin")
        lines = read_lines(src, self.limits)
        try:
            first = next(lines, None)
            if first is None:
                raise fmt.FormatError(1, "empty: an export starts with its header line")
            head = fmt.parse_header(first[1])
        except fmt.FormatError as err:
            raise invalid_export(err) from None
        target = bank_id or head.bank.id
        if bank_id is None:
            target = self._services.bank_aliases.resolve(check_bank_id(target))
            principal.require(target, "admin")
        return self._import(principal, target, itertools.chain([first], lines), ids=ids,
                            grants=grants, data=data, config=config,
                            record_on=record_on or target, kind=IMPORT_KIND)

    def clone(self, principal: Principal, source: str, target: str, *, data: bool = True,
              config: bool = True, grants: bool = False) -> dict:
        """Copy ``source`` into ``target``, which must not exist (409 ``bank_exists``), in one
        call: the export of ``source`` as ``principal`` sees it, read from one snapshot, fed
        line by line into the import of ``target`` (ids ``new``; vectors reused: the same
        embedder). Needs ``admin`` on both. The operation (kind ``clone``) is recorded
        against ``source``. Returns :meth:`answer`."""
        check_bank_id(target)
        principal.require(target, "admin")
        if target == source or self._services.bank_aliases.resolve(target) != target:
            raise Rejected(409, "bank_exists", f"{target!r} names a bank already (the source, "
                           "or an alias of a bank)", {"bank_id": target})
        sel = Selection(vectors=True, grants=grants, data=data, config=config)
        stream = self.export(principal, source, sel, audit_action="bank.export")
        try:
            numbered = ((n, ln.rstrip(b"\n")) for n, ln in enumerate(stream, 1))
            return self._import(principal, target, numbered, ids="new", grants=grants,
                                data=data, config=config, record_on=source, kind=CLONE_KIND,
                                must_be_new=True)
        finally:
            stream.close()

    def _import(self, principal: Principal, target: str, lines: Iterable[tuple[int, bytes]],
                *, ids: str, grants: bool, data: bool, config: bool, record_on: str,
                kind: str, must_be_new: bool = False) -> dict:
        s = self._services.settings
        emb = self.embedding()
        try:
            with self.pool.connection() as conn, conn.transaction():
                job = self._lock_empty(conn, principal, target, record_on, kind, must_be_new)
                job_id = str(job["id"])
                imp = Importer(conn, target, ids=ids, emb=emb, purposes=s.purposes,
                               principal=principal, grants=grants, data=data, config=config,
                               job_id=job_id)
                result = imp.run(lines)
                job = self._end_job(conn, job_id, target, result, emb)
                audit.record(conn, principal.member_id, "bank.import", target, None,
                             {"operation_id": job_id, "via": kind, "recorded_on": record_on,
                              **result.to_json(), "grants_applied": result.grants_applied})
        except fmt.FormatError as err:
            raise invalid_export(err) from None
        invalidation.bank_written(self._services.hot_tier, target)
        try:
            neighbour_length.drain_all(self.pool)
        except Exception as exc:  # stale marks only cost speed; the sweep drains them too
            log.warning("neighbour lengths after the import of %s: %s", target, exc)
        if job["state"] == "queued":
            try:
                self.enqueue(embed.TASK, job_id)
            except Exception as exc:  # the recovery sweep re-sends a queued job
                log.warning("enqueue of import_embed %s failed (the sweep re-sends it): %s",
                            job_id, exc)
        return self.answer(principal, target, job, result)

    def _lock_empty(self, conn, principal: Principal, target: str, record_on: str, kind: str,
                    must_be_new: bool) -> dict:
        """Create or lock ``target`` (``FOR UPDATE``: no other transaction writes into it
        until the import commits), refuse it unless new (``must_be_new``) or empty and idle,
        and create the import's job on ``record_on``."""
        try:
            with conn.transaction():
                created = conn.execute(
                    "INSERT INTO memory_banks (id, name) VALUES (%s, %s) ON CONFLICT (id) DO "
                    "NOTHING RETURNING id", (target, target)).fetchone() is not None
        except psycopg.errors.UniqueViolation:  # an alias made meanwhile (migration 0025)
            raise Rejected(409, "bank_exists", f"{target!r} is an alias of another bank",
                           {"bank_id": target}) from None
        conn.execute("SELECT id FROM memory_banks WHERE id = %s FOR UPDATE", (target,))
        if not created:
            if must_be_new:
                raise Rejected(409, "bank_exists", f"bank {target!r} exists already; clone "
                               "into a new bank id", {"bank_id": target})
            state = conn.execute(
                """SELECT EXISTS (SELECT 1 FROM memory_units WHERE bank_id = %(b)s)
                          OR EXISTS (SELECT 1 FROM documents WHERE bank_id = %(b)s)
                          OR EXISTS (SELECT 1 FROM entities WHERE bank_id = %(b)s)
                          OR EXISTS (SELECT 1 FROM closets WHERE bank_id = %(b)s) AS full,
                          EXISTS (SELECT 1 FROM jobs WHERE bank_id = %(b)s
                                  AND state IN ('queued', 'running')) AS busy""",
                {"b": target}).fetchone()
            if state["full"]:
                raise Rejected(409, "bank_not_empty",
                               f"bank {target!r} holds memories already; import into a new "
                               "or empty bank", {"bank_id": target})
            if state["busy"]:
                raise Rejected(409, "bank_busy", f"bank {target!r} has jobs queued or running; "
                               "import when they have ended", {"bank_id": target})
        if record_on != target:
            principal.require(record_on, "read")
            banks.get(conn, record_on)
        job, _ = jobs.create(conn, record_on, kind, [], {"bank_id": target},
                             submitted_by=principal.member_id, scopes=None)
        # no items to run again: a failed import_embed is not retried as a retain
        # (rcll.operations.service.retry); `rcll embeddings rebuild` re-makes vectors
        conn.execute("UPDATE jobs SET payload = NULL WHERE id = %s", (job["id"],))
        return job

    def _end_job(self, conn, job_id: str, target: str, result: ImportResult,
                 emb: Embedding) -> dict:
        """The job's counts; ``succeeded`` now unless units wait for the embedder (then
        ``queued`` at ``import_embed``, or ``partial`` without an embedder)."""
        units = result.counts.get("unit", 0)
        counts = {"bank_id": target, "units_created": units,
                  "units_embedded": result.vectors_reused, "import": result.to_json(),
                  "result_metadata": {"bank_id": target, **result.to_json()}}
        if result.units_to_embed and emb.model is not None:
            jobs.progress(conn, job_id, counts, stage=embed.STAGE)
        elif result.units_to_embed:
            warning = f"{result.units_to_embed} units without a vector: no embedder here"
            jobs.finish(conn, job_id, "partial", {**counts, "warnings": [warning]}, warning)
        else:
            jobs.finish(conn, job_id, "succeeded", counts)
        return jobs.get(conn, job_id)

    def answer(self, principal: Principal, target: str, job: dict,
               result: ImportResult) -> dict:
        """``{bank_id, operation_id, status (Hindsight's), state, ids, counts, vectors_reused,
        units_to_embed, grants_applied, grants_skipped, dangling_references, source_bank_id,
        operation}``."""
        out = result.to_json()
        return {"bank_id": target, "operation_id": str(job["id"]),
                "status": HINDSIGHT_STATUS.get(job["state"], job["state"]),
                "state": job["state"], **out,
                "operation": job_json(principal, job)}
