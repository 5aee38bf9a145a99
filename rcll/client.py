"""Synchronous Python client for the RCLL HTTP API (retain, operations, recall, banks, jobs).

Routes follow the Hindsight-compatible shapes of the spec (§8): ``/v1/default/banks/{bank_id}/...``.
Every non-2xx answer raises :class:`RCLLHTTPError`; transport failures (connection refused,
timeouts) propagate as ``httpx.TransportError`` subclasses.
"""

from __future__ import annotations

import json as _json
import time
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, Self
from urllib.parse import quote

import httpx

from rcll.api_types import (
    BridgeAnswer,
    DeletedBank,
    DeletedTunnel,
    FilesAnswer,
    ForgetAnswer,
    ImportAnswer,
    Operation,
    OperationDetail,
    RecallAnswer,
    RetainAnswer,
    SupersedeAnswer,
    TransferSubmitted,
    Tunnel,
    TunnelsPage,
    Unit,
)

TERMINAL_STATES = frozenset({"succeeded", "failed", "partial", "cancelled"})


class RCLLHTTPError(Exception):
    """A non-2xx answer from the RCLL API.

    The server answers errors as ``{"error": {"code", "message", "details"}}``; when the body
    is not in that shape, ``code`` is ``"http_<status>"`` and ``message`` is the start of the
    raw body.

    Attributes: ``status`` (int HTTP status), ``code`` (str), ``message`` (str),
    ``details`` (any JSON value or None).
    """

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details

    def describe(self, limit: int = 3) -> str:
        """``code: message`` and, for a validation answer, its first ``limit`` field errors
        (``invalid_request: request failed validation (items.0.document_id: String should
        have at most 512 characters)``): what a person needs to fix the input."""
        text = f"{self.code}: {self.message}"
        errors = self.details.get("errors") if isinstance(self.details, dict) else None
        if isinstance(errors, list) and errors:
            parts = [f"{e.get('loc') or 'body'}: {e.get('msg')}" for e in errors[:limit]
                     if isinstance(e, dict)]
            more = f"; {len(errors) - limit} more" if len(errors) > limit else ""
            text += f" ({'; '.join(parts)}{more})"
        return text


def _error_from(response: httpx.Response) -> RCLLHTTPError:
    code, message, details = f"http_{response.status_code}", "", None
    try:
        body = response.json()
    except ValueError:
        message = response.text[:500]
    else:
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            code = str(err.get("code") or code)
            message = str(err.get("message") or "")
            details = err.get("details")
        else:
            message = str(body)[:500]
    return RCLLHTTPError(response.status_code, code, message or response.reason_phrase, details)


def route(method: str, path: str) -> Callable:
    """Mark a client method with the API route it calls (``method``, OpenAPI ``path``), so a
    test can hold the client to the OpenAPI document (``tests/api/test_openapi.py``)."""

    def mark(fn: Callable) -> Callable:
        fn._rcll_route = (method, path)  # type: ignore[attr-defined]
        return fn

    return mark


BANK = "/v1/default/banks/{bank_id}"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _seg(value: str) -> str:
    """Quote one URL path segment (bank ids may hold characters like ':' or '/')."""
    return quote(str(value), safe="")


