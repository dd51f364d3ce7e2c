"""Roles (groups from the data migration) and the create_operator command."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.management import CommandError, call_command

from pipeline.errors import InvalidInputError
from tenancy.models import Membership
from tenancy.roles import ROLES
from tenancy.services import Role, create_member, generate_password, tenants_of

pytestmark = pytest.mark.django_db

VIEW_ONLY = {
    "pipeline.view_job", "pipeline.view_result", "pipeline.view_review", "pipeline.view_outboxevent",
    "pipeline.view_deadletter", "dlq.view_auditentry", "dlq.view_reprocessrefusal", "ingest.view_apikey",
    "tenancy.view_tenantcontrol",
    "webhooks.view_webhookendpoint",
}


def perms_of(group_name: str) -> set[str]:
    group = Group.objects.get(name=group_name)
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}


def test_the_migration_creates_both_roles_with_their_permissions():
    assert set(ROLES) == {"Operators", "Auditors"}
    assert perms_of("Auditors") == VIEW_ONLY
    assert perms_of("Operators") == VIEW_ONLY | {"dlq.reprocess_deadletter", "pipeline.decide_review",
                                                 "ingest.revoke_apikey", "tenancy.cancel_job",
                                                 "tenancy.run_job_now", "tenancy.pause_intake",
                                                 "review.view_document_content", "pipeline.redeliver_outboxevent",
                                                 "webhooks.configure_webhookendpoint"}
    assert "review.view_document_content" not in perms_of("Auditors")


def test_no_role_may_add_change_or_delete_anything():
    for name in ROLES:
        assert not {p for p in perms_of(name) if p.split(".")[1].startswith(("add_", "change_", "delete_"))}


def run(*args: str, **options) -> str:
    out = StringIO()
    call_command("create_operator", *args, stdout=out, **options)
    return out.getvalue()


def test_create_operator_with_the_signature_the_demo_uses():
    out = run("alice", tenant=["acme", "globex"], auditor=False, password="s3cret-enough")
    user = get_user_model().objects.get(username="alice")
    assert user.is_staff and not user.is_superuser and user.check_password("s3cret-enough")
    assert [g.name for g in user.groups.all()] == ["Operators"]
    assert tenants_of(user) == {"acme", "globex"}
    assert "Created operator alice for tenants: acme, globex" in out


def test_create_auditor_from_the_command_line_generates_a_password_once():
    out = run("bob", "--tenant", "acme", "--auditor")
    user = get_user_model().objects.get(username="bob")
    assert [g.name for g in user.groups.all()] == ["Auditors"]
    password = out.split("Generated password (shown once): ")[1].strip()
    assert len(password) >= 16 and user.check_password(password)


@pytest.mark.parametrize("tenant", ["Acme", "a", "acme corp", "1acme", "x" * 40])
def test_a_bad_tenant_name_is_a_clear_error_and_writes_nothing(tenant):
    with pytest.raises(CommandError, match=r"Cannot create carol: tenant_id: must match"):
        run("carol", tenant=["acme", tenant], password="s3cret-enough")
    assert not get_user_model().objects.filter(username="carol").exists()


def test_at_least_one_tenant_is_required():
    with pytest.raises(CommandError, match="at least one --tenant"):
        run("carol", password="s3cret-enough")


def test_a_weak_password_is_refused():
    with pytest.raises(CommandError, match="password: This password is too short"):
        run("carol", tenant=["acme"], password="short")
    assert not get_user_model().objects.filter(username="carol").exists()


def state(username: str) -> tuple[list[str], set[str]]:
    user = get_user_model().objects.get(username=username)
    return [g.name for g in user.groups.all()], set(Membership.objects.filter(user=user).values_list("tenant", flat=True))


def test_running_it_again_with_fewer_tenants_is_refused_and_drops_nothing():
    run("alice", tenant=["acme", "initech"], auditor=True, password="first-password")
    with pytest.raises(CommandError, match=r"alice already exists \(auditor of acme, initech\)\. Nothing was "
                                           r"changed\. To change an existing user, use --add-tenant"):
        run("alice", tenant=["acme"])
    assert state("alice") == (["Auditors"], {"acme", "initech"})
    assert get_user_model().objects.get(username="alice").check_password("first-password")


def test_running_it_again_with_another_role_is_refused():
    run("alice", tenant=["acme"], password="first-password")
    with pytest.raises(CommandError, match="already exists"):
        run("alice", tenant=["acme"], auditor=True)
    assert state("alice") == (["Operators"], {"acme"})


def test_running_it_again_with_the_same_role_and_tenants_changes_only_a_given_password():
    run("dave", tenant=["acme", "globex"], password="first-password")
    assert "Unchanged: operator dave for tenants: acme, globex" in run("dave", tenant=["globex", "acme"])
    out = run("dave", tenant=["acme", "globex"], password="second-password")
    assert "Updated operator dave: password changed. Tenants now: acme, globex" in out
    assert get_user_model().objects.get(username="dave").check_password("second-password")
    assert state("dave") == (["Operators"], {"acme", "globex"})


def test_tenants_and_role_change_through_explicit_flags_which_print_what_changed():
    run("alice", tenant=["acme", "initech"], auditor=True, password="first-password")
    out = run("alice", add_tenant=["globex"], remove_tenant=["initech"], role="operator")
    assert ("Updated operator alice: added tenant globex; removed tenant initech; role auditor -> operator. "
            "Tenants now: acme, globex") in out
    assert state("alice") == (["Operators"], {"acme", "globex"})
    assert "Unchanged: operator alice for tenants: acme, globex" in run("alice", add_tenant=["acme"], role="operator")
    assert get_user_model().objects.get(username="alice").check_password("first-password")


def test_a_change_never_leaves_a_user_without_a_tenant_and_writes_nothing_when_refused():
    run("alice", tenant=["acme"], auditor=True, password="first-password")
    with pytest.raises(CommandError, match="Cannot change alice: tenants: alice would be left without a tenant"):
        run("alice", remove_tenant=["acme"], role="operator")
    assert state("alice") == (["Auditors"], {"acme"})


def test_changing_an_unknown_user_or_mixing_create_and_change_flags_is_refused():
    with pytest.raises(CommandError, match="Cannot create zed: username: zed does not exist"):
        run("zed", add_tenant=["acme"])
    with pytest.raises(CommandError, match="Use one kind or the other"):
        run("zed", tenant=["acme"], remove_tenant=["globex"])
    assert not get_user_model().objects.filter(username="zed").exists()


def test_a_numeric_short_common_password_is_refused_with_the_validators_messages():
    with pytest.raises(CommandError) as refused:
        run("carol", tenant=["acme"], password="12345678")
    message = str(refused.value)
    for expected in ("at least 12 characters", "too common", "entirely numeric"):
        assert expected in message
    with pytest.raises(CommandError, match="too similar to the username"):
        run("carolina-smith", tenant=["acme"], password="carolina-smith1")
    assert not get_user_model().objects.filter(username__startswith="carol").exists()


def test_generated_passwords_pass_the_validators():
    user = get_user_model()(username="demo-operator")
    for _ in range(200):
        validate_password(generate_password(user), user)


def test_a_superuser_is_not_demoted():
    get_user_model().objects.create_superuser("root", password="root-password")
    with pytest.raises(CommandError, match="is a superuser"):
        run("root", tenant=["acme"], password="another-password")
    assert get_user_model().objects.get(username="root").is_superuser


def test_the_service_restores_a_deleted_role_group():
    Group.objects.filter(name="Auditors").delete()
    member = create_member("erin", ["acme"], role=Role.AUDITOR, password="s3cret-enough")
    assert perms_of("Auditors") == VIEW_ONLY
    assert [g.name for g in member.user.groups.all()] == ["Auditors"]


def test_the_service_refuses_one_string_for_tenants():
    with pytest.raises(InvalidInputError, match="tenants"):
        create_member("frank", "acme", password="s3cret-enough")


def test_superusers_see_all_tenants_and_members_without_tenants_see_none():
    root = get_user_model().objects.create_superuser("root", password="root-password")
    nobody = get_user_model().objects.create_user("nobody", password="s3cret-enough", is_staff=True)
    assert tenants_of(root) is None
    assert tenants_of(nobody) == frozenset()
