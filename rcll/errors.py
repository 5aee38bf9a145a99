"""Domain errors: each carries a stable ``code`` the API maps to a 4xx/5xx JSON error."""

from __future__ import annotations


class RCLLError(Exception):
    """Base error. ``code`` is machine-readable, ``status`` the HTTP status it maps to."""

    code = "rcll_error"
    status = 500

    def __init__(self, message: str, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}


class NotFound(RCLLError):
    code = "not_found"
    status = 404


class BankNotFound(NotFound):
    code = "bank_not_found"


class JobNotFound(NotFound):
    code = "operation_not_found"


class DirectiveNotFound(NotFound):
    code = "directive_not_found"


class Unauthorized(RCLLError):
    """No key, an unknown key or a revoked key (401)."""

    code = "unauthorized"
    status = 401


class Forbidden(RCLLError):
    """An authenticated caller without the role, purpose or audience asked for (403)."""

    code = "forbidden"
    status = 403


class Conflict(RCLLError):
    """The request lost a race or contradicts stored state (409): a stale ``revision``,
    an empty audience/purpose intersection on ``derive``."""

    code = "conflict"
    status = 409


class InvalidInput(RCLLError):
    code = "invalid_request"
    status = 400


class Unavailable(RCLLError):
    code = "unavailable"
    status = 503


class Rejected(RCLLError):
    """A request the service refuses, with its own HTTP ``status`` and ``code`` (limits,
    idempotency keys, unavailable queue)."""

    def __init__(self, status: int, code: str, message: str, details: dict | None = None):
        super().__init__(message, details)
        self.status = status
        self.code = code


class Overloaded(RCLLError):
    """The process is past saturation (503 ``overloaded``): the request waited its bounded
    time for a slot (:class:`rcll.admission.Gate`) and got none. ``retry_after_s``: the
    ``Retry-After`` the API sends."""

    code = "overloaded"
    status = 503

    def __init__(self, message: str, details: dict | None = None, retry_after_s: int = 1):
        super().__init__(message, details)
        self.retry_after_s = retry_after_s