class RCLLClient:
    """Client for one RCLL server.

    ``base_url`` is the server root (e.g. ``"http://127.0.0.1:8888"``), ``timeout`` the
    per-request timeout in seconds, ``api_key`` sent as ``Authorization: Bearer <key>`` when
    given; ``transport`` an optional httpx transport (e.g. ``httpx.WSGITransport`` in tests).
    Usable as a context manager; call :meth:`close` otherwise.

    All methods raise :class:`RCLLHTTPError` on a non-2xx answer and ``httpx.TransportError``
    when the server cannot be reached.
    """

    POLL_WINDOW = 4  # unfinished operations looked at per poll cycle

    def __init__(self, base_url: str, timeout: float = 60.0, api_key: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers,
                                  transport=transport)

    # -- plumbing -----------------------------------------------------------------------
    def close(self) -> None:
        """Close the underlying connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if not response.is_success:
            raise _error_from(response)
        return response

    @staticmethod
    def _bank(bank_id: str) -> str:
        return f"/v1/default/banks/{_seg(bank_id)}"

    # -- write path ---------------------------------------------------------------------
    @route("POST", BANK + "/memories")
    def retain(self, bank_id: str, items: list[dict], async_: bool = True) -> RetainAnswer:
        """Retain a batch of items into a bank.

        ``items``: ``[{"content": str, "timestamp": ISO 8601 str | None, "context": str,
        "metadata": dict, "document_id": str}, ...]``.

        POST ``/v1/default/banks/{bank_id}/memories`` with ``{"items", "async"}``. With
        ``async_=True`` the server answers 200 (Hindsight's route) with ``{"success": true,
        "bank_id", "items_count", "async": true, "operation_id", "state": "queued", "status":
        "pending", "operation"}`` (:class:`rcll.api_types.RetainAnswer`); pass the
        ``operation_id`` to :meth:`operation` or :meth:`wait`.
        """
        response = self._request(
            "POST", f"{self._bank(bank_id)}/memories", json={"items": items, "async": async_}
        )
        return response.json()

    @route("POST", BANK + "/files/retain")
    def retain_files(self, bank_id: str, files: list[tuple[str, bytes]],
                     files_metadata: list[dict] | None = None) -> FilesAnswer:
        """Retain document files (PDF, DOCX, PPTX, XLSX, HTML, EPUB, text, Markdown).

        ``files``: ``[(file name, bytes), ...]``; ``files_metadata``: one dict per file
        (``document_id``, ``context``, ``metadata``, ``tags``, ``timestamp``, ``audience``,
        ``purposes``). POST ``/v1/default/banks/{bank_id}/files/retain`` (multipart, Hindsight's
        shape) → 200 ``{"operation_ids": [...], "operations": [...]}``, one operation per file;
        each converts on the workers and fails with the reason when the file cannot be read.
        Raises :class:`RCLLHTTPError` (413 ``file_too_large``/``too_many_files``, 415
        ``unsupported_file_type``, ...).
        """
        body = {"files_metadata": files_metadata} if files_metadata is not None else {}
        response = self._request(
            "POST", f"{self._bank(bank_id)}/files/retain",
            files=[("files", (name, data)) for name, data in files],
            data={"request": _json.dumps(body)})
        return response.json()

    # -- lifecycle verbs (docs/concepts/lifecycle.md "Lifecycle verbs") ------------------------------------
    def _unit(self, bank_id: str, unit_id: str | None = None) -> str:
        base = f"{self._bank(bank_id)}/units"
        return base if unit_id is None else f"{base}/{_seg(unit_id)}"

    @route("GET", BANK + "/units/{unit_id}")
    def read_unit(self, bank_id: str, unit_id: str, purpose: str | None = None) -> Unit:
        """GET ``…/units/{unit_id}`` → the unit with ``revision``, ``audience``,
        ``purposes``, ``links``, ``entities``, ``sources`` (404 ``unit_not_found``)."""
        params = {"purpose": purpose} if purpose else None
        return self._request("GET", self._unit(bank_id, unit_id), params=params).json()

    @route("POST", BANK + "/units")
    def remember(self, bank_id: str, unit: dict) -> Unit:
        """POST ``…/units`` with ``{text, kind, context, room, hall, layer, audience,
        purposes, occurred_start, occurred_end, mentioned_at, metadata, tags, confidence}``
        (``text`` required) → 201 the stored unit."""
        return self._request("POST", self._unit(bank_id), json=unit).json()

    @route("POST", BANK + "/units/derive")
    def derive(self, bank_id: str, source_ids: list[str], unit: dict) -> Unit:
        """POST ``…/units/derive`` → 201 the derived unit (409 ``empty_intersection``)."""
        return self._request("POST", f"{self._unit(bank_id)}/derive",
                             json={**unit, "source_ids": list(source_ids)}).json()

    @route("PATCH", BANK + "/units/{unit_id}")
    def correct(self, bank_id: str, unit_id: str, revision: int, changes: dict) -> Unit:
        """PATCH ``…/units/{unit_id}`` with ``{revision, …changes}`` → the unit at
        ``revision + 1`` (409 ``revision_conflict``, details ``current_revision``)."""
        return self._request("PATCH", self._unit(bank_id, unit_id),
                             json={**changes, "revision": revision}).json()

    @route("POST", BANK + "/units/{unit_id}/supersede")
    def supersede(self, bank_id: str, unit_id: str, revision: int, unit: dict) -> SupersedeAnswer:
        """POST ``…/units/{unit_id}/supersede`` → 201 ``{superseded, unit}``."""
        return self._request("POST", f"{self._unit(bank_id, unit_id)}/supersede",
                             json={**unit, "revision": revision}).json()

    @route("DELETE", BANK + "/units/{unit_id}")
    def forget(self, bank_id: str, unit_id: str, reason: str | None = None) -> ForgetAnswer:
        """DELETE ``…/units/{unit_id}`` → ``{unit_id, forgotten_at}`` (idempotent)."""
        body = {"reason": reason} if reason is not None else None
        return self._request("DELETE", self._unit(bank_id, unit_id), json=body).json()

    @route("GET", BANK + "/operations/{operation_id}")
    def operation(self, bank_id: str, operation_id: str) -> OperationDetail:
        """State of one retain operation (job).

        GET ``/v1/default/banks/{bank_id}/operations/{operation_id}`` →
        ``{"id", "bank_id", "kind", "state": "queued"|"running"|"succeeded"|"failed"|"partial"
        |"cancelled", "status" (Hindsight's name),
        "stage", "counts": {"items", "units_created", "units_skipped", "units_embedded", ...},
        "error": str | None, "attempts", "created_at", "updated_at", "finished_at"}``.
        """
        path = f"{self._bank(bank_id)}/operations/{_seg(operation_id)}"
        return self._request("GET", path).json()

    def wait(
        self,
        bank_id: str,
        operation_ids: Iterable[str],
        poll_s: float = 0.5,
        timeout_s: float = 3600,
        on_progress: Callable[[int, int], None] | None = None,
        on_update: Callable[[dict[str, dict]], None] | None = None,
    ) -> list[OperationDetail]:
        """Poll operations of one bank until each is terminal (succeeded, failed, partial or
        cancelled).

        Returns the final operation dicts in the order of ``operation_ids``; failed, partial or
        cancelled operations are returned, not raised — check ``status`` and ``error``.
        ``on_progress(done, total)`` is called after each polling round with operation
        counts; ``on_update(latest)`` (an extension) receives ``{operation_id: operation dict}``
        for every operation seen so far, e.g. to show per-item progress from ``counts``.

        Raises ``TimeoutError`` (naming the unfinished ids) when ``timeout_s`` elapses first.
        """
        ids = list(operation_ids)
        return self._wait_pairs([(bank_id, op) for op in ids], poll_s, timeout_s,
                                on_progress, on_update)

    def wait_many(
        self,
        pairs: Iterable[tuple[str, str]],
        poll_s: float = 0.5,
        timeout_s: float = 3600,
        on_progress: Callable[[int, int], None] | None = None,
        on_update: Callable[[dict[str, dict]], None] | None = None,
    ) -> list[OperationDetail]:
        """Like :meth:`wait` for operations spread over several banks.

        ``pairs`` is ``[(bank_id, operation_id), ...]``; returns the final operation dicts in
        that order. Raises ``TimeoutError`` when ``timeout_s`` elapses first.
        """
        return self._wait_pairs(list(pairs), poll_s, timeout_s, on_progress, on_update)

    def _wait_pairs(self, pairs: list[tuple[str, str]], poll_s: float, timeout_s: float,
                    on_progress: Callable[[int, int], None] | None,
                    on_update: Callable[[dict[str, dict]], None] | None
                    ) -> list[OperationDetail]:
        deadline = time.monotonic() + timeout_s
        latest: dict[str, OperationDetail] = {}
        pending = list(dict.fromkeys(pairs))
        total = len(pending)
        while True:
            # Jobs run roughly in submission order: look at the oldest pending ones first and
            # stop after a few unfinished, so a long wait does not flood the API with polls.
            still: list[tuple[str, str]] = []
            unfinished_seen = 0
            for i, (bank_id, op_id) in enumerate(pending):
                if unfinished_seen >= self.POLL_WINDOW:
                    still.extend(pending[i:])
                    break
                op = self.operation(bank_id, op_id)
                latest[op_id] = op
                if op.get("state") not in TERMINAL_STATES:
                    still.append((bank_id, op_id))
                    unfinished_seen += 1
            pending = still
            if on_update is not None:
                on_update(latest)
            if on_progress is not None:
                on_progress(total - len(pending), total)
            if not pending:
                return [latest[op_id] for _, op_id in pairs]
            if time.monotonic() >= deadline:
                names = ", ".join(op_id for _, op_id in pending[:10])
                raise TimeoutError(
                    f"{len(pending)} of {total} operations not finished after {timeout_s}s: "
                    f"{names}{' ...' if len(pending) > 10 else ''}"
                )
            time.sleep(poll_s)

    # -- read path ----------------------------------------------------------------------
    @route("POST", BANK + "/memories/recall")
    def recall(
        self,
        bank_id: str,
        query: str,
        *,
        max_tokens: int = 4096,
        limit: int = 50,
        recipe: str | None = None,
        channels: str | None = None,
        room: str | None = None,
        hall: str | None = None,
        max_layer: int | None = None,
        query_timestamp: str | None = None,
        trace: bool = False,
        tiers: list[str] | None = None,
        context_tokens_left: int | None = None,
        follow_tunnels: bool | None = None,
    ) -> RecallAnswer:
        """Recall the units of a bank relevant to ``query``, ranked and cut to ``max_tokens``.

        POST ``/v1/default/banks/{bank_id}/memories/recall`` with the arguments as JSON
        (None ones omitted). ``recipe`` names the read path (None: the server's default;
        ``channels`` is its older name). Answer: ``{"results": [{"id", "text", "kind", "room", "hall",
        "layer", "document_id", "chunk_id", "occurred_start", "occurred_end", "mentioned_at",
        "metadata", "ranks": {"dense", "lexical"}, "scores": {"dense", "lexical", "rrf", …, "final"}}],
        "recipe", "mode", "dense_available", "channels", "counts", "tokens_used", "timings_ms"
        (only with ``trace``), "tiers", "tier_reason"}``. ``tiers`` restricts the cascade
        (``["cold"]``: the full pipeline only); ``context_tokens_left`` applies the
        token-budget policy (docs/concepts/cascade.md). ``follow_tunnels=False`` leaves
        out the units tunnels bring from other banks (each such result carries ``bank_id``
        and ``tunnel``: ``{"id", "relationship", "from_unit_id", "bank_id"}``).
        """
        body: dict[str, Any] = {
            "query": query,
            "max_tokens": max_tokens,
            "limit": limit,
            "recipe": recipe,
            "channels": channels,
            "room": room,
            "hall": hall,
            "max_layer": max_layer,
            "query_timestamp": query_timestamp,
            "trace": trace,
            "tiers": tiers,
            "context_tokens_left": context_tokens_left,
            "follow_tunnels": follow_tunnels,
        }
        body = {k: v for k, v in body.items() if v is not None}
        return self._request("POST", f"{self._bank(bank_id)}/memories/recall", json=body).json()

    # -- banks and jobs -----------------------------------------------------------------
    @route("DELETE", BANK)
    def delete_bank(self, bank_id: str) -> DeletedBank | None:
        """Delete a bank and everything in it → ``{success, bank_id, message}``; a missing
        bank (404) is not an error: ``None``."""
        try:
            return self._request("DELETE", self._bank(bank_id)).json()
        except RCLLHTTPError as exc:
            if exc.status != 404:
                raise
            return None

    # -- bank export and import (docs/guides/export-import.md) ---------------------------------
    @route("GET", "/banks/{bank_id}/export")
    def export_bank(self, bank_id: str, out: BinaryIO, *, vectors: bool = True,
                    grants: bool = False, gzip: bool = False,
                    on_bytes: Callable[[int], None] | None = None) -> int:
        """Stream the bank's ``rcll-bank`` export into ``out`` (a binary file) as the server
        sends it; ``gzip``: the gzip stream, written as it comes (no decompression). Returns
        the bytes written; ``on_bytes(total)`` after each piece. GET
        ``/banks/{bank_id}/export?vectors=&grants=&gzip=`` (``admin`` on the bank)."""
        params = {"vectors": _flag(vectors), "grants": _flag(grants), "gzip": _flag(gzip)}
        with self._http.stream("GET", f"/banks/{_seg(bank_id)}/export", params=params,
                               timeout=httpx.Timeout(self._http.timeout.connect, read=None)
                               ) as response:
            if not response.is_success:
                response.read()
                raise _error_from(response)
            total = 0
            for piece in response.iter_raw(1 << 20):
                out.write(piece)
                total += len(piece)
                if on_bytes is not None:
                    on_bytes(total)
        return total

    @route("POST", "/banks/{bank_id}/import")
    def import_bank(self, bank_id: str, data: BinaryIO, *, ids: str = "auto",
                    grants: bool = True, size: int | None = None,
                    on_bytes: Callable[[int], None] | None = None) -> ImportAnswer:
        """Import the export read from ``data`` (a binary file: plain or gzip) into the bank,
        which must be new or empty; the upload is streamed (``size``: its length, sent as
        Content-Length; ``on_bytes(total)`` as it goes). POST ``/banks/{bank_id}/import``
        → :class:`rcll.api_types.ImportAnswer` (``state`` ``queued`` while units that came
        without a vector are embedded: :meth:`wait` on ``operation_id``). Raises
        :class:`RCLLHTTPError` (400 ``invalid_export`` with ``details.line``, 409
        ``bank_not_empty`` / ``ids_in_use``, 413 ``payload_too_large``)."""
        def body():
            total = 0
            while piece := data.read(1 << 20):
                total += len(piece)
                if on_bytes is not None:
                    on_bytes(total)
                yield piece

        headers = {"Content-Type": "application/x-ndjson"}
        if size is not None:
            headers["Content-Length"] = str(size)
        response = self._request("POST", f"/banks/{_seg(bank_id)}/import",
                                 params={"ids": ids, "grants": _flag(grants)},
                                 content=body(), headers=headers,
                                 timeout=httpx.Timeout(self._http.timeout.connect, read=None))
        return response.json()

    @route("POST", BANK + "/clone")
    def clone_bank(self, bank_id: str, target_bank_id: str, *, grants: bool = False
                   ) -> TransferSubmitted:
        """Copy the bank into ``target_bank_id`` (which must not exist) in one call: POST
        ``/v1/default/banks/{bank_id}/clone`` (Hindsight's route) → ``{operation_id, status,
        bank_id, counts, …}``."""
        return self._request("POST", f"{self._bank(bank_id)}/clone",
                             params={"target_bank_id": target_bank_id, "grants": _flag(grants)},
                             timeout=httpx.Timeout(self._http.timeout.connect, read=None)).json()

    @route("GET", "/jobs")
    def jobs(
        self, bank_id: str | None = None, state: str | None = None, limit: int = 50
    ) -> list[Operation]:
        """List jobs (operations), newest first as the server orders them.

        GET ``/jobs?bank_id=&state=&limit=`` → ``{"jobs": [operation dict, ...]}``; returns the
        list. ``state`` is one of queued, running, succeeded, failed, partial, cancelled.
        """
        params: dict[str, Any] = {"bank_id": bank_id, "state": state, "limit": limit}
        params = {k: v for k, v in params.items() if v is not None}
        return self._request("GET", "/jobs", params=params).json().get("jobs", [])

    # -- tunnels (spec §6) --------------------------------------------------------------
    @route("POST", "/tunnels")
    def create_tunnel(self, source_unit_id: str, target_unit_id: str, *,
                      relationship: str = "related", bidirectional: bool = True) -> Tunnel:
        """Tunnel between two units of different banks. POST ``/tunnels`` → the tunnel
        ``{"id", "source_unit_id", "target_unit_id", "source_bank_id", "target_bank_id",
        "relationship", "bidirectional", "created_by", "created_at"}`` (201 new, 200 when an
        equal one existed). Errors: 400 ``same_bank``, 403, 404 ``unit_not_found``, 409
        ``tunnel_exists``."""
        body = {"source_unit_id": source_unit_id, "target_unit_id": target_unit_id,
                "relationship": relationship, "bidirectional": bidirectional}
        return self._request("POST", "/tunnels", json=body).json()

    @route("GET", "/tunnels")
    def tunnels(self, bank_id: str, limit: int = 50, offset: int = 0) -> TunnelsPage:
        """Tunnels touching a bank that the caller may see. GET ``/tunnels?bank_id=`` →
        ``{"tunnels": [tunnel + "source_text", "target_text"], "limit", "offset", "total"}``."""
        params = {"bank_id": bank_id, "limit": limit, "offset": offset}
        return self._request("GET", "/tunnels", params=params).json()

    @route("GET", "/tunnels/{tunnel_id}")
    def tunnel(self, tunnel_id: str) -> Tunnel:
        """One tunnel. GET ``/tunnels/{id}``; 404 ``tunnel_not_found``."""
        return self._request("GET", f"/tunnels/{_seg(tunnel_id)}").json()

    @route("DELETE", "/tunnels/{tunnel_id}")
    def delete_tunnel(self, tunnel_id: str) -> DeletedTunnel:
        """Delete a tunnel. DELETE ``/tunnels/{id}`` → ``{"deleted": tunnel}``."""
        return self._request("DELETE", f"/tunnels/{_seg(tunnel_id)}").json()

    @route("POST", "/bridge")
    def bridge(self, *, source_unit_id: str | None = None, target_unit_id: str | None = None,
               source: tuple[str, str] | None = None, target: tuple[str, str] | None = None,
               relationship: str = "related", bidirectional: bool = True,
               purpose: str | None = None) -> BridgeAnswer:
        """Create a tunnel from two unit ids, or from a query in each bank (``source`` and
        ``target`` as ``(bank_id, query)``: the top hit of each becomes an end). POST
        ``/bridge`` → ``{"tunnel", "created", "matched"}``; 404 ``no_match`` (details name
        the side)."""
        body: dict[str, Any] = {"relationship": relationship, "bidirectional": bidirectional}
        if source is not None or target is not None:
            body["source"] = {"bank_id": source[0], "query": source[1]} if source else None
            body["target"] = {"bank_id": target[0], "query": target[1]} if target else None
        else:
            body.update(source_unit_id=source_unit_id, target_unit_id=target_unit_id)
        if purpose is not None:
            body["purpose"] = purpose
        return self._request("POST", "/bridge", json=body).json()
