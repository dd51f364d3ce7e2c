"""The controls' exceptions, rooted in relayops.errors. Each class's docstring is its default message."""

from __future__ import annotations

from relayops.errors import RelayOpsError


class NotFoundError(RelayOpsError):
    """No such job or tenant in the caller's tenants (another tenant's answers the same: its existence
    is not confirmed)."""


class NotPermittedError(RelayOpsError):
    """The caller lacks the permission this action needs."""


class NotApplicableError(RelayOpsError):
    """The action does not apply to the row as it stands now (a finished job, a job already due, a
    tenant already paused); nothing was changed."""
