"""What the webhooks app refuses."""

from __future__ import annotations

from relayops.errors import InvalidInputError, RelayOpsError


class TargetRefusedError(InvalidInputError):
    """A webhook URL RelayOps will not post to: the message says why, never the URL's query string."""

    def __init__(self, problem: str) -> None:
        super().__init__("url", problem)


class UnresolvableHostError(TargetRefusedError):
    """A webhook URL whose host name does not resolve (now): refused when saved, a ``dns`` failure when delivering."""

    def __init__(self) -> None:
        super().__init__("its host does not resolve")


class SecretUnreadableError(RelayOpsError):
    """An endpoint's secret cannot be decrypted with the configured keys (SECRET_KEY or
    RELAYOPS_WEBHOOK_SECRET_KEYS changed without keeping the old key): give the endpoint a new secret."""
