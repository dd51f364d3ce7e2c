"""Tenancy's exceptions, rooted in relayops.errors. Each class's docstring is its default message."""

from __future__ import annotations

from relayops.errors import RelayOpsError


class MemberExistsError(RelayOpsError):
    """The user exists with another role or other tenants; creating it again would change them."""

    def __init__(self, username: str, role: str, tenants: tuple[str, ...]) -> None:
        self.username = username
        self.role = role
        self.tenants = tenants
        super().__init__(f"{username} already exists ({role} of {', '.join(tenants) or 'no tenant'})")
