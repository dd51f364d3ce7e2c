"""Endpoint secrets: encrypted at rest (a dump shows no secret), readable with the configured keys,
rotatable, and never shown after creation."""

from __future__ import annotations

import base64

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from webhooks import secrets, services
from webhooks.errors import SecretUnreadableError
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db
URL = "http://127.0.0.1:9/hook"


def relayops(**options) -> override_settings:
    return override_settings(RELAYOPS={**settings.RELAYOPS, **options})


def dump() -> str:
    """What a database dump of the endpoints table holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM webhooks_webhookendpoint")
        return repr(cursor.fetchall())


def test_a_dump_does_not_reveal_the_secret_and_the_keys_do():
    made = services.create_endpoint("acme", URL, ["extraction.completed"])
    assert made.secret.startswith("whsec_") and len(made.secret) > 40
    assert made.secret not in dump() and made.secret[6:] not in dump()
    assert secrets.decrypt(WebhookEndpoint.objects.get().secret_encrypted) == made.secret
    assert made.endpoint.secret_hint == "…" + made.secret[-4:]


def test_two_endpoints_never_share_a_secret():
    a = services.create_endpoint("acme", URL, ["extraction.completed"])
    b = services.create_endpoint("acme", URL, ["extraction.completed"])
    assert a.secret != b.secret


def test_configured_keys_rotate_the_first_encrypts_every_one_decrypts():
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    with relayops(WEBHOOK_SECRET_KEYS=[old]):
        made = services.create_endpoint("acme", URL, ["extraction.completed"])
    with relayops(WEBHOOK_SECRET_KEYS=[new, old]):
        assert services.reencrypt_secrets() == (1, [])
    with relayops(WEBHOOK_SECRET_KEYS=[new]):  # the old key is gone: still readable after re-encryption
        assert secrets.decrypt(WebhookEndpoint.objects.get().secret_encrypted) == made.secret


def test_a_changed_secret_key_without_its_fallback_makes_secrets_unreadable_not_wrong():
    services.create_endpoint("acme", URL, ["extraction.completed"])
    token = WebhookEndpoint.objects.get().secret_encrypted
    with override_settings(SECRET_KEY="another-secret-key-" + "x" * 40, SECRET_KEY_FALLBACKS=[]):
        with pytest.raises(SecretUnreadableError):
            secrets.decrypt(token)
        assert services.reencrypt_secrets() == (0, [WebhookEndpoint.objects.get().pk])
    with override_settings(SECRET_KEY="another-secret-key-" + "x" * 40, SECRET_KEY_FALLBACKS=[settings.SECRET_KEY]):
        assert secrets.decrypt(token).startswith("whsec_")


def test_a_new_secret_replaces_the_old_one():
    made = services.create_endpoint("acme", URL, ["extraction.completed"])
    renewed = services.new_secret(made.endpoint)
    assert renewed.secret != made.secret
    assert secrets.decrypt(WebhookEndpoint.objects.get().secret_encrypted) == renewed.secret


@pytest.mark.parametrize(("tenant", "url", "topics", "field"), [
    ("Not A Tenant", URL, ["extraction.completed"], "tenant_id"),
    ("acme", "ftp://127.0.0.1/", ["extraction.completed"], "url"),
    ("acme", URL, [], "topics"),
    ("acme", URL, ["job.deleted"], "topics"),
    ("acme", URL, "extraction.completed", "topics"),
])
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(tenant, url, topics, field):
    from relayops.errors import InvalidInputError

    with pytest.raises(InvalidInputError) as refused:
        services.create_endpoint(tenant, url, topics)
    assert refused.value.field == field and WebhookEndpoint.objects.count() == 0


def test_rotate_webhook_keys_reencrypts_and_names_what_it_cannot_read():
    from io import StringIO

    from django.core.management import CommandError, call_command

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    with relayops(WEBHOOK_SECRET_KEYS=[old]):
        made = services.create_endpoint("acme", URL, ["extraction.completed"])
    out = StringIO()
    with relayops(WEBHOOK_SECRET_KEYS=[new, old]):
        call_command("rotate_webhook_keys", stdout=out)
    assert "Re-encrypted 1 endpoint secret(s)" in out.getvalue()
    with relayops(WEBHOOK_SECRET_KEYS=[new]):
        assert secrets.decrypt(WebhookEndpoint.objects.get().secret_encrypted) == made.secret
    with relayops(WEBHOOK_SECRET_KEYS=[Fernet.generate_key().decode()]):
        with pytest.raises(CommandError, match=f"ids {made.endpoint.pk}"):
            call_command("rotate_webhook_keys", stdout=StringIO())


@pytest.mark.parametrize(("options", "check_id"), [
    ({"WEBHOOK_SECRET_KEYS": ["not-a-fernet-key"]}, "relayops.E022"),
    ({"WEBHOOK_TIMEOUT_SECONDS": 0}, "relayops.E021"),
    ({"WEBHOOK_TIMEOUT_SECONDS": 600}, "relayops.E021"),
    ({"OUTBOX_MAX_FAILURES": 0}, "relayops.E020"),
    ({"OUTBOX_BACKOFF_SECONDS": -1.0}, "relayops.E020"),
])
def test_wrong_webhook_and_outbox_settings_stop_start_up_with_a_clear_error(options, check_id):
    from django.core.checks import run_checks

    with relayops(**options):
        found = [m for m in run_checks() if m.id == check_id]
    assert len(found) == 1 and "RELAYOPS_" in found[0].msg


@pytest.mark.parametrize("key", [
    Fernet.generate_key().decode(),
    "not-a-fernet-key",
    base64.urlsafe_b64encode(b"k" * 31).decode(),  # 31 bytes
    base64.urlsafe_b64encode(b"k" * 33).decode(),  # 33 bytes
    Fernet.generate_key().decode().rstrip("="),  # padding dropped
    "é" * 44,  # not ASCII
])
def test_the_start_up_check_accepts_exactly_the_keys_fernet_accepts(key):
    """The check reads the keys without cryptography (a cluster process never loads it unless it
    delivers a webhook): it must agree with Fernet on every key."""
    try:
        Fernet(key.encode())
    except ValueError:
        fernet_takes_it = False
    else:
        fernet_takes_it = True
    with relayops(WEBHOOK_SECRET_KEYS=[key]):
        try:
            secrets.check_keys()
        except ImproperlyConfigured:
            check_takes_it = False
        else:
            check_takes_it = True
    assert check_takes_it == fernet_takes_it
