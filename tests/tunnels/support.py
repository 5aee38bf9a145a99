"""Helpers of the tunnel tests: banks of units retained through the API (synchronous
retain), set-up SQL, member principals."""

from __future__ import annotations

from rcll.access.principal import Grant, Principal

BANK_A = [
    "Ana: the payroll export runs every Friday at 18:00 from the finance server.",
    "Ben: the payroll export is encrypted with the finance team's public key.",
    "Cy: the payroll export failed last Friday because the disk was full.",
    "Dee: lunch on Friday is at the Thai place near the station.",
]
BANK_B = [
    "Runbook: when the payroll export fails, free disk space on the finance server and rerun.",
    "The office plants are watered every Monday morning by facilities.",
    "Incident 42: the payroll export disk filled up because old logs were never rotated.",
]


def retain(client, bank: str, texts: list[str]) -> dict[str, str]:
    """Retain ``texts`` into ``bank`` synchronously; ``{text: unit id}``."""
    items = [{"content": t, "document_id": f"d{i}"} for i, t in enumerate(texts)]
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()
    return unit_ids(client.application.extensions["rcll"], bank)


def unit_ids(services, bank: str) -> dict[str, str]:
    with services.pool.connection() as conn:
        rows = conn.execute("SELECT id::text AS id, text FROM memory_units WHERE bank_id = %s",
                            (bank,)).fetchall()
    return {r["text"]: r["id"] for r in rows}


def sql(services, statement: str, params=()) -> list[dict]:
    """Run one statement in its own transaction (test set-up only); rows if any."""
    with services.pool.connection() as conn, conn.transaction():
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def principal(member: str, grants: dict[str, tuple[str, tuple[str, ...]]]) -> Principal:
    """A member principal with ``grants`` ``{bank: (role, purposes)}``."""
    return Principal(member_id=member,
                     grants={b: Grant(b, role, tuple(p)) for b, (role, p) in grants.items()})
