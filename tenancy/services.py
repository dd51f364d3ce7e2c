"""Roles and tenant scope: create a user in a role for a set of tenants, change an existing one's tenants or
role explicitly (never as a side effect of creating it again); narrow querysets to a user's tenants."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import QuerySet

from relayops.errors import InvalidInputError
from tenancy.errors import MemberExistsError
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
    """A user in a role for some tenants, and what the call that returned it changed."""

    user: Any
    role: Role | None  # None: a staff user in neither role's group (made by hand)
    tenants: tuple[str, ...]
    created: bool
    added: tuple[str, ...] = ()  # tenants granted by this call (all of them for a new user)
    removed: tuple[str, ...] = ()  # tenants taken away by this call
    previous_role: str = ""  # the role before ("none" for no role), when this call changed it
    password_changed: bool = False

    @property
    def changed(self) -> bool:
        return self.created or bool(self.added or self.removed or self.previous_role or self.password_changed)

    def changes(self) -> list[str]:
        """What this call changed, one phrase each (``added tenant globex``, ``role auditor -> operator``)."""
        phrases = [f"added tenant {t}" for t in self.added] + [f"removed tenant {t}" for t in self.removed]
        if self.previous_role and self.role is not None:
            phrases.append(f"role {self.previous_role} -> {self.role.value}")
        return phrases + (["password changed"] if self.password_changed else [])


def _tenants(tenants: Iterable[str], *, required: bool = True) -> tuple[str, ...]:
    if isinstance(tenants, str):
        raise InvalidInputError("tenants", "must be a list of tenant names, not one string")
    names = tuple(sorted({validate_tenant(t) for t in tenants}))
    if required and not names:
        raise InvalidInputError("tenants", "at least one tenant is required")
    return names


def _check_password(password: str, user: Any) -> None:
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise InvalidInputError("password", " ".join(exc.messages)) from exc


def _check_username(username: object) -> str:
    if not isinstance(username, str) or not username.strip():
        raise InvalidInputError("username", "must be a non-empty string")
    try:
        get_user_model().username_validator(username)
    except ValidationError as exc:
        raise InvalidInputError("username", " ".join(exc.messages)) from exc
    return username


def generate_password(user: Any = None) -> str:
    """A random password that the configured validators accept (for ``user``, if given)."""
    while True:
        password = secrets.token_urlsafe(15)
        try:
            validate_password(password, user)
        except ValidationError:  # all digits, or like the username: vanishingly rare; draw again
            continue
        return password


def _role_of(user: Any) -> Role | None:
    names = set(user.groups.values_list("name", flat=True))
    return next((role for role in Role if role.label in names), None)


def _set_role(user: Any, role: Role) -> None:
    user.groups.set([Group.objects.filter(name=role.label).first() or ensure_roles()[role.label]])


def _set_password(user: Any, password: str | None) -> bool:
    if password is None:
        return False
    _check_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    return True


def create_member(
    username: str, tenants: Iterable[str], *, role: Role = Role.OPERATOR, password: str | None = None
) -> Member:
    """Create a staff user in ``role`` for exactly ``tenants``.

    Run again for a user who already has exactly that role and those tenants, it changes nothing but
    the password (if one is given), so a setup script may repeat it. A user with another role or
    other tenants is refused (MemberExistsError: change it with ``change_member``), and so is a
    superuser. Raises InvalidInputError naming the bad field; nothing is written then.
    """
    role = Role(role)
    names = _tenants(tenants)
    _check_username(username)
    with transaction.atomic():
        user = get_user_model().objects.select_for_update().filter(username=username).first()
        if user is not None:
            current = _current(user)
            if (current.role, current.tenants) != (role, names):
                raise MemberExistsError(username, current.role.value if current.role else "no role", current.tenants)
            return replace(current, password_changed=_set_password(user, password))
        user = get_user_model()(username=username, is_staff=True, is_active=True)
        if password is not None:
            _check_password(password, user)
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save()
        _set_role(user, role)
        Membership.objects.bulk_create([Membership(user=user, tenant=name) for name in names])
    return Member(user=user, role=role, tenants=names, created=True, added=names, password_changed=password is not None)


def _current(user: Any) -> Member:
    if user.is_superuser:
        raise InvalidInputError("username", f"{user.get_username()} is a superuser; superusers see every tenant")
    tenants = tuple(sorted(Membership.objects.filter(user=user).values_list("tenant", flat=True)))
    return Member(user=user, role=_role_of(user), tenants=tenants, created=False)


def change_member(
    username: str, *, add: Iterable[str] = (), remove: Iterable[str] = (), role: Role | None = None,
    password: str | None = None,
) -> Member:
    """Grant ``add``, take away ``remove``, set ``role`` and/or the password of an existing member.

    The result says what changed (``Member.changes``); asking for what already holds changes
    nothing. Refused with InvalidInputError, writing nothing, for an unknown user, a superuser, a
    tenant both added and removed, or a change that would leave the user without a tenant.
    """
    adding, removing = _tenants(add, required=False), _tenants(remove, required=False)
    _check_username(username)
    if set(adding) & set(removing):
        raise InvalidInputError("tenants", f"{', '.join(sorted(set(adding) & set(removing)))} both added and removed")
    with transaction.atomic():
        user = get_user_model().objects.select_for_update().filter(username=username).first()
        if user is None:
            raise InvalidInputError("username", f"{username} does not exist")
        current = _current(user)
        added = tuple(t for t in adding if t not in current.tenants)
        removed = tuple(t for t in removing if t in current.tenants)
        tenants = tuple(sorted((set(current.tenants) | set(added)) - set(removed)))
        if not tenants:
            raise InvalidInputError("tenants", f"{username} would be left without a tenant")
        Membership.objects.filter(user=user, tenant__in=removed).delete()
        Membership.objects.bulk_create([Membership(user=user, tenant=name) for name in added])
        new_role = Role(role) if role is not None else current.role
        if new_role is not None and new_role != current.role:
            _set_role(user, new_role)
        password_changed = _set_password(user, password)
    previous = (current.role.value if current.role else "none") if new_role != current.role else ""
    return Member(
        user=user, role=new_role, tenants=tenants, created=False, added=added, removed=removed,
        previous_role=previous, password_changed=password_changed,
    )


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
