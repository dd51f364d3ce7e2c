"""The durable state of the pipeline. Rows change only through the services in this package.

The questions every reader asks are answered once, here, as QuerySet methods: which jobs a worker
could claim now (``Job.objects.claimable``), which events a relay could claim now
(``OutboxEvent.objects.pending``) and which are still unpublished.
"""

from __future__ import annotations

import datetime as dt
import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from pipeline.reasons import DeadLetterReason, ErrorCode, ValidationRule
from pipeline.states import LIVE_STATUSES, JobStatus
from tenancy.models import TenantControl

MAX_PUBLISH_ATTEMPTS = 20  # claims (interrupted publications); then an event is parked, no longer claimed
DEFAULT_MAX_LEASE_EXPIRIES = 10  # crashes or stalls a job survives, apart from its own failures

# When a live job is (or will be) claimable: a leased job when its lease expires, a queued one at its
# visible_at. Readers that ask "since when has this been due" or "when is the next one due" use it.
CLAIMABLE_FROM = Coalesce("lease_until", "visible_at")


class JobQuerySet(models.QuerySet["Job"]):
    def live(self) -> "JobQuerySet":
        return self.filter(status__in=LIVE_STATUSES)

    def claimable(self, now: dt.datetime) -> "JobQuerySet":
        """Jobs a worker's claim takes at ``now``: queued, visible and with an attempt left; or leased
        with an expired lease and an expiry left (the takeover counts an expiry, not an attempt). One
        past its deadline is included: the claim cancels it. An expired lease with no expiry left is
        not: the lease rescuer dead-letters it. Nor is a job of a tenant whose intake is paused: it
        waits, deadline running, until the intake resumes. (``sql.CLAIMABLE`` says the same.)"""
        return self.live().filter(visible_at__lte=now).filter(
            Q(status=JobStatus.QUEUED, attempt__lt=F("max_attempts"))
            | Q(status=JobStatus.LEASED, lease_until__lte=now, lease_expiries__lt=F("max_lease_expiries"))
        ).unpaused()

    def unpaused(self) -> "JobQuerySet":
        """Jobs of tenants whose intake is not paused (``sql.PAUSED_TENANTS``)."""
        return self.exclude(tenant__in=TenantControl.objects.filter(intake_paused=True).values("tenant"))

    def waiting(self) -> "JobQuerySet":
        """Live jobs that will be claimable at some point (``CLAIMABLE_FROM`` says when)."""
        return self.live().filter(
            Q(status=JobStatus.QUEUED, attempt__lt=F("max_attempts"))
            | Q(status=JobStatus.LEASED, lease_expiries__lt=F("max_lease_expiries"))
        )


