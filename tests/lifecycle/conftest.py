"""An API app whose callers are chosen per request, until the auth helper's keys land:
the header ``X-Test-As: <member>:<role>[:<purpose>,<purpose>…]`` makes the request's
principal that member with that role on the bank in the path (default purposes assist,
operate); no header is the unrestricted principal (auth off). Everything else is the real
app over the session's real PostgreSQL and Redis."""

from __future__ import annotations

import pytest
from flask import g, request

from rcll.access.principal import Grant, Principal

PURPOSES = ("assist", "operate")


def principal_for(spec: str, bank_id: str) -> Principal:
    """``"alice:write:assist,audit"`` → alice with write on ``bank_id`` for those purposes."""
    parts = spec.split(":")
    member, role = parts[0], parts[1]
    purposes = tuple(parts[2].split(",")) if len(parts) > 2 else PURPOSES
    return Principal(member_id=member, grants={bank_id: Grant(bank_id, role, purposes)},
                     default_purposes=purposes, purposes_all=purposes)


@pytest.fixture(scope="session")
def lc_app(services):
    from api.app import create_app

    services.embedder.get()
    app = create_app(services=services, enqueue=lambda *_: None)

    @app.before_request
    def _as_member():
        spec = request.headers.get("X-Test-As")
        if spec:
            g.principal = principal_for(spec, (request.view_args or {}).get("bank_id", ""))

    with services.pool.connection() as conn:  # members a deployment admin may target
        for m in ("alice", "bob", "carol"):
            conn.execute("INSERT INTO members (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                         (m, m.title()))
    return app


@pytest.fixture()
def api(lc_app):
    return lc_app.test_client()


@pytest.fixture()
def as_():
    """``as_(member, role="write", purposes=None)`` → headers making the request that
    member with that role (and those comma-separated purposes) on the path's bank."""
    def headers(member: str, role: str = "write", purposes: str | None = None) -> dict:
        return {"X-Test-As": f"{member}:{role}" + (f":{purposes}" if purposes else "")}
    return headers
