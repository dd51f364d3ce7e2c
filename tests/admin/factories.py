"""Rows for admin and browser tests, made through the services (never by writing pipeline rows directly).

``dead_letter`` and ``succeeded`` run the worker once: make them before anything leaves a job queued
(a reprocess does), or the worker takes that job instead.
"""

from __future__ import annotations

import datetime as dt

from django.contrib.auth import get_user_model

from typing import Any

from dlq.models import AuditEntry, ReprocessRefusal
from pipeline.models import DeadLetter
from pipeline import queue, relay
from pipeline.clock import Clock, FrozenClock, system_clock
from pipeline.models import Attempt, Job, OutboxEvent, Result, Review
from pipeline.worker import process_once
from review.models import ReviewDecision
from tenancy.services import Role, create_member
from tests.conftest import invoice

PASSWORD = "correct-horse-battery"
UNREADABLE = {"text": "not an invoice at all"}  # the extractor refuses it: dead-lettered at once


def member(username: str, *tenants: str, auditor: bool = False):
    return create_member(
        username, tenants, role=Role.AUDITOR if auditor else Role.OPERATOR, password=PASSWORD
    ).user


def superuser(username: str = "root"):
    return get_user_model().objects.create_superuser(username, password=PASSWORD)


def ago(**delta: float) -> FrozenClock:
    """A clock standing that long before now: rows made with it are that old."""
    return FrozenClock(dt.datetime.now(dt.timezone.utc) - dt.timedelta(**delta))


def dead_letter(tenant: str, document_id: str, *, clock: Clock = system_clock) -> DeadLetter:
    job, _ = queue.enqueue(tenant, document_id, 1, UNREADABLE, clock=clock)
    outcome = process_once("w-test", clock=clock)
    assert (outcome.outcome, outcome.job_id) == ("dead_lettered", job.pk), "another job was claimable first"
    return DeadLetter.objects.select_related("job").get(job=job)


def succeeded(tenant: str, document_id: str, *, publish: bool = True, clock: Clock = system_clock) -> Job:
    """A committed job; published (so its review exists) unless ``publish`` is False."""
    job, _ = queue.enqueue(tenant, document_id, 1, invoice(), clock=clock)
    outcome = process_once("w-test", clock=clock)
    assert (outcome.outcome, outcome.job_id) == ("committed", job.pk), "another job was claimable first"
    if publish:
        relay.publish_pending(clock=clock)
    return Job.objects.get(pk=job.pk)


def queued(tenant: str, document_id: str, *, clock: Clock = system_clock) -> Job:
    return queue.enqueue(tenant, document_id, 1, invoice(), clock=clock)[0]


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of every pipeline, DLQ and review table, to assert that a refused request changed nothing."""
    models = (Job, Attempt, Result, OutboxEvent, Review, ReviewDecision, DeadLetter, AuditEntry, ReprocessRefusal)
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in models}
