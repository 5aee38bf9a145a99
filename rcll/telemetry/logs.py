"""Log lines: JSON (one object per line, python-json-logger) or text, and the job's ids on
every line logged while a job runs.

The job context lives in a :class:`contextvars.ContextVar` (set by the worker around each
task, :func:`job_context`); :class:`JobContextFilter`, installed on the handlers
:func:`configure` creates, copies it onto each record as ``job_id`` and ``bank_id`` — so a
line from any module (psycopg, the embedder, Celery's own "Task … succeeded") carries them.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_JOB: contextvars.ContextVar[dict | None] = contextvars.ContextVar("rcll_job", default=None)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(processName)s]: %(message)s%(job_suffix)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"
JSON_RENAMES = {"asctime": "time", "levelname": "level", "name": "logger", "process": "pid"}
_MARK = "_rcll_handler"


def current_job() -> dict:
    """The job context of this thread/task: ``{"job_id", "bank_id", "items"}`` (only the keys
    set), or ``{}`` outside a job."""
    return dict(_JOB.get() or {})


def set_job(**fields) -> contextvars.Token:
    """Enter a job context (``job_id``, ``bank_id``, ``items``; None values are dropped);
    returns the token for :func:`reset_job`."""
    return _JOB.set({k: v for k, v in fields.items() if v is not None})


def reset_job(token: contextvars.Token) -> None:
    """Leave the job context entered with ``token``."""
    _JOB.reset(token)


@contextmanager
def job_context(**fields) -> Iterator[dict]:
    """``with job_context(job_id=…, bank_id=…):`` every line logged inside carries them."""
    token = set_job(**fields)
    try:
        yield current_job()
    finally:
        reset_job(token)


class JobContextFilter(logging.Filter):
    """Adds ``job_id`` and ``bank_id`` of the current job to each record (when in a job) and
    ``job_suffix`` (`` [job=… bank=…]`` or empty) for the text format. Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        job = _JOB.get() or {}
        suffix = []
        for key in ("job_id", "bank_id"):
            if key in job and not hasattr(record, key):
                setattr(record, key, job[key])
            if getattr(record, key, None) is not None:
                suffix.append(f"{key[:-3]}={getattr(record, key)}")
        record.job_suffix = f" [{' '.join(suffix)}]" if suffix else ""
        return True


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``fmt`` (``json`` | ``text``). Raises ``ValueError`` for another."""
    if fmt == "json":
        from pythonjsonlogger.json import JsonFormatter

        return JsonFormatter(JSON_FIELDS, rename_fields=JSON_RENAMES,
                             reserved_attrs=[*_reserved(), "job_suffix"])
    if fmt == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"unknown log format {fmt!r}: json or text")


def _reserved() -> list[str]:
    from pythonjsonlogger.core import RESERVED_ATTRS

    return list(RESERVED_ATTRS)


def configured() -> bool:
    """Whether the root logger already has a handler with the job filter (set up by
    :func:`configure` or :func:`dict_config`, e.g. by gunicorn)."""
    return any(isinstance(f, JobContextFilter) for h in logging.getLogger().handlers
               for f in h.filters)


def configure(fmt: str = "text", level: int | str = logging.INFO, stream=None) -> logging.Handler:
    """Send the root logger's records to ``stream`` (default stderr) as ``fmt`` lines, with the
    job filter. Replaces a handler an earlier call installed (idempotent), leaves others.
    Returns the handler."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _MARK, False):
            root.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    setattr(handler, _MARK, True)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(JobContextFilter())
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)  # warnings become log lines in the same format
    return handler


def dict_config(fmt: str, level: str = "INFO") -> dict:
    """A :func:`logging.config.dictConfig` dict doing what :func:`configure` does, for
    servers configured by dict (gunicorn's ``logconfig_dict``): root, ``gunicorn.error`` and
    ``gunicorn.access`` to stderr/stdout in ``fmt``."""
    fmt_cfg = ({"()": "pythonjsonlogger.json.JsonFormatter", "fmt": JSON_FIELDS,
                "rename_fields": JSON_RENAMES,
                "reserved_attrs": [*_reserved(), "job_suffix"]} if fmt == "json"
               else {"format": TEXT_FORMAT})
    handler = {"class": "logging.StreamHandler", "formatter": "rcll",
               "filters": ["job"]}
    return {
        "version": 1, "disable_existing_loggers": False,
        "filters": {"job": {"()": JobContextFilter}},
        "formatters": {"rcll": fmt_cfg},
        "handlers": {"stderr": {**handler, "stream": "ext://sys.stderr"},
                     "stdout": {**handler, "stream": "ext://sys.stdout"}},
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {"gunicorn.error": {"level": level, "handlers": ["stderr"],
                                       "propagate": False},
                    "gunicorn.access": {"level": "INFO", "handlers": ["stdout"],
                                        "propagate": False}},
    }
