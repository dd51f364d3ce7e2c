"""The review app's exceptions. Each class's docstring is its default message."""

from __future__ import annotations

from relayops.errors import InvalidInputError, RelayOpsError

__all__ = ["AlreadyDecidedError", "InvalidInputError", "NoSuchReviewError", "NotAllowedError"]


class NoSuchReviewError(RelayOpsError):
    """No such review in your tenants: it does not exist, or it is another tenant's."""


class AlreadyDecidedError(RelayOpsError):
    """This review was already decided; a decision is final and the first one stands."""


class NotAllowedError(RelayOpsError):
    """You may not decide reviews."""