class Job(models.Model):
    """One unit of work on one tenant's document at one operation version."""

    tenant = models.CharField(max_length=33)
    document_id = models.CharField(max_length=255)
    operation_version = models.PositiveIntegerField()
    idempotency_key = models.CharField(max_length=300)  # unique: Meta (an exact match's index, no LIKE one)
    payload = models.JSONField()
    payload_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    # Counted at claim. A lease that expires (its worker died or stalled) is not the job's failure:
    # the takeover keeps the attempt number and counts a lease expiry instead, against its own budget.
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    lease_expiries = models.PositiveIntegerField(default=0)
    max_lease_expiries = models.PositiveIntegerField(default=DEFAULT_MAX_LEASE_EXPIRIES)
    # The four clocks. visible_at is the job's place in line: when it became (or becomes) claimable,
    # its enqueue time or a retry's backoff. A lease does not move it (lease_until hides a leased job
    # until it expires), so a job rescued from a dead worker is taken before newer work.
    created_at = models.DateTimeField()
    visible_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    leased_at = models.DateTimeField(null=True, blank=True)  # when the current or last lease began
    deadline_at = models.DateTimeField()
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    fence = models.BigIntegerField(default=0)  # grows on every lease; the lease's fencing token
    last_error_code = models.CharField(max_length=32, choices=ErrorCode.choices, blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)
    reprocessed_from = models.ForeignKey(  # indexed where set (Meta): most jobs are no reprocess
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="reprocessed_as", db_index=False
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="job_status_valid"),
            models.CheckConstraint(condition=Q(operation_version__gte=1), name="job_version_positive"),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="job_max_attempts_positive"),
            models.CheckConstraint(condition=Q(attempt__lte=F("max_attempts")), name="job_attempt_le_max"),
            models.CheckConstraint(
                condition=Q(max_lease_expiries__gte=1, lease_expiries__lte=F("max_lease_expiries")),
                name="job_lease_expiries_le_max",
            ),
            models.CheckConstraint(condition=Q(fence__gte=0), name="job_fence_nonnegative"),
            models.CheckConstraint(
                condition=~Q(status=JobStatus.LEASED)
                | (Q(lease_until__isnull=False) & ~Q(lease_owner="")),
                name="job_leased_has_lease",
            ),
            models.CheckConstraint(
                condition=Q(status__in=LIVE_STATUSES, finished_at__isnull=True)
                | (~Q(status__in=LIVE_STATUSES) & Q(finished_at__isnull=False)),
                name="job_finished_iff_terminal",
            ),
            models.UniqueConstraint(
                fields=["tenant", "document_id", "operation_version"], name="job_tenant_document_version"
            ),
            # The name PostgreSQL gave the column's UNIQUE: a unique field also got a varchar_pattern_ops
            # index, which no query used and every write of the row paid for.
            models.UniqueConstraint(fields=["idempotency_key"], name="pipeline_job_idempotency_key_key"),
        ]
        indexes = [
            # The claim query reads live rows only: millions of finished jobs cost it nothing.
            models.Index(
                fields=["visible_at", "id"], condition=Q(status__in=LIVE_STATUSES), name="job_claimable"
            ),
            # Leases by expiry, for the few leased rows: when the next one runs out, which ran out.
            models.Index(fields=["lease_until"], condition=Q(status=JobStatus.LEASED), name="job_leased_until"),
            models.Index(fields=["tenant", "status", "created_at"], name="job_tenant_status"),
            # Search by a document id or its start: an operator's (within tenants) and a superuser's.
            # varchar_pattern_ops makes the btree serve LIKE 'prefix%' whatever the collation.
            models.Index(fields=["tenant", "document_id"], name="job_tenant_document_prefix",
                         opclasses=["varchar_pattern_ops", "varchar_pattern_ops"]),
            models.Index(fields=["document_id"], name="job_document_prefix", opclasses=["varchar_pattern_ops"]),
            # Throughput: jobs finished in a window, by outcome (the sampler, the dashboard).
            models.Index(fields=["finished_at"], condition=Q(finished_at__isnull=False), name="job_finished_at"),
            models.Index(fields=["reprocessed_from"], condition=Q(reprocessed_from__isnull=False),
                         name="job_reprocessed_from"),
        ]

    def __str__(self) -> str:
        return self.idempotency_key

    def age_seconds(self, now: dt.datetime) -> float:
        """How long the job has existed (a live job's age); a finished one's ends at finished_at."""
        return max(((self.finished_at or now) - self.created_at).total_seconds(), 0.0)


