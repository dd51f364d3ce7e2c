"""The one writer of the audit: every operator decision is recorded here, inside the caller's transaction.

Call it in the same transaction as the change it records, so the decision and its record land together
or not at all. Never put document content or raw error text in ``reason`` or ``detail``: the audit list
is shown to auditors.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction

from dlq.models import AuditAction, AuditEntry
from pipeline.errors import InvalidInputError
from pipeline.models import DeadLetter, Job, Review

MAX_REASON = 500
MAX_DETAIL = 200


def operator_identity(operator: object) -> tuple[str, AbstractBaseUser | None]:
    """An operator is an authenticated user or a non-empty identity string (scripts, commands)."""
    if isinstance(operator, AbstractBaseUser) and operator.is_authenticated and operator.pk is not None:
        return operator.get_username(), operator
    if isinstance(operator, str) and operator.strip() and len(operator) <= 150 and operator.isprintable():
        return operator.strip(), None
    raise InvalidInputError("operator", "an operator identity (a user or a non-empty name) is required")


def check_reason(reason: object) -> str:
    """A reason as recorded: a string of at most MAX_REASON characters, stripped."""
    if not isinstance(reason, str) or len(reason) > MAX_REASON or "\x00" in reason:
        raise InvalidInputError("reason", f"must be a string of at most {MAX_REASON} characters")
    return reason.strip()


def record(
    action: AuditAction, *, at: datetime, tenant: str, operator: object, reason: str = "",
    job: Job | None = None, review: Review | None = None, event_id: uuid.UUID | None = None,
    dead_letter: DeadLetter | None = None, old_job: Job | None = None, new_job: Job | None = None,
    detail: str = "",
) -> AuditEntry:
    """Append one audit entry. Must run inside the transaction of the change it records."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("dlq.audit.record must run inside the transaction of the change it records")
    name, user = operator_identity(operator)
    reason = check_reason(reason)
    return AuditEntry.objects.create(
        at=at, action=AuditAction(action), tenant=tenant, operator=name,
        operator_user_id=user.pk if user is not None else None, reason=reason, job=job, review=review,
        event_id=event_id, dead_letter=dead_letter, old_job=old_job, new_job=new_job, detail=detail[:MAX_DETAIL],
    )
