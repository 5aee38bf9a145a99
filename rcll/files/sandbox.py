"""Run one file's conversion in a child process bounded in wall-clock time and memory.

Why a child process (and not a separate queue or an in-process check): the converters
(pdfium, markitdown's mammoth/lxml/pandas) run native code that cannot be interrupted or
metered from Python, and a file bomb can take minutes and gigabytes inside one call. In a
child process the kernel enforces the bounds: ``resource.setrlimit(RLIMIT_AS)`` caps its
address space (an allocation past it fails in the child, never in the worker) and the parent
kills it at the timeout. The worker process itself never holds the file's decompressed
form, so it is never killed for memory and the job is not re-sent after a lease expiry; the
job ends ``failed`` with the bound that stopped it. A separate queue alone would bound
neither time nor memory. With the cheap checks of :mod:`rcll.files.convert` (ZIP directory,
page count, characters) a bomb fails in the child's first second, so the ``extract`` queue
is held at most ``RCLL_FILE_CONVERT_TIMEOUT_S`` by any one file, however hostile.

Warm children: each converting process starts one fork server (``multiprocessing``'s
``forkserver``: a fresh interpreter, not a copy of the worker, that imports the converters
once, builds them and their first-use tables, :mod:`rcll.files.preload`) and every file's
child is forked from it, so a file pays neither the converters' imports nor their warm-up;
the child still holds only what the server made, sets the same address-space bound and is
killed at the same timeout. When the fork server cannot be used the file goes
to a fresh interpreter (``python -m rcll.files.sandbox``) with this protocol: the parent
writes one JSON header line ``{"name", "type", "limits"}`` then the file's bytes to the
child's stdin; the child writes one JSON object to its stdout,
``{"sections": [{text, page, section, pages}, ...]}`` or ``{"error": reason, "limit":
bool}`` (anything the converters print goes to stderr).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from rcll.files import convert
from rcll.files.convert import ConversionError, ConvertLimits, LimitExceeded, Section

log = logging.getLogger(__name__)
_PACKAGE_ROOT = str(Path(convert.__file__).resolve().parents[2])  # the folder holding rcll/


_PRELOAD = ["rcll.files.sandbox", "rcll.files.convert", "pypdfium2", "markitdown",
            "rcll.files.preload"]
_warm_ctx = None
_warm_failed = False


def _warm_context():
    """The ``forkserver`` context whose server preloads the converters, made once per
    process; ``None`` when it cannot be used here."""
    global _warm_ctx, _warm_failed
    if _warm_ctx is None and not _warm_failed:
        try:
            import multiprocessing

            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(_PRELOAD)
            _warm_ctx = ctx
        except (ValueError, ImportError, OSError) as exc:
            log.warning("no warm converter (fork server): %s; a fresh child per file", exc)
            _warm_failed = True
    return _warm_ctx


def _warm_child(conn, data: bytes, name: str, content_type: str | None, limits: dict) -> None:
    """A warm child's side: bound the address space, convert, send one answer dict (the
    protocol's) over ``conn``."""
    import resource

    os.dup2(2, 1)  # whatever the converters print goes to stderr
    lim = ConvertLimits(**limits)
    cap = lim.max_memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        sections = convert.convert(data, name, content_type, lim)
        del data
        answer = {"sections": [dataclasses.asdict(s) for s in sections]}
    except LimitExceeded as exc:
        answer = {"error": str(exc), "limit": True}
    except ConversionError as exc:
        answer = {"error": str(exc), "limit": False}
    except MemoryError:
        answer = {"error": f"the converter ran out of memory at {lim.max_memory_mb} MiB "
                           f"({lim.setting('max_memory_mb')})", "limit": True}
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    conn.send(answer)
    conn.close()


def _convert_warm(ctx, data: bytes, name: str, content_type: str | None,
                  limits: ConvertLimits) -> list[Section]:
    """:func:`convert_bounded` in a child forked from the warm fork server."""
    import multiprocessing.process as mp_process
    import time

    me = mp_process.current_process()
    if type(me._config.get("authkey")) is not mp_process.AuthenticationString:
        # a Celery pool process holds billiard's authkey, which refuses to be pickled to a
        # multiprocessing child (the fork server's preparation data carries it): its bytes
        me._config["authkey"] = mp_process.AuthenticationString(bytes(me.authkey))
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_warm_child, daemon=True,
                       args=(child, data, name, content_type, dataclasses.asdict(limits)))
    # a Celery pool process is marked daemonic, and multiprocessing refuses children to
    # those (they could outlive it); this child is killed at the timeout below and the fork
    # server exits with its parent, so the mark is lifted for the start only
    config = mp_process.current_process()._config
    daemonic = config.pop("daemon", None)
    try:
        proc.start()
    finally:
        if daemonic is not None:
            config["daemon"] = daemonic
    child.close()
    deadline = time.monotonic() + limits.timeout_s
    answer = None
    try:
        if parent.poll(max(deadline - time.monotonic(), 0)):
            try:
                answer = parent.recv()
            except EOFError:  # the child died before answering
                answer = None
        elif proc.is_alive():
            proc.kill()
            proc.join(5)
            raise LimitExceeded(f"conversion took longer than {limits.timeout_s:g} s "
                                f"({limits.setting('timeout_s')})")
    finally:
        parent.close()
    proc.join(max(deadline - time.monotonic(), 1))
    if proc.is_alive():
        proc.kill()
        proc.join(5)
    if isinstance(answer, dict) and "sections" in answer:
        return [Section(**s) for s in answer["sections"]]
    if isinstance(answer, dict) and "error" in answer:
        raise (LimitExceeded if answer.get("limit") else ConversionError)(answer["error"])
    code = proc.exitcode
    log.warning("warm converter of %r exited %s without an answer", name, code)
    if code is not None and code != 0:
        what = signal.Signals(-code).name if code < 0 else f"exit status {code}"
        raise LimitExceeded(f"the converter stopped ({what}), most likely at the memory limit "
                            f"of {limits.max_memory_mb} MiB "
                            f"({limits.setting('max_memory_mb')})")
    raise ConversionError(f"the converter failed (exit status {code})")