class Attempt(models.Model):
    """One lease of a job: opened by the claim, closed by the queue with its outcome and, when the
    extractor ran, what it spent (the extraction report). Never content."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts",
                            db_index=False)  # attempt_job_fence (job, fence) serves it
    tenant = models.CharField(max_length=33, db_default="")  # the job's, so a tenant's window reads one index
    fence = models.BigIntegerField()
    attempt = models.PositiveIntegerField()
    worker = models.CharField(max_length=200)
    # When the job became claimable for this lease: its visible_at (enqueue, or a retry's backoff), or,
    # taking over an expired lease, when that lease ran out. Queue wait = leased_at - due_at.
    due_at = models.DateTimeField(null=True, blank=True)
    leased_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    error_code = models.CharField(max_length=32, choices=ErrorCode.choices, blank=True, default="")
    failed_rule = models.CharField(max_length=32, choices=ValidationRule.choices, blank=True, db_default="")
    # The extraction report: blank while the extractor has not run (or its attempt was cut short).
    extractor = models.CharField(max_length=200, blank=True, db_default="")  # "rules", "llm" or a dotted path
    model_name = models.CharField(max_length=200, blank=True, db_default="")
    prompt_hash = models.CharField(max_length=64, blank=True, db_default="")
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    inference_seconds = models.FloatField(null=True, blank=True)  # the extractor's own time, not queue or review
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    # How long the commit (result, event, completion: one transaction) took, as its worker measured it.
    commit_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "fence"], name="attempt_job_fence")]
        indexes = [
            # The dashboard's windows: attempts by the time they were leased, per tenant and for all; they
            # carry the measured columns, so a window is read from the index alone (PostgreSQL).
            models.Index(fields=["tenant", "leased_at"], name="attempt_tenant_leased",
                         include=["due_at", "inference_seconds", "commit_seconds"]),
            models.Index(fields=["leased_at"], name="attempt_leased",
                         include=["tenant", "due_at", "inference_seconds", "commit_seconds"]),
            # The running totals fold attempts once they ended, and /metrics adds those ended since.
            models.Index(fields=["ended_at"], condition=Q(ended_at__isnull=False), name="attempt_ended"),
            # The dashboard's wide windows add the attempts not ended yet (not folded) to the hourly histograms.
            models.Index(fields=["leased_at"], condition=Q(ended_at__isnull=True), name="attempt_open"),
        ]

    @property
    def queue_wait_seconds(self) -> float | None:
        return None if self.due_at is None else max((self.leased_at - self.due_at).total_seconds(), 0.0)


class Result(models.Model):
    """The one result of an idempotency key."""

    job = models.OneToOneField(Job, on_delete=models.PROTECT, related_name="result")
    tenant = models.CharField(max_length=33)
    idempotency_key = models.CharField(max_length=300)  # unique: Meta, as Job's
    payload_hash = models.CharField(max_length=64)
    data = models.JSONField()
    fence = models.BigIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["idempotency_key"], name="pipeline_result_idempotency_key_key")]
        indexes = [models.Index(fields=["tenant", "id"], name="result_tenant_id")]  # an operator's list

    def __str__(self) -> str:
        return self.idempotency_key


# An unpublished event the relay no longer claims (OutboxEvent.objects.parked).
PARKED = Q(parked_at__isnull=False) | Q(publish_attempts__gte=MAX_PUBLISH_ATTEMPTS)


class OutboxEventQuerySet(models.QuerySet["OutboxEvent"]):
    def unpublished(self) -> "OutboxEventQuerySet":
        """Events not yet published: claimed, waiting, backing off or parked."""
        return self.filter(published_at__isnull=True)

    def parked(self) -> "OutboxEventQuerySet":
        """Unpublished events the relay no longer claims on its own: their publishers failed
        ``RELAYOPS_OUTBOX_MAX_FAILURES`` times (``parked_at``), or their publication was interrupted
        ``MAX_PUBLISH_ATTEMPTS`` times. An operator redelivers them (``relay.redeliver``)."""
        return self.unpublished().filter(PARKED)

    def claimable(self) -> "OutboxEventQuerySet":
        """Unpublished events a relay may claim, now or once their claim or backoff ends: not parked."""
        return self.unpublished().filter(parked_at__isnull=True, publish_attempts__lt=MAX_PUBLISH_ATTEMPTS)

    def pending(self, now: dt.datetime) -> "OutboxEventQuerySet":
        """Events a relay's claim takes at ``now``: claimable, unclaimed or with an expired claim, and past
        their backoff. (``sql.CLAIM_EVENTS`` says the same.)"""
        return self.claimable().filter(
            Q(claimed_until__isnull=True) | Q(claimed_until__lt=now),
            Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now),
        )


class OutboxEvent(models.Model):
    """An event committed with its result, published later by the relay.

    ``publish_attempts`` counts claims; ``failures`` counts publications a publisher refused (a webhook
    answering non-2xx, a connection error), each followed by a backoff (``next_attempt_at``) and, at
    the last one, parking (``parked_at``). ``last_status`` is the HTTP status of the last failure,
    when there was one; ``last_failure`` its kind (a code, never a message or a response body).
    """

    event_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.CharField(max_length=33)
    topic = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=300)
    payload = models.JSONField()
    created_at = models.DateTimeField()
    published_at = models.DateTimeField(null=True, blank=True)
    publish_attempts = models.PositiveIntegerField(default=0)
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    failures = models.PositiveIntegerField(db_default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_failure = models.CharField(max_length=32, blank=True, db_default="")
    parked_at = models.DateTimeField(null=True, blank=True)

    objects = OutboxEventQuerySet.as_manager()

    class Meta:
        permissions = [("redeliver_outboxevent", "Can redeliver a parked outbox event")]
        constraints = [
            models.UniqueConstraint(fields=["topic", "idempotency_key"], name="outbox_one_event_per_key"),
        ]
        indexes = [
            models.Index(fields=["id"], condition=Q(published_at__isnull=True), name="outbox_pending"),
            # The relay's claim (sql.CLAIM_EVENTS): rows never failed, in id order ...
            models.Index(fields=["id"], condition=Q(published_at__isnull=True, parked_at__isnull=True,
                                                    next_attempt_at__isnull=True), name="outbox_fresh"),
            # ... and rows backing off, by when their backoff ends (also the drain's wake-up).
            models.Index(fields=["next_attempt_at"], condition=Q(published_at__isnull=True, parked_at__isnull=True,
                                                                 next_attempt_at__isnull=False), name="outbox_backoff"),
            models.Index(fields=["published_at"], condition=Q(published_at__isnull=False), name="outbox_published"),
            models.Index(fields=["tenant", "id"], name="outbox_tenant_id"),  # an operator's list
        ]

    def __str__(self) -> str:
        return f"{self.topic}:{self.idempotency_key}"

    @property
    def parked(self) -> bool:
        return self.published_at is None and (
            self.parked_at is not None or self.publish_attempts >= MAX_PUBLISH_ATTEMPTS
        )


class ReviewStatus(models.TextChoices):
    PENDING = "pending"  # handed off; an operator approves or rejects it
    APPROVED = "approved"  # terminal
    REJECTED = "rejected"  # terminal


class Review(models.Model):
    """The human-review handoff: one per idempotency key, created by the deduping consumer."""

    tenant = models.CharField(max_length=33)
    document_id = models.CharField(max_length=255)
    idempotency_key = models.CharField(max_length=300)  # unique: Meta, as Job's
    event_id = models.UUIDField(unique=True)
    job = models.ForeignKey(Job, on_delete=models.PROTECT, related_name="reviews")
    status = models.CharField(max_length=16, choices=ReviewStatus.choices, default=ReviewStatus.PENDING)
    created_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(  # indexed where set (Meta): a review is created undecided
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )

    class Meta:
        permissions = [("decide_review", "Can approve or reject a review")]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ReviewStatus.values), name="review_status_valid"),
            models.CheckConstraint(
                condition=Q(status=ReviewStatus.PENDING, decided_at__isnull=True)
                | (~Q(status=ReviewStatus.PENDING) & Q(decided_at__isnull=False)),
                name="review_decided_iff_decided_at",
            ),
            models.UniqueConstraint(fields=["idempotency_key"], name="pipeline_review_idempotency_key_key"),
        ]
        indexes = [
            models.Index(fields=["tenant", "status", "created_at"], name="review_tenant_status"),
            models.Index(fields=["tenant", "document_id"], name="review_tenant_document_prefix",
                         opclasses=["varchar_pattern_ops", "varchar_pattern_ops"]),
            models.Index(fields=["document_id"], name="review_document_prefix", opclasses=["varchar_pattern_ops"]),
            # Review wait over a window (decided reviews by decision time), per tenant and fleet-wide.
            models.Index(fields=["tenant", "decided_at"], condition=Q(decided_at__isnull=False),
                         name="review_tenant_decided"),
            models.Index(fields=["decided_at"], condition=Q(decided_at__isnull=False), name="review_decided"),
            models.Index(fields=["decided_by"], condition=Q(decided_by__isnull=False), name="review_decided_by"),
        ]

    @property
    def review_wait_seconds(self) -> float | None:
        """Handoff to decision; None while pending."""
        return None if self.decided_at is None else max((self.decided_at - self.created_at).total_seconds(), 0.0)

    def __str__(self) -> str:
        return self.idempotency_key


class ConsumedEvent(models.Model):
    """The deduping consumer's memory of the event ids it applied."""

    consumer = models.CharField(max_length=64)
    event_id = models.UUIDField()
    consumed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["consumer", "event_id"], name="consumed_once_per_consumer"),
        ]
        indexes = [models.Index(fields=["consumed_at"], name="consumed_at")]


