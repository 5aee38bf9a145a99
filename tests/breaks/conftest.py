"""Attacks on issue 9 (helper break9): the real auth-on app of ``tests/access`` — keys,
grants and members made through the routes, real PostgreSQL, Redis, no mocks."""

from tests.access.conftest import (  # noqa: F401  (fixtures)
    auth_app, auth_services, auth_settings, enqueued,
)

import pytest


@pytest.fixture()
def api(auth_app):
    return auth_app.test_client()