def convert_bounded(data: bytes, name: str, content_type: str | None,
                    limits: ConvertLimits) -> list[Section]:
    """:func:`rcll.files.convert.convert` of file ``name`` in a child process with at most
    ``limits.max_memory_mb`` MiB of address space for at most ``limits.timeout_s`` seconds.
    Returns its sections. Raises :class:`~rcll.files.convert.LimitExceeded` (a bound passed,
    time and memory included, with the setting in the reason) or
    :class:`~rcll.files.convert.ConversionError` (the file cannot be converted, or the child
    died otherwise). Runs in a warm child when it can (module docstring)."""
    ctx = _warm_context()
    if ctx is not None:
        try:
            return _convert_warm(ctx, data, name, content_type, limits)
        except ConversionError:
            raise
        except Exception as exc:  # the fork server cannot be used here: fresh children
            global _warm_failed, _warm_ctx
            _warm_failed, _warm_ctx = True, None
            log.warning("warm converter unavailable (%s: %s); converting in fresh children",
                        type(exc).__name__, exc)
    return _convert_fresh(data, name, content_type, limits)


def _convert_fresh(data: bytes, name: str, content_type: str | None,
                   limits: ConvertLimits) -> list[Section]:
    """:func:`convert_bounded` in a fresh interpreter (the protocol of the module doc)."""
    header = json.dumps({"name": name, "type": content_type,
                         "limits": dataclasses.asdict(limits)}).encode()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")  # fewer thread stacks in the address space
    try:
        proc = subprocess.run([sys.executable, "-m", "rcll.files.sandbox"],
                              input=header + b"\n" + data, capture_output=True, env=env,
                              timeout=limits.timeout_s, check=False)
    except subprocess.TimeoutExpired:  # run() has killed the child
        raise LimitExceeded(f"conversion took longer than {limits.timeout_s:g} s "
                            f"({limits.setting('timeout_s')})") from None
    try:
        answer = json.loads(proc.stdout) if proc.stdout else None
    except ValueError:
        answer = None
    if isinstance(answer, dict) and "sections" in answer:
        return [Section(**s) for s in answer["sections"]]
    if isinstance(answer, dict) and "error" in answer:
        raise (LimitExceeded if answer.get("limit") else ConversionError)(answer["error"])
    tail = proc.stderr[-2000:].decode("utf-8", "replace")
    log.warning("converter of %r exited %s without an answer: %s", name, proc.returncode, tail)
    if proc.returncode < 0 or b"MemoryError" in proc.stderr or b"bad_alloc" in proc.stderr:
        what = (signal.Signals(-proc.returncode).name if proc.returncode < 0
                else f"exit status {proc.returncode}")
        raise LimitExceeded(f"the converter stopped ({what}), most likely at the memory limit "
                            f"of {limits.max_memory_mb} MiB "
                            f"({limits.setting('max_memory_mb')})")
    raise ConversionError(f"the converter failed (exit status {proc.returncode})")


def _child() -> int:
    """The child's side of the protocol (module docstring); returns the exit status."""
    import resource

    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever the converters print goes to stderr, not into the answer
    raw = sys.stdin.buffer.read()
    head, _, data = raw.partition(b"\n")
    req = json.loads(head)
    limits = ConvertLimits(**req["limits"])
    cap = limits.max_memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))  # soft limit: the conversion's
    try:
        sections = convert.convert(data, req["name"], req["type"], limits)
        del raw, data
        answer = {"sections": [dataclasses.asdict(s) for s in sections]}
    except LimitExceeded as exc:
        answer = {"error": str(exc), "limit": True}
    except ConversionError as exc:
        answer = {"error": str(exc), "limit": False}
    except MemoryError:
        answer = {"error": f"the converter ran out of memory at {limits.max_memory_mb} MiB "
                           f"({limits.setting('max_memory_mb')})", "limit": True}
    # the answer (bounded by max_chars) is written with the soft limit lifted, so a
    # conversion stopped near the limit can still say why
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    json.dump(answer, out)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child())
