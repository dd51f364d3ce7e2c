"""A document's history, in time order: versions, leases, crashes, commits, events, reviews, the DLQ.

Built from the rows themselves (one query per table, whatever the history's length). It never reads
document content, payloads or result data: only what happened, when, and who decided.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, replace

from django.db.models import Q

from dlq.models import AuditAction, AuditEntry, ReprocessRefusal
from pipeline.models import Attempt, DeadLetter, Job, OutboxEvent, Result, Review, ReviewStatus
from pipeline.outbox import RESULT_TOPIC, REVIEW_DECIDED_TOPIC
from pipeline.reasons import ErrorCode
from pipeline.states import JobStatus
from relayops.formatting import counted, format_duration


class EntryKind(enum.StrEnum):
    """What a timeline entry records. Their order is the causal order of same-instant entries of one
    version; a lease and its end share a place and go by fence, so a takeover shows the old lease
    expiring before the new one starts."""

    ENQUEUED = "enqueued"
    LEASED = "leased"
    ATTEMPT_ENDED = "attempt_ended"
    COMMITTED = "committed"
    EVENT = "event"
    FINISHED = "finished"
    DEAD_LETTERED = "dead_lettered"
    PUBLISHED = "published"
    HANDED_OFF = "handed_off"
    DECIDED = "decided"
    REFUSED = "refused"
    REPROCESSED = "reprocessed"
    AUDITED = "audited"  # any other operator decision on the record (a review decision, a live-job action)


REVIEW_DECISIONS: dict[str, str] = {
    AuditAction.APPROVE: "Review approved", AuditAction.REJECT: "Review rejected",
    AuditAction.CORRECT: "Review corrected and approved",
}

_PLACE = {kind: place for place, kind in enumerate(EntryKind)}
_PLACE[EntryKind.ATTEMPT_ENDED] = _PLACE[EntryKind.LEASED]


@dataclass(frozen=True)
class Entry:
    at: dt.datetime
    kind: EntryKind
    version: int
    title: str
    detail: str = ""
    warning: bool = False  # a crash, a failure, a refusal: what an auditor looks for
    link: str = ""  # an admin URL name (e.g. "admin:pipeline_job_change") ...
    link_pk: int | None = None  # ... and the object it points at
    fence: int = 0  # leases and their ends only

    @property
    def sort_key(self) -> tuple[dt.datetime, int, int, int, bool]:
        return (self.at, self.version, _PLACE[self.kind], self.fence, self.kind == EntryKind.ATTEMPT_ENDED)


@dataclass(frozen=True)
class DocumentTimeline:
    tenant: str
    document_id: str
    versions: list[Job]  # oldest version first; payloads deferred
    entries: list[Entry]

    @property
    def origins(self) -> list[tuple[Job, Job | None]]:
        """Each version with the version it reprocessed (None for the first)."""
        by_id = {job.pk: job for job in self.versions}
        return [(job, by_id.get(job.reprocessed_from_id or 0)) for job in self.versions]


def _job_entries(job: Job) -> list[Entry]:
    v = job.operation_version
    origin = f"reprocess of v{v - 1}" if job.reprocessed_from_id else "new document"
    entries = [Entry(job.created_at, EntryKind.ENQUEUED, v, f"Version {v} enqueued",
                     f"{origin}; up to {job.max_attempts} attempts", link="admin:pipeline_job_change", link_pk=job.pk)]
    if job.finished_at and job.status == JobStatus.SUCCEEDED:
        after = f"after {counted(job.attempt, 'attempt')}"
        entries.append(Entry(job.finished_at, EntryKind.FINISHED, v, "Succeeded", after))
    elif job.finished_at and job.status == JobStatus.CANCELLED:
        entries.append(Entry(job.finished_at, EntryKind.FINISHED, v, "Cancelled", job.last_error_code, warning=True))
    return entries


def spend_of(attempt: Attempt) -> str:
    """What an attempt's extraction spent, as a detail suffix ("" when the extractor did not run)."""
    if not attempt.extractor:
        return ""
    parts = [attempt.extractor + (f" ({attempt.model_name})" if attempt.model_name else "")]
    if attempt.input_tokens is not None or attempt.output_tokens is not None:
        parts.append(f"{attempt.input_tokens or 0} in / {attempt.output_tokens or 0} out tokens")
    if attempt.inference_seconds is not None:
        parts.append(f"inference {attempt.inference_seconds:.3f} s")
    if attempt.cost is not None:
        parts.append(f"cost {attempt.cost}")
    return "; " + ", ".join(parts)


