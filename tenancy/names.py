"""What a tenant name is: lowercase, 2 to 33 characters, starting with a letter. Every key and scope uses it."""

from __future__ import annotations

import re

from relayops.errors import InvalidInputError

TENANT_RE = re.compile(r"^[a-z][a-z0-9-]{1,32}$")


def validate_tenant(tenant_id: object) -> str:
    if not isinstance(tenant_id, str) or not TENANT_RE.fullmatch(tenant_id):
        raise InvalidInputError("tenant_id", f"must match {TENANT_RE.pattern}, got {tenant_id!r}")
    return tenant_id
