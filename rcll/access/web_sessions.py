"""Server-side sessions of the web screens (``api/web``; docs/reference/web-screens.md).

Signing in with an API key opens a session: a random 256-bit id, kept in Redis under
``rcll:web:session:<id>`` with ``{"key_id", "member_id", "admin_fp", "created_at"}`` and a
sliding TTL (``RCLL_WEB_SESSION_TTL_S``). The key itself is never stored — neither in the
cookie (which holds only the session id, signed) nor in Redis: each request re-reads the
principal from the key's id (:meth:`rcll.access.service.AccessService.session_principal`),
so revoking the key or disabling the member ends its sessions at once. A bootstrap-admin
session (``key_id`` ``None``) holds a fingerprint of the admin key and ends when the key
changes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time

from rcll.access.principal import Principal
from rcll.access.service import AccessService, InvalidAPIKey

PREFIX = "rcll:web:session:"


class WebSessions:
    """Sessions over ``redis`` (bytes client) resolved through ``access``; ``ttl_s`` seconds
    without use end one."""

    def __init__(self, redis, access: AccessService, ttl_s: int) -> None:
        self.redis = redis
        self.access = access
        self.ttl_s = int(ttl_s)

    def _admin_fp(self) -> str:
        key = self.access.settings.admin_key or ""
        return hmac.new(self.access.secret, key.encode("utf-8"), hashlib.sha256).hexdigest()[:32]

    def open(self, key: str) -> tuple[str, Principal]:
        """Authenticate ``key`` (:meth:`AccessService.authenticate`: raises
        ``MissingAPIKey`` / ``InvalidAPIKey``) and open a session: ``(session_id,
        principal)``. Raises ``redis.RedisError`` when Redis is away."""
        who = self.access.authenticate(key)
        sid = secrets.token_urlsafe(32)
        record = {"key_id": who.key_id, "member_id": who.member_id,
                  "admin_fp": self._admin_fp() if who.key_id is None else None,
                  "created_at": time.time()}
        self.redis.set(PREFIX + sid, json.dumps(record), ex=self.ttl_s)
        return sid, who

    def principal(self, sid: str | None) -> Principal | None:
        """The principal of session ``sid``, its TTL renewed; ``None`` for no, an expired or
        an unknown session, or one whose key was revoked, member disabled or admin key
        changed (then the session is closed). Raises ``redis.RedisError``."""
        if not sid or not isinstance(sid, str):
            return None
        raw = self.redis.get(PREFIX + sid)
        if raw is None:
            return None
        record = json.loads(raw)
        try:
            if record.get("key_id") is None and not hmac.compare_digest(
                    record.get("admin_fp") or "", self._admin_fp()):
                raise InvalidAPIKey()
            who = self.access.session_principal(record.get("key_id"))
        except InvalidAPIKey:
            self.close(sid)
            return None
        self.redis.expire(PREFIX + sid, self.ttl_s)
        return who

    def close(self, sid: str | None) -> None:
        """End session ``sid`` (nothing when it is unknown)."""
        if sid:
            self.redis.delete(PREFIX + sid)
