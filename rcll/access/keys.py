"""API keys: generation, the keyed hash stored in ``api_keys.key_hash``, constant-time check.

A key is ``rcll_<prefix>_<secret>``: ``prefix`` is 12 lowercase hex characters (public; the
unique column used to find the row, and what lists show), ``secret`` 43 URL-safe base64
characters (256 bits from :mod:`secrets`). Only ``hmac-sha256$<hex>`` of the whole key,
keyed with the server secret, is stored: a stolen database does not yield usable keys, and
without the server secret the hashes cannot even be brute-forced offline. (A slow KDF is for
low-entropy passwords; a 256-bit random key needs a keyed hash, which also keeps every
request's check cheap.)

The server secret (``RCLL_KEY_SECRET``): when set, it is used as given (UTF-8 bytes; at
least 32 characters). When unset, a 32-byte secret is generated once into
``<state_dir>/key_secret`` (mode 0600) and reused — right for the dev stack and a single
host where the CLI and the API share a state folder. An API that listens beyond loopback
refuses to start without ``RCLL_KEY_SECRET`` (:func:`rcll.access.deployment.check`).
Changing the secret invalidates every issued key (the bootstrap admin key still works).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from rcll.config import Settings

KEY_PATTERN = re.compile(r"^rcll_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
HASH_SCHEME = "hmac-sha256"
MIN_SECRET_CHARS = 32
SECRET_FILE = "key_secret"


def generate() -> tuple[str, str]:
    """A new key and its prefix: ``("rcll_<prefix>_<secret>", "<prefix>")``."""
    prefix = secrets.token_hex(6)
    return f"rcll_{prefix}_{secrets.token_urlsafe(32)}", prefix


def prefix_of(key: str) -> str | None:
    """The prefix of a well-formed key, ``None`` for anything else (never raises)."""
    m = KEY_PATTERN.fullmatch(key) if isinstance(key, str) else None
    return m.group(1) if m else None


def hash_key(server_secret: bytes, key: str) -> str:
    """``"hmac-sha256$<64 hex>"``: HMAC-SHA256 of the UTF-8 key under ``server_secret``."""
    digest = hmac.new(server_secret, key.encode("utf-8"), hashlib.sha256).hexdigest()
    return f"{HASH_SCHEME}${digest}"


def verify(server_secret: bytes, key: str, stored: str) -> bool:
    """Whether ``key`` hashes to ``stored`` (constant-time comparison)."""
    return hmac.compare_digest(hash_key(server_secret, key).encode(), stored.encode())


def same_secret(given: str, expected: str) -> bool:
    """Constant-time equality of two strings (the bootstrap admin key)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def server_secret(settings: Settings) -> bytes:
    """The key-hash secret: ``RCLL_KEY_SECRET``, else the one generated once into
    ``<state_dir>/key_secret`` (created here, mode 0600; see the module doc). Raises
    ``ValueError`` when ``RCLL_KEY_SECRET`` is shorter than 32 characters."""
    if settings.key_secret is not None:
        if len(settings.key_secret) < MIN_SECRET_CHARS:
            raise ValueError(f"RCLL_KEY_SECRET must be at least {MIN_SECRET_CHARS} characters")
        return settings.key_secret.encode("utf-8")
    path = Path(settings.state_dir) / SECRET_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_bytes(32)
    tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value.hex())
    try:  # link: atomic create-if-absent, so processes starting at once agree on one secret
        os.link(tmp, path)
    except FileExistsError:
        value = bytes.fromhex(path.read_text().strip())
    finally:
        tmp.unlink()
    return value
