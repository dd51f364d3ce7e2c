"""The hot path's cost, counted, and the claim served by the live-rows partial index.

Pinned figures (PostgreSQL, autocommit as in production):
  enqueue                    1 statement, 1 transaction (insert + NOTIFY); a key that exists: +1 lookup
  lease_next                 1 statement, 1 transaction (the claim, closing and opening attempts)
  commit_result_with_event   1 statement, 1 transaction (the function relayops_commit_result: complete,
                             close attempt, result, event, NOTIFY); with claim_next, still 1 and 1
                             (relayops_commit_and_claim), so a drain behind a backlog runs a job per
                             call (tests/integration/test_commit_and_claim.py); a drain's presence
                             and its earlier commits' times ride on it (also_write)
  a job meeting an idle drain 2 statements: its claim and its commit, nothing per second besides
                             (tests/integration/test_drain.py)
  publish_pending (n events) 2 statements: one claim with the review consumer's batch, one mark (+1 for
                             the webhook publisher's read of the batch's endpoints, when the claim says
                             a tenant of the batch has an active one)
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pipeline import queue, relay, sql
from pipeline.models import Attempt, ConsumedEvent, Job, OutboxEvent, Review
from pipeline.outbox import commit_result_with_event
from pipeline.states import JobStatus
from tests.conftest import invoice

FIELDS = {"invoice_number": "INV-1", "total": "1.00"}


CONTROL = {"BEGIN", "COMMIT", "ROLLBACK"}


def hot_path(queries) -> tuple[list[str], int]:
    """The statements run (their first three words) and the transactions they ran in. Django logs
    BEGIN and COMMIT; a statement outside them ran in autocommit, as its own transaction."""
    statements: list[str] = []
    transactions, open_block = 0, False
    for query in queries:
        text = query["sql"].strip()
        if text in CONTROL:
            open_block = text == "BEGIN"
            transactions += text == "COMMIT"
            continue
        statements.append(" ".join(text.split()[:3]))
        transactions += not open_block
    return statements, transactions


@pytest.mark.django_db(transaction=True)
def test_enqueue_is_one_statement_and_its_duplicate_one_more(clock):
    with CaptureQueriesContext(connection) as queries:
        job, created = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    assert created
    assert hot_path(queries) == (["WITH inserted AS"], 1)  # the insert and its NOTIFY, one statement
    assert "pg_notify" in queries[0]["sql"]

    with CaptureQueriesContext(connection) as queries:
        again, created = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    assert (again.pk, created) == (job.pk, False)
    statements, transactions = hot_path(queries)
    assert [s.split()[0] for s in statements] == ["WITH", "SELECT"] and transactions == 2  # + the lookup
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_statements_and_transactions_per_job_on_the_hot_path(clock):
    queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)

    with CaptureQueriesContext(connection) as queries:
        lease = queue.lease_next("w1", clock=clock)
    assert lease is not None
    assert hot_path(queries) == (["SELECT * FROM"], 1)  # relayops_claim: one round trip
    assert "relayops_claim" in queries[0]["sql"]

    with CaptureQueriesContext(connection) as queries:
        outcome = commit_result_with_event(lease, FIELDS, clock=clock)
    assert not outcome.deduped
    statements, transactions = hot_path(queries)
    assert statements == ["SELECT outcome, result_id,"]  # relayops_commit_result: one round trip
    assert transactions == 1  # result, event and completion commit together
    assert "relayops_commit_result" in queries[0]["sql"]


@pytest.mark.django_db(transaction=True)
def test_the_claim_says_whether_another_job_is_waiting(clock):
    for n in range(2):
        queue.enqueue("acme", f"inv-{n}", 1, invoice(n), clock=clock)
    Job.objects.create(**{**Job.objects.values().get(document_id="inv-1"), "id": None, "document_id": "later",
                          "idempotency_key": "acme:later:v1", "visible_at": clock.now() + dt.timedelta(hours=1)})
    first, second = queue.lease_next("w1", clock=clock), queue.lease_next("w1", clock=clock)
    assert (first.document_id, first.more_waiting) == ("inv-0", True)
    assert (second.document_id, second.more_waiting) == ("inv-1", False)  # a job not yet visible is not waiting


class ElsewherePublisher:
    """A publisher after the review consumer that does not say which events it wants: it gets them all,
    through the relay."""

    def publish(self, event) -> None:
        pass


@pytest.mark.django_db(transaction=True)
def test_a_job_meeting_an_idle_drain_costs_its_claim_and_its_commit(clock):
    """Its claim saw no other job: the commit hands its event to review, and reads when the drain is next
    due (here a retry backing off for 7 s), so the drain parks with no statement more; no relay pass, no
    empty claim. The next park, with no read before it, looks for itself."""
    from pipeline.runtime.drain import Drain, DrainReport

    queue.enqueue("acme", "later", 1, invoice(2), clock=clock)
    Job.objects.filter(document_id="later").update(visible_at=clock.now() + dt.timedelta(seconds=7))
    # Its monotonic clock stands still: the presence record of its first step stays fresh for the second.
    drain = Drain("node:1", max_seconds=5, poll_seconds=60, clock=clock, monotonic=lambda: 1000.0)
    assert drain._step(DrainReport()) is False  # its first step: nothing claimable, the outbox looked at
    queue.enqueue("acme", "now", 1, invoice(1), clock=clock)
    report = DrainReport()
    with CaptureQueriesContext(connection) as queries:
        assert drain._step(report) is False  # parks next
        assert drain._seconds_until_due(clock.now()) == 7.0
    work = [s.split()[:2] for s in hot_path(queries)[0] if "drainpresence" not in s]  # its presence: once a second
    assert work == [["SELECT", "*"], ["SELECT", "committed.*,"]]  # relayops_claim; relayops_commit_result with the read
    assert (report.jobs, report.published) == (1, 1)
    review = Review.objects.get()
    event = OutboxEvent.objects.get()
    assert (review.event_id, review.document_id, event.publish_attempts) == (event.event_id, "now", 1)
    assert event.published_at == event.created_at == review.created_at  # one transaction, one moment
    assert ConsumedEvent.objects.filter(event_id=event.event_id, consumer="review-handoff").count() == 1
    with CaptureQueriesContext(connection) as queries:
        assert drain._seconds_until_due(clock.now()) == 7.0
    assert len(queries) == 1


@pytest.mark.django_db(transaction=True)
def test_with_a_publisher_that_takes_every_event_the_relay_publishes_and_its_claim_reads_for_the_park(clock):
    """A publisher after the review consumer that does not say what it wants: the commit leaves the event
    to the relay, whose claim hands it to review and also reads when the drain is next due."""
    from pipeline.plugins import FanoutPublisher
    from pipeline.relay import ConsumerPublisher
    from pipeline.runtime.drain import Drain, DrainReport

    queue.enqueue("acme", "later", 1, invoice(2), clock=clock)
    Job.objects.filter(document_id="later").update(visible_at=clock.now() + dt.timedelta(seconds=7))
    drain = Drain("node:1", max_seconds=5, poll_seconds=60, clock=clock,
                  publisher=FanoutPublisher([ConsumerPublisher(clock), ElsewherePublisher()]), monotonic=lambda: 1000.0)
    assert drain._step(DrainReport()) is False  # its first step: nothing claimable, its presence recorded
    queue.enqueue("acme", "now", 1, invoice(1), clock=clock)
    report = DrainReport()
    with CaptureQueriesContext(connection) as queries:
        assert drain._step(report) is False
        assert drain._seconds_until_due(clock.now()) == 7.0
    work = [s.split()[:2] for s in hot_path(queries)[0]]
    assert work == [["SELECT", "*"], ["SELECT", "committed.*,"], ["WITH", "claimed"], ["UPDATE", '"pipeline_outboxevent"']]
    assert (report.jobs, report.published) == (1, 1) and Review.objects.count() == 1
    assert OutboxEvent.objects.get().publish_attempts == 1  # the relay's one claim


@pytest.mark.django_db(transaction=True)
def test_a_busy_drain_s_presence_rides_on_its_commit(clock):
    """Once a second a working drain records its presence: in its commit's statement, not one of its own;
    where the row is missing (pruned), the drain records it itself after the step."""
    from pipeline.models import DrainPresence
    from pipeline.runtime.drain import Drain, DrainReport

    drain = Drain("node:1", max_seconds=5, poll_seconds=60, clock=clock)
    assert drain._step(DrainReport()) is False  # its first step: presence recorded on its own
    seen = DrainPresence.objects.get(worker="node:1")
    assert seen.progress_at is None
    clock.advance(3)
    drain._presence_at -= 3  # its own monotonic clock moved on as well
    queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    with CaptureQueriesContext(connection) as queries:
        drain._step(DrainReport())
    statements = [q["sql"] for q in queries]
    assert not any(s.lstrip().startswith("UPDATE") and "drainpresence" in s for s in statements)
    assert [s.split()[:2] for s in statements if "relayops_commit_result" in s] == [["WITH", "written_0"]]
    seen.refresh_from_db()
    assert seen.seen_at == seen.progress_at == clock.now()

    DrainPresence.objects.all().delete()  # pruned: the commit's write finds no row, the drain makes one
    clock.advance(3)
    drain._presence_at -= 3
    queue.enqueue("acme", "inv-2", 1, invoice(2), clock=clock)
    drain._step(DrainReport())
    assert DrainPresence.objects.get(worker="node:1").progress_at == clock.now()


@pytest.mark.django_db(transaction=True)
def test_a_parked_drain_reads_when_it_is_next_due_in_one_statement(clock):
    from pipeline.runtime.drain import Drain

    queue.enqueue("acme", "later", 1, invoice(), clock=clock)
    Job.objects.update(visible_at=clock.now() + dt.timedelta(seconds=7))  # a retry backing off
    drain = Drain("node:1", max_seconds=5, poll_seconds=60, clock=clock)
    with CaptureQueriesContext(connection) as queries:
        assert drain._seconds_until_due(clock.now()) == 7.0
    statements, transactions = hot_path(queries)
    assert len(statements) == 1 and transactions == 1  # jobs queued and leased, outbox claimed and backing off


@pytest.mark.django_db(transaction=True)
def test_the_relay_claims_and_marks_once_per_batch(clock):
    for n in range(5):
        queue.enqueue("acme", f"inv-{n}", 1, invoice(n), clock=clock)
        commit_result_with_event(queue.lease_next("w1", clock=clock), FIELDS, clock=clock)
    with CaptureQueriesContext(connection) as queries:
        report = relay.publish_pending(batch_size=10, clock=clock)
    assert report.published == 5
    statements, transactions = hot_path(queries)
    assert statements == [
        "WITH claimed AS",  # the claim with the review consumer's whole batch (sql.CLAIM_EVENTS_AND_HAND_OFF)
        'UPDATE "pipeline_outboxevent" SET',  # the mark
    ]
    assert transactions == 2
    assert Review.objects.count() == ConsumedEvent.objects.count() == 5


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("endpoint", [False, True], ids=["no-endpoint", "an-endpoint"])
def test_the_default_publishers_cost_one_statement_more_per_batch_only_when_an_endpoint_is_active(clock, endpoint):
    """The review consumer and the webhook publisher (RELAYOPS_PUBLISHERS' default): the relay's claim
    says whether each event's tenant has an active endpoint; the webhook publisher reads the batch's
    endpoints once when one has (an event no endpoint wants costs nothing more), and not at all else."""
    from pipeline.plugins import configured_publisher
    from webhooks import services

    if endpoint:  # another topic: the endpoints are read, and the events go nowhere
        services.create_endpoint("acme", "http://127.0.0.1:9/hooks/in", ["review.decided"])
    for n in range(5):
        queue.enqueue("acme", f"inv-{n}", 1, invoice(n), clock=clock)
        commit_result_with_event(queue.lease_next("w1", clock=clock), FIELDS, clock=clock)
    with CaptureQueriesContext(connection) as queries:
        report = relay.publish_pending(batch_size=10, publisher=configured_publisher(), clock=clock)
    assert report.published == 5
    statements, transactions = hot_path(queries)
    expected = ["WITH", "SELECT", "UPDATE"] if endpoint else ["WITH", "UPDATE"]
    assert [s.split()[0] for s in statements] == expected and transactions == len(expected)


def plan_nodes(plan: dict) -> list[dict]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes.extend(plan_nodes(child))
    return nodes


def explain_claim(now: dt.datetime, *, claims: int = 1) -> list[dict]:
    """The plan nodes of the statements the claim function ran on the last of ``claims`` claims, as
    PostgreSQL ran them (auto_explain, nested statements: after five calls PL/pgSQL's plan cache may
    keep generic plans). In the test's transaction: the settings end with it."""
    notices: list[str] = []
    raw = connection.connection
    with connection.cursor() as cursor:
        cursor.execute("LOAD 'auto_explain'")
        for setting in ("auto_explain.log_min_duration = 0", "auto_explain.log_nested_statements = on",
                        "auto_explain.log_format = json", "client_min_messages = log"):
            cursor.execute(f"SET LOCAL {setting}")
        params = {"now": now, "worker": "w1", "lease_until": now + dt.timedelta(seconds=30)}
        def heard(diag) -> None:  # noqa: ANN001
            notices.append(diag.message_primary or "")

        raw.add_notice_handler(heard)
        try:
            for _ in range(claims):
                notices.clear()
                cursor.execute("SAVEPOINT claim")
                sql.claim_job(params)
                cursor.execute("ROLLBACK TO SAVEPOINT claim")
        finally:
            raw.remove_notice_handler(heard)
            cursor.execute("SET LOCAL client_min_messages = notice")
    plans = [json.loads(text.split("plan:", 1)[1]) for text in notices if "plan:" in text]
    nested = [plan["Plan"] for plan in plans if "relayops_claim" not in plan.get("Query Text", "")]
    assert nested, notices
    return [node for plan in nested for node in plan_nodes(plan)]


@pytest.mark.django_db
def test_the_claimable_index_holds_live_rows_only():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'job_claimable'")
        (definition,) = cursor.fetchone()
    assert definition.endswith("(visible_at, id) WHERE ((status)::text = ANY ((ARRAY['queued'::character varying, "
                               "'leased'::character varying])::text[]))"), definition


@pytest.mark.django_db
def test_the_claim_reads_live_rows_through_the_partial_index(clock):
    now = clock.now()
    done = dict(status=JobStatus.SUCCEEDED, payload={}, payload_hash="0" * 64, created_at=now, visible_at=now,
                deadline_at=now + dt.timedelta(hours=1), finished_at=now, attempt=1, fence=1)
    Job.objects.bulk_create(
        Job(tenant="acme", document_id=f"old-{n}", operation_version=1, idempotency_key=f"acme:old-{n}:v1", **done)
        for n in range(20_000)
    )
    for n in range(3):
        queue.enqueue("acme", f"live-{n}", 1, invoice(n), clock=clock)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pipeline_job")
    nodes = explain_claim(now)
    scans = [(node["Node Type"], node.get("Index Name")) for node in nodes
             if "Relation Name" in node and node["Relation Name"] != "tenancy_tenantcontrol"]
    assert ("Index Scan", "job_claimable") in scans, scans
    assert all(node_type != "Seq Scan" for node_type, _ in scans), scans


@pytest.mark.django_db
def test_the_paused_tenants_are_read_once_per_claim_through_their_partial_index(clock):
    """The control table holds one row per tenant: read once per scan of the claim (a hashed subplan:
    the claim's own, and its look for another waiting job), through the partial index of the paused ones
    once there are many tenants (an empty table is simply scanned)."""
    from tenancy.models import TenantControl

    now = clock.now()
    TenantControl.objects.bulk_create(TenantControl(tenant=f"t{n:05d}", updated_at=now) for n in range(20_000))
    TenantControl.objects.filter(tenant="t00007").update(intake_paused=True, paused_at=now)
    queue.enqueue("acme", "live", 1, invoice(), clock=clock)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tenancy_tenantcontrol")
    nodes = explain_claim(now)
    controls = [node for node in nodes if node.get("Relation Name") == "tenancy_tenantcontrol"]
    assert [node.get("Index Name") for node in controls] == ["tenantcontrol_paused"] * 2, controls
    assert all(node.get("Parent Relationship") != "Inner" for node in controls)  # not a per-row join


@pytest.mark.django_db
def test_the_partial_index_matches_the_claim_even_on_a_small_table(clock):
    queue.enqueue("acme", "live", 1, invoice(), clock=clock)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    scans = [node.get("Index Name") for node in explain_claim(clock.now()) if "Relation Name" in node]
    assert "job_claimable" in scans, scans


@pytest.mark.django_db
def test_the_claims_plans_stay_on_their_indexes_after_the_tables_grow_under_them(clock):
    """PL/pgSQL keeps the claim's plans for the connection, and after five calls may keep generic ones.
    Plans first made on near-empty tables still read through the indexes once the tables hold 20,000
    finished jobs and their attempts, and after an ANALYZE remade them: the claimable jobs' partial index, the
    primary key, and for the attempt a takeover closes its (job, fence) or the open attempts' partial index
    (the leases in flight)."""
    now = clock.now()
    queue.enqueue("acme", "head", 1, invoice(), clock=clock)
    lease = queue.lease_next("w0", clock=clock)
    Job.objects.filter(pk=lease.job_id).update(lease_until=now - dt.timedelta(seconds=1))  # expired: taken over
    explain_claim(now, claims=8)
    done = dict(status=JobStatus.SUCCEEDED, payload={}, payload_hash="0" * 64, created_at=now, visible_at=now,
                deadline_at=now + dt.timedelta(hours=1), finished_at=now, attempt=1, fence=1)
    old = Job.objects.bulk_create(
        Job(tenant="acme", document_id=f"old-{n}", operation_version=1, idempotency_key=f"acme:old-{n}:v1", **done)
        for n in range(20_000)
    )
    Attempt.objects.bulk_create(Attempt(job=job, tenant="acme", fence=1, attempt=1, worker="w0", leased_at=now,
                                        ended_at=now) for job in old)
    nodes = explain_claim(now, claims=8)  # the plans made before the tables grew, as they are used
    assert all(node["Node Type"] != "Seq Scan" for node in nodes if node.get("Relation Name") == "pipeline_job")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pipeline_job")  # autovacuum's: the plans are made again, on what it counted
        cursor.execute("ANALYZE pipeline_attempt")
    nodes = explain_claim(now, claims=8)
    scans = {(node["Relation Name"], node["Node Type"], node.get("Index Name")) for node in nodes
             if node.get("Relation Name") in ("pipeline_job", "pipeline_attempt")}
    assert ("pipeline_job", "Index Scan", "job_claimable") in scans, scans
    assert ("pipeline_job", "Index Scan", "pipeline_job_pkey") in scans, scans
    attempts = {name for relation, node_type, name in scans if relation == "pipeline_attempt" and name}
    assert attempts and attempts <= {"attempt_job_fence", "attempt_open"}, scans
    assert all(node_type != "Seq Scan" for _, node_type, _ in scans), scans


@pytest.mark.django_db
def test_the_claims_plans_read_through_indexes_in_a_deep_analyzed_backlog(clock):
    """Statistics that say most rows are claimable (a backlog, as a drain meets it) make a scan from the
    table's start look cheap for "is any job claimable": the claim's plans still read the claimable jobs
    in line order, through their partial index, so the look costs the same however many finished rows
    the table holds before the first claimable one."""
    now = clock.now()
    queued = dict(status=JobStatus.QUEUED, payload={}, payload_hash="0" * 64, created_at=now,
                  visible_at=now - dt.timedelta(seconds=1), deadline_at=now + dt.timedelta(hours=1))
    Job.objects.bulk_create(
        Job(tenant="acme", document_id=f"q-{n}", operation_version=1, idempotency_key=f"acme:q-{n}:v1", **queued)
        for n in range(3_000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pipeline_job")
    nodes = explain_claim(now, claims=8)
    scans = {(node["Node Type"], node.get("Index Name")) for node in nodes
             if node.get("Relation Name") == "pipeline_job"}
    assert ("Index Scan", "job_claimable") in scans, scans
    assert all(node_type != "Seq Scan" for node_type, _ in scans), scans


@pytest.mark.django_db(transaction=True)
def test_a_drain_records_its_commits_times_in_one_statement(clock):
    from pipeline.models import Attempt

    leases = []
    for n in range(3):
        queue.enqueue("acme", f"inv-{n}", 1, invoice(n), clock=clock)
        leases.append(queue.lease_next("w1", clock=clock))
        commit_result_with_event(leases[-1], FIELDS, clock=clock)
    with CaptureQueriesContext(connection) as queries:
        written = queue.record_commit_times([(lease.job_id, lease.fence, 0.001 * n) for n, lease in enumerate(leases)])
    assert written == 3 and hot_path(queries) == (['UPDATE pipeline_attempt SET'], 1)
    assert sorted(Attempt.objects.values_list("commit_seconds", flat=True)) == [0.0, 0.001, 0.002]


@pytest.mark.django_db(transaction=True)
def test_a_drain_s_commits_times_ride_on_its_next_commit(clock):
    """``queue.commit_times_write`` is the same write as literal SQL: a commit runs it in its own statement,
    and ``written`` says how many attempt rows it updated."""
    from pipeline.models import Attempt

    leases = []
    for n in range(3):
        queue.enqueue("acme", f"inv-{n}", 1, invoice(n), clock=clock)
        leases.append(queue.lease_next("w1", clock=clock))
    for lease in leases[:2]:
        commit_result_with_event(lease, FIELDS, clock=clock)
    times = [(lease.job_id, lease.fence, 0.25 * (n + 1)) for n, lease in enumerate(leases[:2])]
    write = queue.commit_times_write(times)
    assert write is not None and "%(" not in write  # literal: no parameter left to bind
    with CaptureQueriesContext(connection) as queries:
        outcome = commit_result_with_event(leases[2], FIELDS, clock=clock, also_write=(write,))
    statements, transactions = hot_path(queries)
    assert len(statements) == 1 and transactions == 1 and statements[0].startswith("WITH written_0")
    assert outcome.written == (2,)
    assert sorted(Attempt.objects.filter(commit_seconds__isnull=False).values_list("commit_seconds", flat=True)) == [
        0.25, 0.5]
    assert queue.commit_times_write([]) is None


@pytest.mark.django_db(transaction=True)
def test_a_drain_s_commits_times_wait_for_its_next_commit_not_a_step_without_a_job(clock):
    """Due after COMMIT_TIMES_SECONDS, the times ride on the drain's next commit; a step that runs no job
    (woken for a job another drain took) sends them alone only once no commit has carried them for as
    long again."""
    from pipeline.models import Attempt
    from pipeline.runtime.drain import COMMIT_TIMES_SECONDS, Drain, DrainReport

    now = [1000.0]
    drain = Drain("node:1", max_seconds=600, poll_seconds=60, clock=clock, monotonic=lambda: now[0])
    now[0] += 3 * COMMIT_TIMES_SECONDS  # idle since it started: the times' age starts with the first kept
    queue.enqueue("acme", "inv-1", 1, invoice(1), clock=clock)
    with CaptureQueriesContext(connection) as queries:
        drain._step(DrainReport())  # its first step runs the job: its time is kept
    assert not [q for q in queries if "commit_seconds" in q["sql"]]
    assert len(drain.commit_times) == 1 and not Attempt.objects.filter(commit_seconds__isnull=False).exists()

    now[0] += COMMIT_TIMES_SECONDS + 1  # due
    with CaptureQueriesContext(connection) as queries:
        drain._step(DrainReport())  # no job
    assert not [q for q in queries if "commit_seconds" in q["sql"]]

    queue.enqueue("acme", "inv-2", 1, invoice(2), clock=clock)
    with CaptureQueriesContext(connection) as queries:
        drain._step(DrainReport())
    statements, _ = hot_path(queries)
    assert len(statements) == 2 and "pipeline_attempt SET commit_seconds" in queries[-1]["sql"]  # claim, commit
    assert Attempt.objects.filter(commit_seconds__isnull=False).count() == 1 and len(drain.commit_times) == 1

    now[0] += 2 * COMMIT_TIMES_SECONDS  # no commit since: sent alone
    with CaptureQueriesContext(connection) as queries:
        drain._step(DrainReport())
    assert [q["sql"].split()[:4] for q in queries if "commit_seconds" in q["sql"]] == [
        ["UPDATE", "pipeline_attempt", "SET", "commit_seconds"]]
    assert Attempt.objects.filter(commit_seconds__isnull=False).count() == 2 and drain.commit_times == []


@pytest.mark.django_db(transaction=True)
def test_a_caller_s_writes_that_fail_to_build_cost_the_job_nothing(clock, caplog):
    """The writes a drain adds to a commit are its own bookkeeping: if building them fails, the job commits
    without them, uncharged."""
    from pipeline.processing import Outcome, process_once

    def broken() -> tuple[str, ...]:
        raise RuntimeError("no writes today")

    job, _ = queue.enqueue("acme", "inv-1", 1, invoice(), clock=clock)
    done = process_once("w1", clock=clock, also_write=broken)
    assert done.outcome == Outcome.COMMITTED and done.written is None
    job.refresh_from_db()
    assert (job.status, job.attempt) == (JobStatus.SUCCEEDED, 1)
    assert "job.commit_extras_not_built" in caplog.text
