"""The bank transfer service: export a bank as an ``rcll-bank`` stream, import one into an
empty bank as a job — what HTTP (``/banks/{id}/export|import``, Hindsight's
``…/transfer/export|import`` and ``/v1/default/files/download/{key}``) and the CLI
(``rcll bank export|import``) call.

Roles: an export needs ``read`` and holds what the caller may see
(:mod:`rcll.transfer.export`); its grants need ``admin`` on the bank (403 otherwise). An
import needs ``write`` on the target bank; grants in it are written only for a bank admin
(else skipped and counted). An import goes into a bank that does not exist or holds nothing
(no unit, document or entity) — otherwise 409 ``bank_not_empty``, so an import is never
applied twice — and runs as a job (kind ``import``, queue ``maintenance``) in one
transaction: the bank holds all of the export or, if the job fails, nothing of it (an empty
bank, into which the import can be run again). The upload is checked line by line before the
job is made (400 ``invalid_export`` with the line number) and spooled, gzip-compressed, to
``transfer_dir``, which the API and the workers share. Every job failure is in the job's
``error``. A Hindsight-style export is a job too (kind ``export``): it writes the stream to
``transfer_dir`` and its counts carry ``result_metadata`` (``download_url``, ``storage_key``,
``byte_size``, ``filename``), shown only to its submitter.
"""

from __future__ import annotations

import gzip
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import Rule, rule_for
from rcll.cascade import invalidation
from rcll.errors import BankNotFound, InvalidInput, NotFound, Rejected
from rcll.models.embedder import input_stamp
from rcll.retain.submit import submit_job
from rcll.store import audit, banks, jobs
from rcll.transfer import export as exp
from rcll.transfer import format as fmt
from rcll.transfer import importer

if TYPE_CHECKING:
    from rcll.bootstrap import Services
    from rcll.retain.pipeline import RetainContext

log = logging.getLogger(__name__)

IMPORT_KIND, IMPORT_STAGE, IMPORT_TASK = "import", "import", "transfer.import"
EXPORT_KIND, EXPORT_STAGE, EXPORT_TASK = "export", "export", "transfer.export"
IDS = ("auto", "keep", "new")
GZIP_MAGIC = b"\x1f\x8b"


class NotFoundExport(NotFound):
    code = "export_not_found"


def invalid_export(err: fmt.ExportLineError) -> Rejected:
    """400 ``invalid_export`` naming the line (``details``: ``line``, ``errors``)."""
    return Rejected(400, "invalid_export", str(err), {"line": err.line, "errors": err.errors})


def open_lines(raw: IO[bytes]) -> Iterator[bytes]:
    """Lines of an export read from ``raw`` (plain or gzip, told by its first two bytes).
    A raw stream (a request body) is read through a 1 MiB buffer: its own line iterator
    reads a few bytes per call."""
    import io

    if isinstance(raw, io.RawIOBase):
        raw = io.BufferedReader(raw, 1 << 20)
    head = raw.read(2)
    if head == GZIP_MAGIC:
        stream = gzip.GzipFile(fileobj=_Prefixed(head, raw))
        yield from io.BufferedReader(stream)
        return
    first = True
    for line in raw:
        if first:
            line, first = head + line, False
        yield line
    if first and head:
        yield head


class _Prefixed:
    """A read-only file object: ``prefix`` then the rest of ``raw``."""

    def __init__(self, prefix: bytes, raw: IO[bytes]) -> None:
        self.prefix, self.raw = prefix, raw

    def read(self, n: int = -1) -> bytes:
        if self.prefix:
            if n is None or n < 0:
                out, self.prefix = self.prefix + self.raw.read(), b""
                return out
            out, self.prefix = self.prefix[:n], self.prefix[n:]
            if len(out) < n:
                out += self.raw.read(n - len(out))
            return out
        return self.raw.read(n)


