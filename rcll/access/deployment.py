"""Start-up checks of the access settings (spec §7; docs/concepts/access.md "Members, keys and permissions").

:func:`check` is run by the API factory and by ``rcll serve`` before anything listens:

- ``RCLL_AUTH=off`` is for the local dev stack only: refused unless the API binds a loopback
  host (``127.0.0.0/8``, ``::1``, ``localhost``), and announced with :data:`AUTH_OFF_BANNER`.
- ``RCLL_AUTH=on`` beyond loopback needs ``RCLL_KEY_SECRET`` (the generated state-dir secret
  is for one host); ``RCLL_ADMIN_KEY``, when set, must be at least 24 characters.
- ``RCLL_READ_ONLY=on`` needs ``RCLL_READONLY_DATABASE_URL`` (the SELECT-only role).
"""

from __future__ import annotations

import ipaddress

from rcll.config import Settings

MIN_ADMIN_KEY_CHARS = 24
AUTH_OFF_BANNER = "\n".join([
    "!" * 78,
    "!!  RCLL_AUTH=off: AUTHENTICATION IS DISABLED.",
    "!!  Every caller reads, writes and deletes every bank, sees every audience and",
    "!!  purpose. This is for the local dev stack only (bound to loopback).",
    "!!  Set RCLL_AUTH=on (the default) and RCLL_ADMIN_KEY for anything else.",
    "!" * 78,
])


class DeploymentError(ValueError):
    """The settings describe a deployment RCLL refuses to start (message says why)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP literal or ``localhost``) only accepts local connections."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check(settings: Settings) -> list[str]:
    """Raise :class:`DeploymentError` for a refused configuration (module doc); return the
    warnings to log at start (the auth-off banner, the generated key secret)."""
    warnings: list[str] = []
    local = is_loopback(settings.api_host)
    if not settings.auth:
        if not local:
            raise DeploymentError(
                f"RCLL_AUTH=off is only allowed for the local dev stack, bound to a loopback "
                f"host; RCLL_API_HOST is {settings.api_host!r}. Turn auth on (RCLL_AUTH=on, "
                f"RCLL_ADMIN_KEY=...) or bind to 127.0.0.1.")
        warnings.append(AUTH_OFF_BANNER)
    else:
        if settings.key_secret is None:
            if not local:
                raise DeploymentError(
                    "RCLL_KEY_SECRET is required when the API listens beyond loopback "
                    f"(RCLL_API_HOST={settings.api_host!r}): 32+ random characters, the same "
                    "for every API process and the admin CLI.")
            warnings.append("RCLL_KEY_SECRET is unset: API keys are hashed with the secret "
                            f"generated into {settings.state_dir}/key_secret (dev only)")
        if settings.key_secret is not None and len(settings.key_secret) < 32:
            raise DeploymentError("RCLL_KEY_SECRET must be at least 32 characters")
        if settings.admin_key is not None and len(settings.admin_key) < MIN_ADMIN_KEY_CHARS:
            raise DeploymentError(f"RCLL_ADMIN_KEY must be at least {MIN_ADMIN_KEY_CHARS} "
                                  "characters (use e.g. `openssl rand -hex 32`)")
    if settings.read_only and settings.activation:
        raise DeploymentError("RCLL_READ_ONLY=on needs RCLL_ACTIVATION=off (recall then "
                              "writes nothing, not even Redis)")
    if settings.read_only and not settings.readonly_database_url:
        raise DeploymentError("RCLL_READ_ONLY=on needs RCLL_READONLY_DATABASE_URL: the "
                              "SELECT-only role the read-only API connects with")
    return warnings
