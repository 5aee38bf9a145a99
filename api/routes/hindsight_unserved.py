"""Hindsight 1.1's routes that RCLL does not serve, present with a clear answer instead of a
404: 400 ``llm_not_configured`` for a route that needs a language model when none is
configured (``RCLL_LLM_PROVIDER=none``), else 501 ``not_implemented`` with the reason and,
where one exists, the RCLL route that does the nearest thing.

:func:`register` runs after every other blueprint and adds a route only where no view
answers that method and path already, so a family that gets built (its own module) takes
its routes over without touching this table. Which of Hindsight's routes RCLL serves, and
how each of the rest answers: ``tests/api/test_hindsight_routes.py``, which reads the route
list from the installed ``hindsight-client`` package and writes
``benchmarks/results/hindsight_routes.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from flask import Flask
from werkzeug.exceptions import MethodNotAllowed, NotFound

from api.auth import requires
from api.deps import services
from api.errors import APIError
from api.openapi import doc

PREFIX = "hindsight_unserved."
# Hindsight routes that one of RCLL's catch-all rules would answer as something else (an
# entity id): registered here whatever matches them today, so they answer 501 with their
# reason instead of a wrong 200 or 404. None today: every such route is served.
SHADOWED: frozenset[tuple[str, str]] = frozenset()

# (pattern over "METHOD path", needs an LLM, the reason) — first match wins.
_FAMILIES: list[tuple[str, bool, str]] = [
    (r"\w+ /v1/default/banks/[^/]+/mental-models/[^/]+/dry-run-refresh", True,
     "a dry-run refresh is not built; POST …/mental-models/{mental_model_id}/refresh runs "
     "the refresh (api/routes/mental_models.py)"),
    (r"\w+ /v1/default/banks/[^/]+/knowledge-base", True,
     "the knowledge base (LLM-written pages) is not built; closets summarise rooms and halls"),
    (r"\w+ /v1/default/banks/[^/]+/(observations|memories/[^/]+/observations)", True,
     "observations are not built; RCLL consolidates into closets and dedup proposals"),
    (r"\w+ /v1/default/banks/[^/]+/(consolidate|consolidation|consolidation-strategies)", True,
     "Hindsight's consolidation is not built; POST /v1/default/banks/{bank_id}/closets "
     "makes RCLL's summaries"),
    (r"\w+ /v1/default/banks/[^/]+/(memories/dry-run-extract|prompts/preview|health/llm"
     r"|background|entities/[^/]+/regenerate)", True,
     "this LLM step of Hindsight's is not built in RCLL"),
    (r"\w+ /v1/default/banks/[^/]+/attachments/", False,
     "attachments are not kept apart from their documents"),
    (r"\w+ /v1/default/banks/[^/]+/document-transfer", False,
     "document transfer between banks is not built; bank export and import move a bank "
     "(POST /v1/default/banks/{bank_id}/transfer/export, …/transfer/import)"),
    (r"\w+ /v1/bank-template-schema|\w+ /v1/default/banks/[^/]+/(export|import)$", False,
     "bank templates are not built; GET /banks/{bank_id}/export exports a whole bank and "
     "POST /banks/{bank_id}/import imports one"),
]


def classify(method: str, path: str) -> tuple[bool, str]:
    """``(needs an LLM, reason)`` for a Hindsight route RCLL does not serve; ``path`` in
    Hindsight's form (``/v1/default/banks/{bank_id}/…``). Unknown routes get a generic
    reason."""
    key = f"{method} {path}"
    for pattern, llm, reason in _FAMILIES:
        if re.match(pattern, key):
            return llm, reason
    return False, "this Hindsight route is not built in RCLL"


def flask_rule(path: str) -> str:
    """Hindsight's ``{name}`` path parameters as Flask's ``<name>``."""
    return re.sub(r"\{([^}]+)\}", r"<\1>", path)


def _endpoint(app: Flask, method: str, path: str) -> str | None:
    """The endpoint of ``app`` that answers ``method`` on ``path`` (parameters filled in),
    or None."""
    probe = re.sub(r"\{[^}]+\}", "x", path)
    try:
        return app.url_map.bind("localhost").match(probe, method=method)[0]
    except (NotFound, MethodNotAllowed):
        return None


def served_by_rcll(app: Flask, method: str, path: str) -> bool:
    """Whether a view of RCLL's own (not one this module added) answers ``method`` on
    ``path``."""
    endpoint = _endpoint(app, method, path)
    return endpoint is not None and not endpoint.startswith(PREFIX)


def _view(method: str, path: str, llm: bool, reason: str) -> Callable:
    role = "member" if "{bank_id}" not in path else ("read" if method == "GET" else "write")
    errors = {501: ["not_implemented"]}
    if llm:
        errors[400] = ["llm_not_configured"]

    def unserved(**_kwargs):
        if llm and services().settings.llm_provider == "none":
            raise APIError(400, "llm_not_configured",
                           f"{method} {path} needs an LLM; set RCLL_LLM_PROVIDER "
                           f"(and in any case: {reason})", {"route": f"{method} {path}"})
        raise APIError(501, "not_implemented", f"{method} {path}: {reason}",
                       {"route": f"{method} {path}", "reason": reason})

    unserved.__doc__ = (f"Hindsight's ``{method} {path}``, not served by RCLL: {reason}. "
                        + ("400 ``llm_not_configured`` without an LLM, else " if llm else "")
                        + "501 ``not_implemented``.")
    return doc({}, errors=errors, tags=["hindsight"])(requires(role)(unserved))


def register(app: Flask, routes: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Add a route for each ``(method, Hindsight path)`` of ``routes`` no view serves yet;
    returns the ones added."""
    added = []
    for method, path in routes:
        if _endpoint(app, method, path) is not None and (method, path) not in SHADOWED:
            continue
        llm, reason = classify(method, path)
        endpoint = PREFIX + re.sub(r"\W+", "_", f"{method}{path}").strip("_")
        app.add_url_rule(flask_rule(path), endpoint=endpoint, methods=[method],
                         view_func=_view(method, path, llm, reason))
        added.append((method, path))
    return added
