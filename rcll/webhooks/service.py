"""The webhooks service: a bank's subscriptions (create, list, update, delete), their
delivery log, and the two worker steps — :meth:`WebhookService.dispatch_due` (beat: send
the due deliveries to the workers) and :meth:`WebhookService.attempt` (one signed HTTP
attempt, :mod:`rcll.webhooks.deliver`, recorded in the log, retried after
``webhook_retry_delays_s``).

Who may: an admin of the bank for every call (a subscription sees every job of the bank;
its payload holds ids, states and counts only — :mod:`rcll.store.webhooks`). Each write
owns its transaction and its audit entry (``webhook.create`` / ``webhook.update`` /
``webhook.delete``; the secret is never in the audit details nor in any answer but the
creating one).

Errors: 400 ``invalid_request`` (URL not http(s), unknown event type, bad http_config),
403 ``forbidden``, 404 ``bank_not_found`` / ``webhook_not_found``.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from rcll.access.principal import Principal
from rcll.errors import InvalidInput, NotFound
from rcll.store import audit, banks
from rcll.store import webhooks as store
from rcll.webhooks import deliver

if TYPE_CHECKING:
    from rcll.bootstrap import Services

HTTP_CONFIG_KEYS = {"method", "timeout_seconds", "headers", "params"}
STALE_DISPATCH_S = 300  # a dispatched delivery not attempted in this long is sent again


class WebhookNotFound(NotFound):
    code = "webhook_not_found"


def _bad(message: str, field: str) -> InvalidInput:
    return InvalidInput(message, {"field": field})


def _iso(v: datetime | None) -> str | None:
    return v.isoformat() if v is not None else None


def webhook_json(row: dict, *, with_secret: bool = False) -> dict:
    """Hindsight's ``WebhookResponse``: ``{id, bank_id, url, secret (only when it was just
    created), event_types, enabled, http_config, created_at, updated_at}``."""
    return {"id": str(row["id"]), "bank_id": row["bank_id"], "url": row["url"],
            "secret": row["secret"] if with_secret else None,
            "event_types": list(row["event_types"]), "enabled": row["enabled"],
            "http_config": row["http_config"] or None, "created_at": _iso(row["created_at"]),
            "updated_at": _iso(row["updated_at"])}


def delivery_json(row: dict, url: str) -> dict:
    """Hindsight's ``WebhookDeliveryResponse``."""
    return {"id": str(row["id"]), "event_id": str(row["event_id"]),
            "webhook_id": str(row["webhook_id"]), "url": url, "event_type": row["event_type"],
            "status": row["status"], "attempts": row["attempts"],
            "next_retry_at": _iso(row["next_retry_at"]), "last_error": row["last_error"],
            "last_response_status": row["last_response_status"],
            "last_response_body": row["last_response_body"],
            "last_attempt_at": _iso(row["last_attempt_at"]),
            "created_at": _iso(row["created_at"]), "updated_at": _iso(row["updated_at"])}