class TransferService:
    """Export and import over the process's pools (``services``); ``enqueue(task, job_id)``
    sends a job (injected: ``rcll`` never imports Celery)."""

    def __init__(self, services: Services, enqueue: Callable[[str, str], None]) -> None:
        self._services = services
        self.enqueue = enqueue

    @property
    def pool(self):
        return self._services.pool

    @property
    def transfer_dir(self) -> Path:
        d = self._services.settings.transfer_path
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _embedding(self) -> tuple[str | None, str | None, int]:
        s = self._services.settings
        if not s.embedder_enabled:
            return None, None, s.embedding_dim
        model = self._services.embedder.model_name
        return model, input_stamp(model), s.embedding_dim

    # --- export ----------------------------------------------------------------------------
    def _export_rule(self, principal: Principal, bank_id: str, grants: bool) -> Rule:
        principal.require(bank_id, "read")
        if grants:
            principal.require(bank_id, "admin")
        return rule_for(principal, bank_id)

    def export(self, principal: Principal, bank_id: str, *, vectors: bool = True,
               grants: bool = False) -> Iterator[bytes]:
        """The bank as export lines (:func:`rcll.transfer.export.export_lines`), streamed
        from one snapshot on a read-pool connection held while the stream is read. The
        first line is produced here, so 403 ``forbidden`` and 404 ``bank_not_found`` are
        raised before anything is sent. Audited ``bank.export`` (vectors, grants, scope)."""
        rule = self._export_rule(principal, bank_id, grants)
        model, stamp, dim = self._embedding()
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            audit.record(conn, principal.member_id, "bank.export", bank_id, None,
                         {"vectors": vectors, "grants": grants,
                          "scope": "full" if rule == Rule() else "member"})
        return self._stream(bank_id, rule, model, stamp, dim, vectors, grants)

    def _stream(self, bank_id, rule, model, stamp, dim, vectors, grants) -> Iterator[bytes]:
        ctx = self._services.read_pool.connection()
        conn = ctx.__enter__()
        gen = exp.export_lines(conn, bank_id, rule, model=model, dim=dim, stamp=stamp,
                               vectors=vectors, grants=grants)
        try:
            first = next(gen)
        except BaseException:
            ctx.__exit__(None, None, None)
            raise

        def rest() -> Iterator[bytes]:
            try:
                yield first
                yield from gen
            finally:
                gen.close()
                ctx.__exit__(None, None, None)

        return rest()

    def submit_export(self, principal: Principal, bank_id: str, *, vectors: bool = True,
                      grants: bool = False) -> dict:
        """A queued ``export`` job (Hindsight's ``POST …/transfer/export``): the worker
        writes the export as the submitter may see it to ``transfer_dir``. Returns the job
        row. 403 / 404 as :meth:`export`."""
        rule = self._export_rule(principal, bank_id, grants)

        def create(conn) -> dict:
            banks.get(conn, bank_id)
            job, _ = jobs.create(conn, bank_id, EXPORT_KIND,
                                 [{"member": rule.member, "purposes": rule.purposes,
                                   "vectors": vectors, "grants": grants}],
                                 {"lines": 0}, submitted_by=principal.member_id, scopes=None)
            conn.execute("UPDATE jobs SET stage = %s WHERE id = %s", (EXPORT_STAGE, job["id"]))
            return jobs.get(conn, job["id"])

        return submit_job(self.pool, self.enqueue, self._services.retain_context, EXPORT_TASK,
                          create, actor=principal.member_id, action="bank.export",
                          bank_id=bank_id, details={"vectors": vectors, "grants": grants},
                          what="export job")

    def run_export(self, ctx: RetainContext, job_id: str) -> None:
        """The ``export`` job (worker): write ``<transfer_dir>/<job id>.jsonl.gz``, then end
        the job ``succeeded`` with counts ``lines``, ``byte_size`` and ``result_metadata``."""
        with ctx.pool.connection() as conn:
            job = jobs.start(conn, job_id, EXPORT_STAGE)
            if job is None:
                return
            _, payload = jobs.payload(conn, job_id)
        opts = payload[0]
        bank_id = job["bank_id"]
        rule = Rule(opts["member"], None if opts["purposes"] is None
                    else tuple(opts["purposes"]))
        model, stamp, dim = self._embedding()
        name = f"{job_id}.jsonl.gz"
        path = self.transfer_dir / name
        tmp = path.with_suffix(".part")
        lines = 0
        with ctx.pool.connection() as conn, gzip.open(tmp, "wb", compresslevel=3) as out:
            for line in exp.export_lines(conn, bank_id, rule, model=model, dim=dim, stamp=stamp,
                                         vectors=opts["vectors"], grants=opts["grants"]):
                out.write(line)
                lines += 1
                if lines % 10000 == 0:
                    with ctx.pool.connection() as pc:
                        jobs.progress(pc, job_id, {"lines": lines})
        os.replace(tmp, path)
        size = path.stat().st_size
        meta = {"download_url": f"/v1/default/files/download/{name}", "storage_key": name,
                "byte_size": size, "filename": f"{bank_id}.rcll-bank.jsonl.gz",
                "format": fmt.FORMAT, "version": fmt.VERSION}
        with ctx.pool.connection() as conn:
            jobs.finish(conn, job_id, "succeeded",
                        {"lines": lines, "byte_size": size, "result_metadata": meta})

    def download(self, principal: Principal, key: str) -> tuple[Path, str]:
        """The file of a finished ``export`` job by its storage key (``<job id>.jsonl.gz``)
        and a download name: only for the job's submitter (or the unrestricted principal),
        holding ``read`` on its bank; anyone else, and an unknown key, 404
        ``export_not_found`` (no route tells another member's export from none)."""
        job_id = key.removesuffix(".jsonl.gz")
        missing = NotFoundExport(f"no export {key!r}", {"key": key})
        try:
            uuid.UUID(job_id)
        except ValueError:
            raise missing from None
        with self.pool.connection() as conn:
            try:
                job = jobs.get(conn, job_id)
            except NotFound:
                raise missing from None
            owner = conn.execute("SELECT submitted_by FROM jobs WHERE id = %s",
                                 (job_id,)).fetchone()["submitted_by"]
        mine = principal.all_audiences or (principal.member_id is not None
                                           and owner == principal.member_id)
        path = self.transfer_dir / f"{job_id}.jsonl.gz"
        if (job.get("kind") != EXPORT_KIND or job["state"] != "succeeded" or not mine
                or not principal.can(job["bank_id"], "read") or not path.exists()):
            raise missing
        return path, f"{job['bank_id']}.rcll-bank.jsonl.gz"

    # --- import ----------------------------------------------------------------------------
    def spool(self, raw: IO[bytes]) -> tuple[Path, fmt.Header, int]:
        """Check the upload ``raw`` (plain or gzip) line by line and copy it, gzip-compressed,
        to ``transfer_dir``; ``(path, header, lines)``. Raises 400 ``invalid_export`` (the
        spool file removed) at the first bad line."""
        path = self.transfer_dir / f"import-{uuid.uuid4()}.jsonl.gz"
        header, n = None, 0
        try:
            with gzip.open(path, "wb", compresslevel=1) as out:
                def lines() -> Iterator[bytes]:
                    for line in open_lines(raw):
                        out.write(line if line.endswith(b"\n") else line + b"\n")
                        yield line
                for n, rec in fmt.read_stream(lines()):  # noqa: B007 (n: the count)
                    if header is None:
                        header = rec
        except fmt.ExportLineError as err:
            path.unlink(missing_ok=True)
            raise invalid_export(err) from None
        except (OSError, EOFError) as err:
            path.unlink(missing_ok=True)
            raise Rejected(400, "invalid_export", f"cannot read the upload: {err}",
                           {"line": n + 1, "errors": []}) from None
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path, header, n

    def submit_import(self, principal: Principal, bank_id: str | None, raw: IO[bytes], *,
                      ids: str = "auto", grants: bool = True) -> dict:
        """Check and spool the upload (:meth:`spool`), then make the ``import`` job into
        ``bank_id`` (``None``: the export's own bank id). ``ids``: ``keep``, ``new`` or
        ``auto`` (``keep`` unless the export's source bank exists in this deployment, where
        its ids are taken). Returns the job row. Raises 400 ``invalid_export`` /
        ``invalid_request``, 403 ``forbidden``, 409 ``bank_not_empty`` (the bank holds
        units, documents or entities) or ``import_running`` (another import of it is
        queued or running)."""
        from rcll.banks.ids import check_bank_id

        if ids not in IDS:
            raise InvalidInput(f"ids must be one of {', '.join(IDS)}", {"field": "ids"})
        if bank_id is not None:
            check_bank_id(bank_id)
            principal.require(bank_id, "write")
            self._refuse_nonempty(bank_id)  # before reading a large upload
        path, header, lines = self.spool(raw)
        target = bank_id or header.bank.id
        try:
            if bank_id is None:
                check_bank_id(target)
                principal.require(target, "write")
            mode = ids
            if mode == "auto":
                with self.pool.connection() as conn:
                    exists = conn.execute("SELECT 1 FROM memory_banks WHERE id = %s",
                                          (header.bank.id,)).fetchone()
                mode = "new" if exists and header.bank.id != target else "keep"
                if exists and header.bank.id == target:
                    mode = "keep"
            grants_ok = grants and principal.can(target, "admin")

            def create(conn) -> dict:
                self._refuse_nonempty(target, conn)
                banks.ensure(conn, target)
                job, _ = jobs.create(conn, target, IMPORT_KIND,
                                     [{"path": str(path), "ids": mode, "grants": grants_ok,
                                       "lines": lines}],
                                     {"lines_total": lines, "lines": 0},
                                     submitted_by=principal.member_id, scopes=None)
                conn.execute("UPDATE jobs SET stage = %s WHERE id = %s",
                             (IMPORT_STAGE, job["id"]))
                return jobs.get(conn, job["id"])

            return submit_job(self.pool, self.enqueue, self._services.retain_context,
                              IMPORT_TASK, create, actor=principal.member_id,
                              action="bank.import", bank_id=target,
                              details={"source_bank_id": header.bank.id, "lines": lines,
                                       "ids": mode, "grants": grants_ok}, what="import job")
        except BaseException:
            path.unlink(missing_ok=True)
            raise

    def _refuse_nonempty(self, bank_id: str, conn=None) -> None:
        if conn is None:
            with self.pool.connection() as c:
                return self._refuse_nonempty(bank_id, c)
        if conn.execute("SELECT 1 FROM memory_banks WHERE id = %s FOR UPDATE",
                        (bank_id,)).fetchone() is None:
            return
        busy = conn.execute(
            """SELECT EXISTS (SELECT 1 FROM memory_units WHERE bank_id = %(b)s)
                      OR EXISTS (SELECT 1 FROM documents WHERE bank_id = %(b)s)
                      OR EXISTS (SELECT 1 FROM entities WHERE bank_id = %(b)s) AS full,
                      EXISTS (SELECT 1 FROM jobs WHERE bank_id = %(b)s AND kind = 'import'
                              AND state IN ('queued', 'running')) AS running""",
            {"b": bank_id}).fetchone()
        if busy["running"]:
            raise Rejected(409, "import_running",
                           f"an import into bank {bank_id!r} is already queued or running",
                           {"bank_id": bank_id})
        if busy["full"]:
            raise Rejected(409, "bank_not_empty",
                           f"bank {bank_id!r} already holds memories; import into a new or "
                           "empty bank (delete it first, or name another target bank)",
                           {"bank_id": bank_id})

    def run_import(self, ctx: RetainContext, job_id: str) -> None:
        """The ``import`` job (worker): in one transaction check the bank is still empty
        and write the spooled export (:func:`rcll.transfer.importer.import_stream`); then
        embed what came without a usable vector, and end the job ``succeeded`` with the
        import's counts. A bad line (or a bank written to meanwhile) ends it ``failed``
        with the reason, nothing written. Progress: counts ``lines`` of ``lines_total``."""
        with ctx.pool.connection() as conn:
            job = jobs.start(conn, job_id, IMPORT_STAGE)
            if job is None:
                return
            found = jobs.payload(conn, job_id)
        bank_id = job["bank_id"]
        if found is None:
            raise RuntimeError("the import job has no payload")
        opts = found[1][0]
        path = Path(opts["path"])
        model, stamp, dim = self._embedding()

        def progress(result: importer.ImportResult) -> None:
            with ctx.pool.connection() as pc:
                jobs.progress(pc, job_id, {"lines": result.lines})

        try:
            with ctx.pool.connection() as conn, conn.transaction(), \
                    gzip.open(path, "rb") as fh:
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))",
                             (bank_id,))
                full = conn.execute(
                    """SELECT EXISTS (SELECT 1 FROM memory_units WHERE bank_id = %(b)s)
                       OR EXISTS (SELECT 1 FROM documents WHERE bank_id = %(b)s) AS f""",
                    {"b": bank_id}).fetchone()["f"]
                if full:
                    raise Rejected(409, "bank_not_empty",
                                   f"bank {bank_id!r} was written to before the import ran")
                result = importer.import_stream(conn, fh, bank_id, ids=opts["ids"],
                                                model=model, stamp=stamp, dim=dim,
                                                grants=opts["grants"], on_progress=progress)
                audit.record(conn, job.get("submitted_by"), "bank.import.done", bank_id, None,
                             {"operation_id": job_id, **result.to_json()})
        except (fmt.ExportLineError, Rejected, FileNotFoundError) as err:
            with ctx.pool.connection() as conn:
                jobs.finish(conn, job_id, "failed", None, f"import: {err}"[:4000])
            path.unlink(missing_ok=True)
            return
        path.unlink(missing_ok=True)
        invalidation.bank_written(ctx.hot, bank_id)
        counts = {**result.to_json(), "lines": result.lines}
        with ctx.pool.connection() as conn:
            jobs.progress(conn, job_id, counts, stage="embed")
        embedded = 0
        if result.to_embed and model is not None:
            from rcll.retain.pipeline import embed_missing

            def on_batch(n: int) -> None:
                with ctx.pool.connection() as pc:
                    jobs.progress(pc, job_id, {"units_embedded": n})

            embedded = embed_missing(ctx, bank_id=bank_id, on_batch=on_batch)
            invalidation.bank_written(ctx.hot, bank_id)
        with ctx.pool.connection() as conn:
            jobs.finish(conn, job_id, "succeeded", {**counts, "units_embedded": embedded})


def iter_file(path: Path, chunk: int = 1 << 16) -> Iterable[bytes]:
    """A file's bytes in ``chunk``-byte pieces (a download streamed, not read whole)."""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                return
            yield block


def missing_bank(bank_id: str) -> BankNotFound:
    return BankNotFound(f"bank {bank_id!r} not found", {"bank_id": bank_id})
