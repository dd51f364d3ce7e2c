"""The state machine and the error hierarchy: guards on the conventions, no database."""

from __future__ import annotations

import pytest

from pipeline.errors import (
    IdempotencyConflictError, InvalidInputError, NotReprocessableError, RelayOpsError, StaleLeaseError,
)
from pipeline.models import Job
from pipeline.states import LIVE_STATUSES, TERMINAL_STATUSES, TRANSITIONS, JobStatus, sources_of


def test_every_status_has_a_row_in_the_transition_table():
    assert set(TRANSITIONS) == set(JobStatus)
    assert all(targets <= set(JobStatus) for targets in TRANSITIONS.values())


def test_live_and_terminal_statuses_partition_the_states():
    assert set(LIVE_STATUSES) | set(TERMINAL_STATUSES) == set(JobStatus)
    assert not set(LIVE_STATUSES) & set(TERMINAL_STATUSES)


@pytest.mark.parametrize("status", TERMINAL_STATUSES)
def test_terminal_states_have_no_way_out(status):
    assert TRANSITIONS[status] == frozenset()
    assert not any(status in sources_of(target) for target in JobStatus)


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ("queued", "leased", True),
        ("queued", "cancelled", True),  # deadline passed before a claim
        ("queued", "succeeded", False),  # only a lease holder completes
        ("queued", "dead_lettered", False),
        ("leased", "leased", True),  # takeover of an expired lease
        ("leased", "queued", True),
        ("leased", "succeeded", True),
        ("leased", "dead_lettered", True),
        ("leased", "cancelled", True),
        ("cancelled", "queued", False),  # cancellation is terminal; no DLQ path
        ("dead_lettered", "queued", False),  # reprocess makes a new job, never revives
        ("succeeded", "leased", False),
    ],
)
def test_transitions(old, new, allowed):
    assert (JobStatus(new) in TRANSITIONS[JobStatus(old)]) is allowed
    assert (old in sources_of(JobStatus(new))) is allowed


def test_sources_are_the_guards_of_each_transition():
    assert sources_of(JobStatus.SUCCEEDED) == ["leased"]
    assert sources_of(JobStatus.DEAD_LETTERED) == ["leased"]
    assert sorted(sources_of(JobStatus.CANCELLED)) == ["leased", "queued"]
    assert sorted(sources_of(JobStatus.LEASED)) == ["leased", "queued"]


def test_database_check_constraint_allows_exactly_the_states():
    check = next(c for c in Job._meta.constraints if c.name == "job_status_valid")
    ((lookup, values),) = check.condition.children
    assert lookup == "status__in" and sorted(values) == sorted(JobStatus.values)


def test_errors_default_to_their_docstring_and_carry_structured_fields():
    assert str(RelayOpsError()) == "A RelayOps operation failed."
    assert str(NotReprocessableError()) == "This dead letter cannot be reprocessed."
    stale = StaleLeaseError(12, 3)
    assert (stale.job_id, stale.fence) == (12, 3) and "fence 3" in str(stale)
    assert IdempotencyConflictError("acme:d:v1").key == "acme:d:v1"
    invalid = InvalidInputError("lease_seconds", "must be positive")
    assert isinstance(invalid, ValueError) and isinstance(invalid, RelayOpsError)
    assert invalid.field == "lease_seconds" and str(invalid) == "lease_seconds: must be positive"