def _attempt_entries(attempt: Attempt, job: Job) -> list[Entry]:
    v = job.operation_version
    detail = f"attempt {attempt.attempt} of {job.max_attempts}, fence {attempt.fence}, worker {attempt.worker}"
    if attempt.ended_at is None and job.status == JobStatus.LEASED and job.fence == attempt.fence:
        detail += f"; lease held until {job.lease_until:%Y-%m-%d %H:%M:%S}"
    entries = [Entry(attempt.leased_at, EntryKind.LEASED, v, f"Leased (fence {attempt.fence})", detail, fence=attempt.fence)]
    if attempt.ended_at is None:
        return entries
    code = attempt.error_code
    if not code and job.status == JobStatus.SUCCEEDED and job.fence == attempt.fence:
        if attempt.extractor:  # the commit ended it ("Succeeded" says so); what it spent goes with the lease
            entries[0] = replace(entries[0], detail=entries[0].detail + spend_of(attempt))
        return entries
    if code == ErrorCode.LEASE_EXPIRED:
        title, note = "Lease expired: worker crashed or stalled", "no heartbeat before the lease ran out"
    elif code == ErrorCode.SHUTDOWN:
        title, note = "Released on shutdown", "the attempt is not counted"
    else:
        rule = f" (rule {attempt.failed_rule})" if attempt.failed_rule else ""
        title, note = f"Attempt failed: {code or 'unclassified'}{rule}", ""
    detail = f"attempt {attempt.attempt}, fence {attempt.fence}" + (f"; {note}" if note else "") + spend_of(attempt)
    entries.append(Entry(attempt.ended_at, EntryKind.ATTEMPT_ENDED, v, title, detail, warning=code != ErrorCode.SHUTDOWN,
                         fence=attempt.fence))
    return entries


def _outcome_entries(
    jobs: list[Job], results: list[Result], events: list[OutboxEvent], reviews: list[Review], audits: list[AuditEntry],
) -> list[Entry]:
    versions = {j.pk: j.operation_version for j in jobs}
    by_key = {j.idempotency_key: j.operation_version for j in jobs}
    entries = [
        Entry(r.created_at, EntryKind.COMMITTED, versions[r.job_id], "Result committed", f"with fence {r.fence}")
        for r in results
    ]
    for e in events:
        v = by_key.get(e.idempotency_key, 0)
        entries.append(Entry(e.created_at, EntryKind.EVENT, v, "Event written to the outbox", f"{e.topic}, event {e.event_id}"))
        if e.published_at:
            entries.append(Entry(e.published_at, EntryKind.PUBLISHED, v, "Event published",
                                 f"after {counted(e.publish_attempts, 'publish attempt')}"))
        elif e.parked_at:
            status = f", last HTTP {e.last_status}" if e.last_status else ""
            entries.append(Entry(e.parked_at, EntryKind.PUBLISHED, v, "Event parked",
                                 f"after {counted(e.failures, 'failed publication')} (last: {e.last_failure}{status})",
                                 warning=True))
    recorded = {a.review_id: a for a in audits if _decision_of_review(a)}
    for r in reviews:
        v = versions[r.job_id]
        entries.append(Entry(r.created_at, EntryKind.HANDED_OFF, v, "Handed off for review",
                             link="admin:pipeline_review_change", link_pk=r.pk))
        if r.decided_at and r.status != ReviewStatus.PENDING:
            entries.append(_decided(r, r.decided_at, recorded.get(r.pk)))
    return entries


def _decision_of_review(entry: AuditEntry) -> bool:
    return entry.review_id is not None and entry.action in REVIEW_DECISIONS


