"""Who acts, and what they may do: a signed-in user, an API key or a command run on the server.

Every control service takes an ``Actor``; the audit records its ``operator``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser

from relayops.errors import InvalidInputError
from tenancy.services import tenants_of

# What an API key may do to its own tenant's jobs: the key already submits them.
API_KEY_ACTIONS = frozenset({"cancel_job", "run_job_now"})


@dataclass(frozen=True)
class Actor:
    operator: object  # what the audit records: the user, or a name ("api-key:billing-bot")
    tenants: frozenset[str] | None  # the tenants it acts on; None: every tenant
    user: AbstractBaseUser | None = None  # a user's permissions are its own (tenancy.<codename>)
    granted: frozenset[str] | None = None  # a non-user's permission codenames; None: every one

    @classmethod
    def of_user(cls, user: AbstractBaseUser) -> Actor:
        if not isinstance(user, AbstractBaseUser) or not user.is_authenticated or user.pk is None:
            raise InvalidInputError("operator", "must be a signed-in user")
        return cls(user, tenants_of(user), user=user)

    @classmethod
    def api_key(cls, name: str, tenant: str) -> Actor:
        """An API key acts on its own tenant's jobs only: cancel and run-now."""
        return cls(f"api-key:{name}", frozenset({tenant}), granted=API_KEY_ACTIONS)

    @classmethod
    def command(cls, name: str) -> Actor:
        """A command run on the server by someone with its shell (and so its database): every tenant."""
        return cls(f"manage.py:{name}", None)

    def may(self, codename: str) -> bool:
        if self.user is not None:
            return bool(self.user.is_active and self.user.has_perm(f"tenancy.{codename}"))  # type: ignore[attr-defined]
        return self.granted is None or codename in self.granted

    def sees(self, tenant: str) -> bool:
        return self.tenants is None or tenant in self.tenants


def as_actor(who: object) -> Actor:
    return who if isinstance(who, Actor) else Actor.of_user(who)  # type: ignore[arg-type]
