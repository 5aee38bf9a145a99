"""Fixtures of the tunnel tests."""

from __future__ import annotations

import uuid

import pytest

from tests.tunnels.support import BANK_A, BANK_B, retain


@pytest.fixture()
def banks(client):
    """Two fresh banks A and B (names unique per test) with the units above:
    ``(bank_a, bank_b, ids_a, ids_b)`` where ``ids_*`` map text → unit id."""
    tag = uuid.uuid4().hex[:8]
    a, b = f"tun-a-{tag}", f"tun-b-{tag}"
    return a, b, retain(client, a, BANK_A), retain(client, b, BANK_B)