class DrainPresence(models.Model):
    """A drain process's presence: when it last looked for work, and when it last did some.

    Written by the drains (pipeline.runtime.liveness), read by ``relayops_health`` and ``relayops_status``.
    """

    worker = models.CharField(max_length=200, unique=True)  # "node:pid", also the jobs' lease_owner
    node = models.CharField(max_length=100)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()
    progress_at = models.DateTimeField(null=True, blank=True)  # last job run or event published
    gone_at = models.DateTimeField(null=True, blank=True)  # the drain ended because its worker stopped

    class Meta:
        verbose_name_plural = "drain presences"
        indexes = [models.Index(fields=["node", "seen_at"], name="presence_node_seen")]

    def __str__(self) -> str:
        return self.worker


class SweepTurn(models.Model):
    """When a maintenance pass last ran: a drain takes the turn with one guarded UPDATE, so the
    fleet sweeps once per interval whichever node and worker does it (pipeline.maintenance.sweeper)."""

    name = models.CharField(max_length=64, unique=True)
    taken_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name


class QueueDepthSample(models.Model):
    """One tenant's queue depth at one instant, recorded each minute by the depth sampler."""

    sampled_at = models.DateTimeField()
    tenant = models.CharField(max_length=33)
    queued = models.PositiveIntegerField()
    leased = models.PositiveIntegerField()
    due = models.PositiveIntegerField()  # claimable now: visible and attempts left
    oldest_due_seconds = models.FloatField(null=True, blank=True)
    outbox_pending = models.PositiveIntegerField()

    class Meta:
        indexes = [
            models.Index(fields=["sampled_at"], name="depthsample_at"),
            models.Index(fields=["tenant", "sampled_at"], name="depthsample_tenant_at"),
        ]


