"""Which URLs a webhook may post to.

http and https only, no credentials in the URL. The host is resolved and every address it resolves to
is checked: link-local addresses (169.254.0.0/16, fe80::/10) and cloud metadata services
(169.254.169.254, fd00:ec2::254, 100.100.100.200, metadata.google.internal) are refused unless
``RELAYOPS_WEBHOOK_ALLOW_LINK_LOCAL`` is set; loopback, private and other non-public addresses unless
``RELAYOPS_WEBHOOK_ALLOW_PRIVATE`` is set; unspecified, multicast and reserved addresses always. The
check runs when an endpoint is saved and again before each delivery, and the delivery connects to the
address that was checked (``Target.address``), so a DNS answer that changes in between (rebinding)
cannot steer a POST elsewhere.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from webhooks.errors import TargetRefusedError, UnresolvableHostError

MAX_URL_LENGTH = 2000
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata", "instance-data"})
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2",
))

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Policy:
    allow_private: bool = False
    allow_link_local: bool = False

    @classmethod
    def from_settings(cls) -> "Policy":
        return cls(allow_private=settings.RELAYOPS["WEBHOOK_ALLOW_PRIVATE"],
                   allow_link_local=settings.RELAYOPS["WEBHOOK_ALLOW_LINK_LOCAL"])


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as written, lower-cased (the Host header and the TLS server name)
    port: int
    address: IPAddress  # the checked address the delivery connects to


def _parse(url: object) -> tuple[str, str, int]:
    if not isinstance(url, str) or not url.strip():
        raise TargetRefusedError("a URL is required")
    if len(url) > MAX_URL_LENGTH or any(c.isspace() or not c.isprintable() for c in url):
        raise TargetRefusedError(f"must be one line of at most {MAX_URL_LENGTH} printable characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetRefusedError("is not a valid URL") from exc
    if parts.scheme not in ("http", "https"):
        raise TargetRefusedError("only http and https URLs are allowed")
    if parts.username is not None or parts.password is not None:
        raise TargetRefusedError("must not carry credentials (the signature authenticates RelayOps)")
    if not parts.hostname:
        raise TargetRefusedError("names no host")
    return parts.scheme, parts.hostname.lower().rstrip("."), port or (443 if parts.scheme == "https" else 80)


def refusal(address: IPAddress, policy: Policy) -> str | None:
    """Why ``address`` may not be posted to under ``policy``, or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_unspecified or address.is_multicast:
        return "resolves to an unspecified or multicast address"
    if address in METADATA_ADDRESSES or address.is_link_local:
        if not policy.allow_link_local:
            return "resolves to a link-local or cloud metadata address (RELAYOPS_WEBHOOK_ALLOW_LINK_LOCAL allows it)"
        return None
    if address.is_reserved and not address.is_loopback:  # ::1 counts as reserved too
        return "resolves to a reserved address"
    if not address.is_global and not policy.allow_private:
        return "resolves to a loopback or private address (RELAYOPS_WEBHOOK_ALLOW_PRIVATE allows it)"
    return None


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UnresolvableHostError() from exc
    found: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def check(url: object, policy: Policy | None = None) -> Target:
    """The target ``url`` names, resolved and checked; TargetRefusedError saying why not."""
    policy = policy or Policy.from_settings()
    scheme, host, port = _parse(url)
    if host in METADATA_HOSTS and not policy.allow_link_local:
        raise TargetRefusedError("names a cloud metadata service (RELAYOPS_WEBHOOK_ALLOW_LINK_LOCAL allows it)")
    addresses = _resolve(host, port)
    if not addresses:
        raise UnresolvableHostError()
    for address in addresses:
        problem = refusal(address, policy)
        if problem:
            raise TargetRefusedError(problem)
    return Target(scheme=scheme, host=host, port=port, address=addresses[0])
