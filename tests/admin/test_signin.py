"""Sign-in throttling (django-axes): a lockout per username and per address, a clear page, the admin's
unlock, and a log line per failure that never holds the password."""

from __future__ import annotations

import logging

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client

from tests.admin import factories
from tests.admin.factories import PASSWORD
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db

WRONG = "Wrong-horse-battery-9"


def sign_in(username: str, password: str, address: str = "10.0.0.1") -> tuple[Client, int]:
    client = Client(REMOTE_ADDR=address)
    response = client.post("/admin/login/", {"username": username, "password": password, "next": "/admin/"})
    return client, response.status_code


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_thirty_wrong_passwords_then_the_right_one_is_refused_with_a_clear_page():
    factories.member("olivia", "acme")
    statuses = [sign_in("olivia", f"{WRONG}{n}", address=f"10.0.1.{n}")[1] for n in range(30)]
    limit = settings.AXES_FAILURE_LIMIT
    assert statuses[: limit - 1] == [200] * (limit - 1)  # the login form again, with its error
    assert set(statuses[limit - 1:]) == {429}
    client, status = sign_in("olivia", PASSWORD, address="10.0.2.1")  # a fresh address: the username is locked
    assert status == 429 and not signed_in(client)
    page = client.post("/admin/login/", {"username": "olivia", "password": PASSWORD}).content.decode()
    assert "Sign-in blocked" in page and f"Too many failed sign-ins ({limit})" in page
    assert "for 15 min" in page and "ask an administrator to unlock" in page


def test_failures_from_one_address_lock_that_address_for_every_username():
    factories.member("olivia", "acme")
    factories.member("gregor", "globex")
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(f"guess-{n}", WRONG, address="10.9.9.9")
    client, status = sign_in("gregor", PASSWORD, address="10.9.9.9")
    assert status == 429 and not signed_in(client)
    client, status = sign_in("gregor", PASSWORD, address="10.9.9.10")
    assert status == 302 and signed_in(client)


def test_a_few_failures_then_the_right_password_signs_in_and_forgets_them():
    factories.member("olivia", "acme")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in("olivia", WRONG)
    client, status = sign_in("olivia", PASSWORD)
    assert status == 302 and signed_in(client)
    assert not AccessAttempt.objects.filter(username="olivia").exists()


def test_a_superuser_unlocks_a_username_in_the_admin():
    factories.member("olivia", "acme")
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in("olivia", WRONG, address=f"10.0.3.{n}")
    assert sign_in("olivia", PASSWORD, address="10.0.4.1")[1] == 429
    root = login(factories.superuser())
    listed = root.get("/admin/axes/accessattempt/", {"q": "olivia"})
    assert listed.status_code == 200 and "olivia" in listed.content.decode()
    attempts = list(AccessAttempt.objects.filter(username="olivia").values_list("pk", flat=True))
    response = root.post("/admin/axes/accessattempt/", {
        "action": "delete_selected", "_selected_action": attempts, "post": "yes",
    })
    assert response.status_code == 302
    client, status = sign_in("olivia", PASSWORD, address="10.0.4.1")
    assert status == 302 and signed_in(client)


def test_operators_and_auditors_cannot_see_or_unlock_sign_in_attempts():
    sign_in("mallory", WRONG)
    for user in (factories.member("olivia", "acme"), factories.member("audrey", "acme", auditor=True)):
        client = login(user)
        assert client.get("/admin/axes/accessattempt/").status_code == 403
        assert client.post("/admin/axes/accessattempt/", {
            "action": "delete_selected", "_selected_action": list(AccessAttempt.objects.values_list("pk", flat=True)),
            "post": "yes",
        }).status_code == 403
    assert AccessAttempt.objects.filter(username="mallory").exists()


def test_every_failure_is_logged_with_username_and_address_and_never_the_password(caplog):
    factories.member("olivia", "acme")
    secret = "My-Secret-Guess-4242"
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            sign_in("olivia", secret, address="10.7.7.7")
    failures = [r.getMessage() for r in caplog.records if "login failure" in r.getMessage()]
    assert len(failures) == 2 and all("olivia" in f and "10.7.7.7" in f for f in failures)
    assert secret not in caplog.text
    stored = " ".join(str(v) for row in AccessAttempt.objects.values() for v in row.values())
    assert "olivia" in stored and secret not in stored