def _decided(review: Review, decided_at: dt.datetime, audited: AuditEntry | None) -> Entry:
    """A review's decision: who and after how long; with its audit entry, which decision and why (the
    names of corrected fields, never their values)."""
    wait = f"waited {format_duration(decided_at - review.created_at)} from handoff"
    if audited is None:  # decided before decisions were audited
        who = review.decided_by.get_username() if review.decided_by else "unknown"
        return Entry(decided_at, EntryKind.DECIDED, review.job.operation_version,
                     f"Review {review.status} by {who}", wait, link="admin:pipeline_review_change", link_pk=review.pk)
    parts = [wait, f"reason: {audited.reason}" if audited.reason else "no reason given"]
    parts += [audited.detail] if audited.detail else []
    return Entry(decided_at, EntryKind.DECIDED, review.job.operation_version,
                 f"{REVIEW_DECISIONS[audited.action]} by {audited.operator}", "; ".join(parts),
                 link="admin:dlq_auditentry_change", link_pk=audited.pk)


def _dlq_entries(
    versions: dict[int, int], dead: list[DeadLetter], audits: list[AuditEntry], refusals: list[ReprocessRefusal]
) -> list[Entry]:
    entries = [
        Entry(d.created_at, EntryKind.DEAD_LETTERED, versions[d.job_id], f"Dead-lettered: {d.reason_code}",
              f"last error {d.error_code or 'none'}, after {counted(d.attempts, 'attempt')}", warning=True,
              link="admin:pipeline_deadletter_change", link_pk=d.pk)
        for d in dead
    ]
    for a in audits:
        because = f"reason: {a.reason}" if a.reason else "no reason given"
        if a.action == AuditAction.REPROCESS and a.old_job_id is not None:
            entries.append(Entry(a.at, EntryKind.REPROCESSED, versions[a.old_job_id],
                                 f"Reprocessed by {a.operator} as version {versions.get(a.new_job_id or 0, '?')}", because,
                                 link="admin:dlq_auditentry_change", link_pk=a.pk))
        elif a.job_id in versions and not _decision_of_review(a):  # a review's decision is on its DECIDED entry
            entries.append(Entry(a.at, EntryKind.AUDITED, versions[a.job_id],
                                 f"{a.get_action_display()} by {a.operator}", because,
                                 link="admin:dlq_auditentry_change", link_pk=a.pk))
    job_of = {d.pk: d.job_id for d in dead}
    for f in refusals:
        entries.append(Entry(f.at, EntryKind.REFUSED, versions[job_of[f.dead_letter_id]],
                             f"Reprocess by {f.operator} refused: tenant rate limit",
                             f"retry possible after {f.retry_after_seconds} s", warning=True))
    return entries


def document_timeline(tenant: str, document_id: str) -> DocumentTimeline:
    """Everything that happened to ``tenant``'s ``document_id``, oldest first (nine queries)."""
    jobs = list(Job.objects.filter(tenant=tenant, document_id=document_id).defer("payload").order_by("operation_version"))
    ids = [j.pk for j in jobs]
    versions = {j.pk: j.operation_version for j in jobs}
    by_id = {j.pk: j for j in jobs}
    entries = [e for j in jobs for e in _job_entries(j)]
    for attempt in Attempt.objects.filter(job_id__in=ids).order_by("leased_at", "fence"):
        entries += _attempt_entries(attempt, by_id[attempt.job_id])
    results = list(Result.objects.filter(job_id__in=ids).defer("data"))
    events = list(OutboxEvent.objects.filter(topic__in=[RESULT_TOPIC, REVIEW_DECIDED_TOPIC],
                                             idempotency_key__in=[j.idempotency_key for j in jobs])
                  .defer("payload"))
    reviews = list(Review.objects.filter(job_id__in=ids).select_related("decided_by"))
    for review in reviews:
        review.job = by_id[review.job_id]
    audits = list(AuditEntry.objects.filter(Q(old_job_id__in=ids) | Q(job_id__in=ids)))
    entries += _outcome_entries(jobs, results, events, reviews, audits)
    dead = list(DeadLetter.objects.filter(job_id__in=ids))
    refusals = list(ReprocessRefusal.objects.filter(dead_letter__job_id__in=ids))
    entries += _dlq_entries(versions, dead, audits, refusals)
    entries.sort(key=lambda e: e.sort_key)
    return DocumentTimeline(tenant=tenant, document_id=document_id, versions=jobs, entries=entries)

