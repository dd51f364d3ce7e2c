"""API keys in the admin: listed per tenant, never the key itself; revoked by operators of the key's
tenant and superusers, through the service, after a confirmation; create_api_key prints the key once."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from ingest.keys import authenticate, create_api_key, hash_key, KeyState
from ingest.models import ApiKey
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:ingest_apikey_changelist")


@pytest.fixture
def keys() -> dict[str, object]:
    return {"acme": create_api_key("acme", "billing-bot"), "globex": create_api_key("globex", "ap-bot")}


def revoke(client, *keys) -> object:
    return client.post(CHANGELIST, {"action": "revoke", "_selected_action": [k.key.pk for k in keys], "post": "yes"},
                       follow=True)


def test_create_api_key_prints_the_key_once_and_stores_only_its_hash():
    out, err = StringIO(), StringIO()
    call_command("create_api_key", "--tenant", "acme", "--name", "billing-bot", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    key = ApiKey.objects.get()
    assert raw.startswith(f"rk_{key.prefix}_") and "shown once" in err.getvalue()
    assert key.key_hash == hash_key(raw)
    assert raw not in str(list(ApiKey.objects.values()))  # only the hash and the public prefix are stored
    assert authenticate(raw).state == KeyState.VALID and authenticate(raw).key == key
    with pytest.raises(CommandError, match="already has a live key"):
        call_command("create_api_key", "--tenant", "acme", "--name", "billing-bot", stdout=StringIO())
    with pytest.raises(CommandError, match="tenant_id"):
        call_command("create_api_key", "--tenant", "ACME!", "--name", "x", stdout=StringIO())
    assert ApiKey.objects.count() == 1


def test_an_operator_lists_only_their_tenants_keys_and_never_the_key(keys, acme_operator):
    html = login(acme_operator).get(CHANGELIST).content.decode()
    assert "billing-bot" in html and f"rk_{keys['acme'].key.prefix}_" in html
    assert "ap-bot" not in html and keys["globex"].key.prefix not in html
    assert keys["acme"].raw not in html and keys["acme"].key.key_hash not in html


def test_another_tenants_key_page_is_a_404_like_a_missing_one(keys, acme_operator):
    client = login(acme_operator)
    assert client.get(reverse("admin:ingest_apikey_change", args=[keys["globex"].key.pk])).status_code == 404
    assert client.get(reverse("admin:ingest_apikey_change", args=[999])).status_code == 404
    assert client.get(reverse("admin:ingest_apikey_change", args=[keys["acme"].key.pk])).status_code == 200


def test_an_operator_revokes_their_tenants_key_after_confirming(keys, acme_operator):
    client = login(acme_operator)
    confirm = client.post(CHANGELIST, {"action": "revoke", "_selected_action": [keys["acme"].key.pk]})
    assert b"Revoke these API keys?" in confirm.content
    assert ApiKey.objects.get(pk=keys["acme"].key.pk).active  # nothing before the confirmation
    done = revoke(client, keys["acme"])
    assert b"Revoked 1 API key(s)" in done.content
    key = ApiKey.objects.get(pk=keys["acme"].key.pk)
    assert not key.active and key.revoked_by == "olivia"
    assert authenticate(keys["acme"].raw).state == KeyState.REVOKED
    from django.contrib.admin.models import LogEntry

    log = LogEntry.objects.get()  # Django's admin history: "Recent actions" and the key's own history
    assert (log.object_id, log.user_id, log.get_change_message()) == (str(key.pk), acme_operator.pk, "Revoked.")


def test_an_operator_cannot_revoke_another_tenants_key(keys, acme_operator):
    revoke(login(acme_operator), keys["globex"])
    assert ApiKey.objects.get(pk=keys["globex"].key.pk).active


def test_an_auditor_sees_keys_but_is_not_offered_the_revoke_action(keys, auditor):
    client = login(auditor)
    page = client.get(CHANGELIST)
    assert page.status_code == 200 and b"billing-bot" in page.content and b"ap-bot" in page.content
    assert b'value="revoke"' not in page.content
    assert revoke(client, keys["acme"]).status_code == 403
    assert ApiKey.objects.get(pk=keys["acme"].key.pk).active


def test_a_superuser_revokes_any_key_and_a_second_revocation_changes_nothing(keys, root):
    client = login(root)
    revoke(client, keys["acme"], keys["globex"])
    first = ApiKey.objects.get(pk=keys["acme"].key.pk).revoked_at
    again = revoke(client, keys["acme"])
    assert b"1 key(s) were already revoked" in again.content
    assert ApiKey.objects.get(pk=keys["acme"].key.pk).revoked_at == first
    assert not ApiKey.objects.filter(revoked_at__isnull=True).exists()
