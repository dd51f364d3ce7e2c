"""Admin tests: Django's test client against the real admin on PostgreSQL."""

from __future__ import annotations

import pytest
from django.test import Client

from tenancy.roles import ensure_roles
from tests.admin import factories


@pytest.fixture(autouse=True)
def roles(db):
    """The groups come from a data migration; a transactional test elsewhere may have flushed them."""
    return ensure_roles()


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def acme_operator():
    return factories.member("olivia", "acme")


@pytest.fixture
def globex_operator():
    return factories.member("gregor", "globex")


@pytest.fixture
def auditor():
    return factories.member("audrey", "acme", "globex", auditor=True)


@pytest.fixture
def root():
    return factories.superuser()