class MeasureTotal(models.Model):
    """The running histogram of one measure (``pipeline.measures.Measure``) for one tenant: every
    observation settled up to the fold mark, added in by the sweeper (``maintenance.totals``). What
    ``/metrics`` exposes, plus the few rows settled since the mark."""

    measure = models.CharField(max_length=32)
    tenant = models.CharField(max_length=33)
    count = models.BigIntegerField(default=0)
    total = models.FloatField(default=0.0)
    buckets = models.JSONField(default=list)  # cumulative counts, one per bound of pipeline.measures.BOUNDS

    class Meta:
        constraints = [models.UniqueConstraint(fields=["measure", "tenant"], name="measuretotal_measure_tenant")]


class JobTotal(models.Model):
    """How many of one tenant's jobs ended in one terminal status (a job never leaves one, and jobs are
    never deleted), counted up to the job totals' fold mark by the sweeper (``maintenance.totals``):
    ``/metrics`` reads these plus the jobs finished since, instead of counting every job."""

    tenant = models.CharField(max_length=33)
    status = models.CharField(max_length=16)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "status"], name="jobtotal_tenant_status")]


class MeasureHour(models.Model):
    """One hour of one measure for one tenant, as a histogram (``pipeline.measures.bucket_sql``:
    log-spaced buckets, each value within ``RESOLUTION`` of its bucket's): the observations taken
    (``Group.at``) in that hour and settled up to the hourly fold mark, added in by the sweeper
    (``maintenance.totals``) and kept ``HOURLY_SPAN``. The dashboard's wide windows read their
    percentiles from these, plus the few rows not folded yet."""

    measure = models.CharField(max_length=32)
    tenant = models.CharField(max_length=33)
    hour = models.DateTimeField()  # the hour's start (UTC)
    counts = models.JSONField(default=dict)  # {bucket: count}, the buckets that hold any

    class Meta:
        constraints = [models.UniqueConstraint(fields=["measure", "tenant", "hour"], name="measurehour_key")]
        indexes = [models.Index(fields=["hour"], name="measurehour_hour")]


