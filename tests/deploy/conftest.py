"""Fixtures of the deployment tests (the checks themselves are in deploy_checks.py)."""

from __future__ import annotations

import pytest
from deploy_checks import settings_env_names

from workers.queues import QueueNames


@pytest.fixture(scope="session")
def env_names() -> set[str]:
    """Every ``RCLL_*`` variable Settings reads."""
    return settings_env_names()


@pytest.fixture(scope="session")
def queue_names() -> list[str]:
    """The Celery queues (``workers.queues.QueueNames``)."""
    return QueueNames.all()