class WebhookService:
    def __init__(self, services: Services) -> None:
        self._services = services

    @property
    def pool(self):
        return self._services.pool

    # -- checks ---------------------------------------------------------------------------
    def _url(self, url) -> str:
        if not isinstance(url, str) or not url:
            raise _bad("url must be a non-empty string", "url")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _bad("url must be an http:// or https:// URL with a host", "url")
        if not self._services.settings.webhook_allow_private:
            try:
                addrs = {ipaddress.ip_address(a[4][0])
                         for a in socket.getaddrinfo(parts.hostname, None)}
            except (socket.gaierror, ValueError):
                raise _bad(f"url host {parts.hostname!r} does not resolve", "url")
            if any(a.is_private or a.is_loopback or a.is_link_local for a in addrs):
                raise _bad("url points at a private or loopback address, refused here", "url")
        return url

    @staticmethod
    def _events(value) -> list[str]:
        if value is None:
            return list(store.EVENTS)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise _bad("event_types must be a non-empty list of strings", "event_types")
        bad = sorted(set(value) - set(store.EVENTS))
        if bad:
            raise _bad(f"unknown event types {bad}; supported: {', '.join(store.EVENTS)}",
                       "event_types")
        return sorted(set(value), key=value.index)

    @staticmethod
    def _http_config(value) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict) or set(value) - HTTP_CONFIG_KEYS:
            raise _bad(f"http_config takes {sorted(HTTP_CONFIG_KEYS)}", "http_config")
        cfg = {k: v for k, v in value.items() if v is not None}
        if cfg.get("method", "POST").upper() not in ("GET", "POST"):
            raise _bad("http_config.method must be GET or POST", "http_config.method")
        t = cfg.get("timeout_seconds", 30)
        if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= 60:
            raise _bad("http_config.timeout_seconds must be 1..60", "http_config.timeout_seconds")
        for k in ("headers", "params"):
            v = cfg.get(k)
            if v is not None and not (isinstance(v, dict) and all(
                    isinstance(a, str) and isinstance(b, str) for a, b in v.items())):
                raise _bad(f"http_config.{k} must map strings to strings", f"http_config.{k}")
        return cfg

    # -- subscriptions --------------------------------------------------------------------
    def create(self, principal: Principal, bank_id: str, body: dict) -> dict:
        """A new subscription; ``secret`` defaults to 32 random bytes (URL-safe) and is in
        this answer only. Event types default to all (:data:`rcll.store.webhooks.EVENTS`)."""
        principal.require(bank_id, "admin")
        url = self._url(body.get("url"))
        secret = body.get("secret") or secrets.token_urlsafe(32)
        if not isinstance(secret, str):
            raise _bad("secret must be a string", "secret")
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            raise _bad("enabled must be a boolean", "enabled")
        events, cfg = self._events(body.get("event_types")), self._http_config(body.get("http_config"))
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            row = store.create(conn, bank_id, url, secret, events, enabled, cfg,
                               principal.member_id)
            audit.record(conn, principal.member_id, "webhook.create", bank_id, details={
                "webhook_id": str(row["id"]), "url": url, "event_types": events})
        return webhook_json(row, with_secret=True)

    def list(self, principal: Principal, bank_id: str, limit: int, offset: int
             ) -> tuple[list[dict], int]:
        principal.require(bank_id, "admin")
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            rows, total = store.list_page(conn, bank_id, limit, offset)
        return [webhook_json(r) for r in rows], total

    def update(self, principal: Principal, bank_id: str, webhook_id: str, body: dict) -> dict:
        principal.require(bank_id, "admin")
        fields: dict = {}
        if body.get("url") is not None:
            fields["url"] = self._url(body["url"])
        if body.get("secret") is not None:
            if not isinstance(body["secret"], str) or not body["secret"]:
                raise _bad("secret must be a non-empty string", "secret")
            fields["secret"] = body["secret"]
        if body.get("event_types") is not None:
            fields["event_types"] = self._events(body["event_types"])
        if body.get("enabled") is not None:
            if not isinstance(body["enabled"], bool):
                raise _bad("enabled must be a boolean", "enabled")
            fields["enabled"] = body["enabled"]
        if body.get("http_config") is not None:
            fields["http_config"] = self._http_config(body["http_config"])
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            if store.get(conn, bank_id, webhook_id) is None:
                raise self._missing(bank_id, webhook_id)
            row = store.update(conn, bank_id, webhook_id, fields)
            audit.record(conn, principal.member_id, "webhook.update", bank_id, details={
                "webhook_id": str(row["id"]), "fields": sorted(fields)})
        return webhook_json(row)

    def delete(self, principal: Principal, bank_id: str, webhook_id: str) -> None:
        principal.require(bank_id, "admin")
        with self.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            if store.get(conn, bank_id, webhook_id) is None or not store.delete(
                    conn, bank_id, webhook_id):
                raise self._missing(bank_id, webhook_id)
            audit.record(conn, principal.member_id, "webhook.delete", bank_id,
                         details={"webhook_id": str(webhook_id)})

    def deliveries(self, principal: Principal, bank_id: str, webhook_id: str, limit: int,
                   cursor: str | None) -> dict:
        """``{items, next_cursor}``: the webhook's deliveries, newest first; ``cursor`` is
        the ``created_at`` (ISO) of the last item of the previous page."""
        principal.require(bank_id, "admin")
        before = None
        if cursor:
            try:
                before = datetime.fromisoformat(cursor)
            except ValueError:
                raise _bad("cursor must be an ISO datetime (a page's next_cursor)", "cursor")
        with self.pool.connection() as conn:
            banks.get(conn, bank_id)
            hook = store.get(conn, bank_id, webhook_id)
            if hook is None:
                raise self._missing(bank_id, webhook_id)
            rows = store.deliveries(conn, hook["id"], limit + 1, before)
        more = len(rows) > limit
        rows = rows[:limit]
        return {"items": [delivery_json(r, hook["url"]) for r in rows],
                "next_cursor": _iso(rows[-1]["created_at"]) if more and rows else None}

    @staticmethod
    def _missing(bank_id: str, webhook_id: str) -> WebhookNotFound:
        return WebhookNotFound(f"webhook {webhook_id!r} does not exist in bank {bank_id!r}",
                               {"bank_id": bank_id, "webhook_id": str(webhook_id)})

    # -- worker steps ---------------------------------------------------------------------
    def dispatch_due(self, send) -> list[str]:
        """Claim the due deliveries (:func:`rcll.store.webhooks.claim_due`) and hand each id
        to ``send`` (the worker's Celery send). Returns the ids."""
        with self.pool.connection() as conn, conn.transaction():
            ids = store.claim_due(conn, STALE_DISPATCH_S)
        for delivery_id in ids:
            send(delivery_id)
        return ids

    def attempt(self, delivery_id: str) -> float | None:
        """One attempt of a pending delivery, recorded in the log. Returns the seconds
        until its retry when it failed and retries are left, else ``None`` (delivered,
        failed for good, or nothing to do)."""
        delays = list(self._services.settings.webhook_retry_delays_s)
        with self.pool.connection() as conn, conn.transaction():
            found = store.for_delivery(conn, delivery_id)
            if found is None:
                return None
            d, hook = found
            if not hook["enabled"]:
                store.record_attempt(conn, delivery_id, ok=False, status=None, body=None,
                                     error="webhook disabled", retry_in_s=None)
                return None
        # the HTTP call runs outside the transaction (no row lock held over the network);
        # a second attempt of the same id meanwhile is excluded by dispatched_at
        res = deliver.send(hook["url"], hook["secret"], d["payload"],
                           event_type=d["event_type"], delivery_id=str(d["id"]),
                           http_config=hook["http_config"])
        retry = None if res.ok or d["attempts"] >= len(delays) else delays[d["attempts"]]
        with self.pool.connection() as conn, conn.transaction():
            store.record_attempt(conn, delivery_id, ok=res.ok, status=res.status,
                                 body=res.body, error=res.error, retry_in_s=retry)
        return retry