class Metric(models.TextChoices):
    """What a ``MetricSample`` measures; its ``label`` says which outcome, reason or node."""

    FINISHED_PER_MINUTE = "finished_per_minute"  # label: the outcome (succeeded, dead_lettered, cancelled)
    DEAD_LETTERS = "dead_letters"  # label: the reason; all dead letters of the tenant so far
    OUTBOX_LAG_SECONDS = "outbox_lag_seconds"  # age of the oldest unpublished event
    REPROCESS_REFUSALS = "reprocess_refusals"  # refusals since the previous sample
    DRAINS_ALIVE = "drains_alive"  # label: the node; tenant blank (drains serve every tenant)


class MetricSample(models.Model):
    """One measure at one instant, recorded each sweep by the metric sampler and pruned after the
    sample retention; the dashboard draws them over time. Never a document id, a key or content."""

    sampled_at = models.DateTimeField()
    metric = models.CharField(max_length=32, choices=Metric.choices)
    tenant = models.CharField(max_length=33, blank=True, default="")
    label = models.CharField(max_length=100, blank=True, default="")
    value = models.FloatField()

    class Meta:
        indexes = [
            # The dashboard's series read a window of one metric from the index alone (PostgreSQL).
            models.Index(fields=["metric", "sampled_at"], name="metricsample_metric_at_v",
                         include=["tenant", "label", "value"]),
            models.Index(fields=["tenant", "metric", "sampled_at"], name="metricsample_tenant_at_v",
                         include=["label", "value"]),
            models.Index(fields=["sampled_at"], name="metricsample_at"),
        ]


class MetricSlot(models.Model):
    """Twelve minutes (``maintenance.totals.SLOT``) of one sampled metric for one tenant and label: the
    sum, highest and lowest of its samples, rolled up by the sweeper once the slot is over, so the
    dashboard's wide windows read a slot instead of its twelve samples. Pruned with the samples."""

    metric = models.CharField(max_length=32, choices=Metric.choices)
    tenant = models.CharField(max_length=33, blank=True, default="")
    label = models.CharField(max_length=100, blank=True, default="")
    slot = models.DateTimeField()  # the slot's start (a multiple of 12 minutes since the epoch)
    total = models.FloatField()
    high = models.FloatField()
    low = models.FloatField()
    samples = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["metric", "tenant", "label", "slot"], name="metricslot_key")]
        indexes = [models.Index(fields=["metric", "slot"], name="metricslot_metric_slot",
                                include=["tenant", "label", "total", "high", "low"])]


class DeadLetter(models.Model):
    """A job that failed for good. Holds a reason code and the last error code, never error text.

    Written by pipeline.queue in the transaction that moves the job to ``dead_lettered``; the dlq app
    reprocesses it as a new version.
    """

    job = models.OneToOneField(Job, on_delete=models.PROTECT, related_name="dead_letter")
    tenant = models.CharField(max_length=33)
    reason_code = models.CharField(max_length=32, choices=DeadLetterReason.choices)
    error_code = models.CharField(max_length=32, choices=ErrorCode.choices, blank=True, default="")
    failed_rule = models.CharField(max_length=32, choices=ValidationRule.choices, blank=True, default="")
    attempts = models.PositiveIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(reason_code__in=DeadLetterReason.values), name="deadletter_reason_valid"),
        ]
        indexes = [models.Index(fields=["tenant", "created_at"], name="deadletter_tenant_created")]

    def __str__(self) -> str:
        return f"{self.job.idempotency_key} ({self.reason_code})"
