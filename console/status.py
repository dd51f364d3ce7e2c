"""What ``relayops_status`` shows: per tenant, whether its intake is paused (and how long), queue depth by
status, how long the oldest due job has
waited, outbox lag and DLQ size by reason; per node, when its drains were last seen and made progress,
or when the node stopped."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Max, Min, Q

from pipeline.clock import seconds_since
from pipeline.models import CLAIMABLE_FROM, DeadLetter, DrainPresence, Job, OutboxEvent
from pipeline.states import JobStatus
from tenancy.models import Membership, TenantControl


@dataclass
class TenantStatus:
    tenant: str
    jobs: dict[str, int] = field(default_factory=dict)  # status -> count
    oldest_due_seconds: float | None = None  # the longest a claimable job has waited (Job.objects.claimable)
    outbox_pending: int = 0
    outbox_lag_seconds: float | None = None  # age of the oldest unpublished event
    dead_letters: dict[str, int] = field(default_factory=dict)  # reason -> count
    paused_seconds: float | None = None  # its intake is paused (its jobs are not due), this long


@dataclass(frozen=True)
class NodeStatus:
    node: str
    drains: int  # processes seen within the window and not gone
    last_seen_seconds: float
    last_progress_seconds: float | None
    stopped_seconds: float | None = None  # no live drain and its drains said they were gone this long ago


def tenants(now: dt.datetime, only: str | None = None) -> list[TenantStatus]:
    rows: dict[str, TenantStatus] = defaultdict(lambda: TenantStatus(""))
    jobs = Job.objects.filter(tenant=only) if only else Job.objects.all()
    for counted in jobs.values("tenant", "status").annotate(n=Count("pk")):
        rows[counted["tenant"]].jobs[counted["status"]] = counted["n"]
    for oldest in jobs.claimable(now).values("tenant").annotate(at=Min(CLAIMABLE_FROM)):
        rows[oldest["tenant"]].oldest_due_seconds = seconds_since(now, oldest["at"])
    events = OutboxEvent.objects.unpublished().filter(**({"tenant": only} if only else {}))
    for pending in events.values("tenant").annotate(n=Count("pk"), at=Min("created_at")):
        rows[pending["tenant"]].outbox_pending = pending["n"]
        rows[pending["tenant"]].outbox_lag_seconds = seconds_since(now, pending["at"])
    letters = DeadLetter.objects.filter(tenant=only) if only else DeadLetter.objects.all()
    for letter in letters.values("tenant", "reason_code").annotate(n=Count("pk")):
        rows[letter["tenant"]].dead_letters[letter["reason_code"]] = letter["n"]
    controls = TenantControl.objects.filter(intake_paused=True, **({"tenant": only} if only else {}))
    for tenant, paused_at in controls.values_list("tenant", "paused_at"):
        rows[tenant].paused_seconds = seconds_since(now, paused_at) or 0.0
    for name, status in rows.items():
        status.tenant = name
    return [rows[name] for name in sorted(rows)]


def nodes(now: dt.datetime, window: dt.timedelta) -> list[NodeStatus]:
    live = Q(seen_at__gte=now - window, gone_at__isnull=True)
    rows = DrainPresence.objects.values("node").annotate(
        drains=Count("pk", filter=live), seen=Max("seen_at"), progress=Max("progress_at"), gone=Max("gone_at"),
    )
    return [
        NodeStatus(row["node"], row["drains"], seconds_since(now, row["seen"]) or 0.0,
                   seconds_since(now, row["progress"]),
                   seconds_since(now, row["gone"]) if row["gone"] and not row["drains"] else None)
        for row in rows.order_by("node")
    ]


def known_tenant(tenant: str) -> bool:
    """A tenant is known once it has a job or a member."""
    return Job.objects.filter(tenant=tenant).exists() or Membership.objects.filter(tenant=tenant).exists()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def render(now: dt.datetime, rows: list[TenantStatus], drains: list[NodeStatus]) -> str:
    statuses = [str(s) for s in JobStatus]
    header = ["tenant", "intake", *statuses, "oldest due", "outbox pending", "outbox lag", "dlq by reason"]
    table = [header] + [
        [row.tenant, "open" if row.paused_seconds is None else f"paused {_seconds(row.paused_seconds)}",
         *(str(row.jobs.get(s, 0)) for s in statuses), _seconds(row.oldest_due_seconds),
         str(row.outbox_pending), _seconds(row.outbox_lag_seconds),
         ", ".join(f"{reason}={n}" for reason, n in sorted(row.dead_letters.items())) or "-"]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [f"RelayOps status at {now:%Y-%m-%d %H:%M:%S} UTC", ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    if not rows:
        lines.append("(no jobs yet)")
    lines += ["", "drains by node (live = seen in the last minute, not stopped):"]
    lines += [_node_line(d) for d in drains] or ["  (none yet)"]
    return "\n".join(lines)


def _node_line(d: NodeStatus) -> str:
    if d.stopped_seconds is not None:
        return f"  {d.node}: stopped {_seconds(d.stopped_seconds)} ago (its drains said so), 0 live"
    return (f"  {d.node}: {d.drains} live, last seen {_seconds(d.last_seen_seconds)} ago, "
            f"last progress {_seconds(d.last_progress_seconds)} ago")
