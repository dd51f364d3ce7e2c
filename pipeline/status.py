"""What ``relayops_status`` shows: per tenant, queue depth by status, the oldest visible job's age,
outbox lag and DLQ size by reason; per node, its drains' last beat and progress."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Max, Min, Q

from pipeline.models import DrainBeat, Job, OutboxEvent
from pipeline.states import JobStatus


@dataclass
class TenantStatus:
    tenant: str
    jobs: dict[str, int] = field(default_factory=dict)  # status -> count
    oldest_visible_seconds: float | None = None  # the longest a claimable queued job has waited
    outbox_pending: int = 0
    outbox_lag_seconds: float | None = None  # age of the oldest unpublished event
    dead_letters: dict[str, int] = field(default_factory=dict)  # reason -> count


@dataclass(frozen=True)
class NodeStatus:
    node: str
    drains: int  # processes that beat within the window
    last_beat_seconds: float
    last_progress_seconds: float | None


def _age(now: dt.datetime, since: dt.datetime | None) -> float | None:
    return None if since is None else max((now - since).total_seconds(), 0.0)


def tenants(now: dt.datetime, only: str | None = None) -> list[TenantStatus]:
    from dlq.models import DeadLetter

    rows: dict[str, TenantStatus] = defaultdict(lambda: TenantStatus(""))
    jobs = Job.objects.filter(tenant=only) if only else Job.objects.all()
    for counted in jobs.values("tenant", "status").annotate(n=Count("pk")):
        rows[counted["tenant"]].jobs[counted["status"]] = counted["n"]
    visible = jobs.filter(status=JobStatus.QUEUED, visible_at__lte=now).values("tenant").annotate(at=Min("visible_at"))
    for oldest in visible:
        rows[oldest["tenant"]].oldest_visible_seconds = _age(now, oldest["at"])
    events = OutboxEvent.objects.filter(published_at__isnull=True, **({"tenant": only} if only else {}))
    for pending in events.values("tenant").annotate(n=Count("pk"), at=Min("created_at")):
        rows[pending["tenant"]].outbox_pending = pending["n"]
        rows[pending["tenant"]].outbox_lag_seconds = _age(now, pending["at"])
    letters = DeadLetter.objects.filter(tenant=only) if only else DeadLetter.objects.all()
    for letter in letters.values("tenant", "reason_code").annotate(n=Count("pk")):
        rows[letter["tenant"]].dead_letters[letter["reason_code"]] = letter["n"]
    for name, status in rows.items():
        status.tenant = name
    return [rows[name] for name in sorted(rows)]


def nodes(now: dt.datetime, window: dt.timedelta) -> list[NodeStatus]:
    recent = Q(beat_at__gte=now - window)
    rows = DrainBeat.objects.values("node").annotate(
        drains=Count("pk", filter=recent), beat=Max("beat_at"), progress=Max("progress_at")
    )
    return [
        NodeStatus(row["node"], row["drains"], _age(now, row["beat"]) or 0.0, _age(now, row["progress"]))
        for row in rows.order_by("node")
    ]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def render(now: dt.datetime, rows: list[TenantStatus], drains: list[NodeStatus]) -> str:
    statuses = [str(s) for s in JobStatus]
    header = ["tenant", *statuses, "oldest visible", "outbox pending", "outbox lag", "dlq by reason"]
    table = [header] + [
        [row.tenant, *(str(row.jobs.get(s, 0)) for s in statuses), _seconds(row.oldest_visible_seconds),
         str(row.outbox_pending), _seconds(row.outbox_lag_seconds),
         ", ".join(f"{reason}={n}" for reason, n in sorted(row.dead_letters.items())) or "-"]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [f"RelayOps status at {now:%Y-%m-%d %H:%M:%S} UTC", ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    if not rows:
        lines.append("(no jobs yet)")
    lines += ["", "drains by node (live = beat in the last minute):"]
    lines += [f"  {d.node}: {d.drains} live, last beat {_seconds(d.last_beat_seconds)} ago, "
              f"last progress {_seconds(d.last_progress_seconds)} ago" for d in drains] or ["  (none yet)"]
    return "\n".join(lines)
