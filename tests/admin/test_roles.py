"""Roles (groups from the data migration) and the create_operator command."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from pipeline.errors import InvalidInputError
from tenancy.models import Membership
from tenancy.roles import ROLES
from tenancy.services import Role, create_member, tenants_of

pytestmark = pytest.mark.django_db

VIEW_ONLY = {
    "pipeline.view_job", "pipeline.view_result", "pipeline.view_review", "pipeline.view_outboxevent",
    "pipeline.view_deadletter", "dlq.view_auditentry", "dlq.view_reprocessrefusal", "ingest.view_apikey",
}


def perms_of(group_name: str) -> set[str]:
    group = Group.objects.get(name=group_name)
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}


def test_the_migration_creates_both_roles_with_their_permissions():
    assert set(ROLES) == {"Operators", "Auditors"}
    assert perms_of("Auditors") == VIEW_ONLY
    assert perms_of("Operators") == VIEW_ONLY | {"dlq.reprocess_deadletter", "pipeline.decide_review",
                                                 "ingest.revoke_apikey"}


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


def test_running_it_again_brings_the_user_to_the_new_role_and_tenants():
    run("dave", tenant=["acme", "globex"], password="first-password")
    out = run("dave", tenant=["initech"], auditor=True)
    user = get_user_model().objects.get(username="dave")
    assert "Updated auditor dave for tenants: initech" in out and "Password unchanged." in out
    assert user.check_password("first-password")
    assert [g.name for g in user.groups.all()] == ["Auditors"]
    assert set(Membership.objects.filter(user=user).values_list("tenant", flat=True)) == {"initech"}


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
