"""Roles and tenant scope: create a user in a role for a set of tenants; narrow querysets to a user's tenants."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import QuerySet

from relayops.errors import InvalidInputError
from tenancy.models import Membership
from tenancy.names import validate_tenant
from tenancy.roles import AUDITORS, OPERATORS, ensure_roles


class Role(models.TextChoices):
    """A role is a group (tenancy.roles), created by tenancy's data migration 0002_roles."""

    OPERATOR = "operator", OPERATORS  # views everything in its tenants, reprocesses, decides reviews
    AUDITOR = "auditor", AUDITORS  # views everything in its tenants, acts on nothing


_SCOPE_CACHE = "_relayops_tenants"


@dataclass(frozen=True)
class Member:
    user: Any
    role: Role
    tenants: tuple[str, ...]
    created: bool  # False: the user existed and was brought to this role and these tenants


def _tenants(tenants: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tenants, str):
        raise InvalidInputError("tenants", "must be a list of tenant names, not one string")
    names = tuple(sorted({validate_tenant(t) for t in tenants}))
    if not names:
        raise InvalidInputError("tenants", "at least one tenant is required")
    return names


def _check_password(password: str, user: Any) -> None:
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise InvalidInputError("password", " ".join(exc.messages)) from exc


def create_member(
    username: str, tenants: Iterable[str], *, role: Role = Role.OPERATOR, password: str | None = None
) -> Member:
    """Create a staff user in ``role`` for exactly ``tenants``, or bring an existing one to that state.

    An existing user keeps their password unless one is given; a superuser is refused (their scope is
    every tenant already). Raises InvalidInputError naming the bad field; nothing is written then.
    """
    role = Role(role)
    names = _tenants(tenants)
    User = get_user_model()
    if not isinstance(username, str) or not username.strip():
        raise InvalidInputError("username", "must be a non-empty string")
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise InvalidInputError("username", " ".join(exc.messages)) from exc
    with transaction.atomic():
        user = User.objects.select_for_update().filter(username=username).first()
        created = user is None
        if user is None:
            user = User(username=username, is_staff=True)
        elif user.is_superuser:
            raise InvalidInputError("username", f"{username} is a superuser; superusers see every tenant")
        if password is not None:
            _check_password(password, user)
            user.set_password(password)
        elif created:
            user.set_unusable_password()
        user.is_staff = True
        user.is_active = True
        user.save()
        group = Group.objects.filter(name=role.label).first() or ensure_roles()[role.label]
        user.groups.set([group])
        Membership.objects.filter(user=user).exclude(tenant__in=names).delete()
        for name in names:
            Membership.objects.get_or_create(user=user, tenant=name)
    return Member(user=user, role=role, tenants=names, created=created)


def tenants_of(user: AbstractBaseUser | AnonymousUser) -> frozenset[str] | None:
    """The tenants ``user`` may see: None means all (a superuser); an empty set means none.

    Cached on the user object, which lives for one request, so a page asks the database once.
    """
    if not getattr(user, "is_active", False):
        return frozenset()
    if getattr(user, "is_superuser", False):
        return None
    cached = getattr(user, _SCOPE_CACHE, None)
    if user.pk is None:
        return frozenset()
    if cached is None:
        cached = frozenset(Membership.objects.filter(user_id=user.pk).values_list("tenant", flat=True))
        setattr(user, _SCOPE_CACHE, cached)
    return cached


def scope(queryset: QuerySet, user: AbstractBaseUser | AnonymousUser, field: str = "tenant") -> QuerySet:
    """``queryset`` narrowed to the rows of ``user``'s tenants (all rows for a superuser)."""
    tenants = tenants_of(user)
    if tenants is None:
        return queryset
    return queryset.filter(**{f"{field}__in": sorted(tenants)})
