"""``synthetic_metrics``: documents through ingest (HTTP), drains, relay, review (decided by the command
after its delay); a table per document with each measure labelled measured or synthetic, and the depth
samples of the run with min and max. On PostgreSQL (the test database) and on the embedded SQLite."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from pipeline.models import Attempt, Job, Review, ReviewStatus
from tests.acceptance.conftest import ROOT
from tests.acceptance.test_demo import demo_env

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ROW = re.compile(r"^  (SYN-\d{14}-\d{2})\s+(\w+)\s+([\d.]+) s\s+([\d.]+) s\s+([\d.]+) s\s+([\d.]+) s\s+([\d.]+) s$")


def test_the_experiment_runs_on_the_real_pipeline_and_reports_each_measure_apart():
    out = io.StringIO()
    call_command("synthetic_metrics", "--documents", "5", "--review-delay", "0.5", "--interval", "0.05",
                 "--tenant", "synth", stdout=out)
    text = out.getvalue()
    assert "queue wait [measured]" in text and "inference [measured: rules]" in text
    assert "review wait [synthetic]" in text
    rows = {m.group(1): m for m in map(ROW.match, text.splitlines()) if m}
    assert len(rows) == 5
    jobs = Job.objects.filter(tenant="synth")
    assert jobs.count() == 5 and set(jobs.values_list("status", flat=True)) == {"succeeded"}
    for job in jobs:
        row = rows[job.document_id]
        attempt = Attempt.objects.get(job=job)
        review = Review.objects.get(job=job)
        assert review.status == ReviewStatus.APPROVED and review.decided_by.username == "synthetic-reviewer"
        assert float(row.group(3)) == pytest.approx(attempt.queue_wait_seconds, abs=0.0006)
        assert float(row.group(4)) == pytest.approx(attempt.inference_seconds, abs=0.0006)
        assert float(row.group(6)) == pytest.approx(review.review_wait_seconds, abs=0.0006)
        assert review.review_wait_seconds >= 0.5  # decided after the delay, not before
    depth = re.search(r"depth \(queued \+ leased\): min (\d+), max (\d+)", text)
    assert depth is not None and int(depth.group(1)) <= int(depth.group(2)) <= 5
    assert "queue depth samples over the run" in text


def test_bad_arguments_are_refused_before_anything_runs():
    with pytest.raises(CommandError, match="documents"):
        call_command("synthetic_metrics", "--documents", "0", stdout=io.StringIO())
    with pytest.raises(CommandError, match="tenant"):
        call_command("synthetic_metrics", "--tenant", "Not A Tenant", stdout=io.StringIO())
    assert Job.objects.count() == 0


def test_it_runs_on_the_embedded_sqlite(tmp_path):
    done = subprocess.run([sys.executable, "manage.py", "synthetic_metrics", "--documents", "3", "--review-delay", "0.2"],
                          cwd=ROOT, env=demo_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len([line for line in done.stdout.splitlines() if ROW.match(line)]) == 3
    assert "depth (queued + leased): min" in done.stdout
    # the dashboard, the running totals and /metrics read the same embedded database
    probe = ("import datetime as dt; from console import dashboard, metrics; from pipeline.clock import system_clock; "
             "from pipeline.maintenance.sampler import MetricSampler; from pipeline.maintenance.totals import TotalsFolder; "
             "now = system_clock.now(); MetricSampler().run_once(now); "
             "print('folded', TotalsFolder().run_once(now + dt.timedelta(minutes=3))); "
             "data = dashboard.build(now, '24h', None); "
             "print('throughput', data['series']['throughput']['succeeded'][-1][1] > 0); "
             "print('percentiles', sorted({r['measure'] for r in data['percentiles']})); "
             "print(metrics.exposition()[0].decode())")
    shell = subprocess.run([sys.executable, "manage.py", "shell", "-c", probe], cwd=ROOT, env=demo_env(tmp_path),
                           capture_output=True, text=True, timeout=120)
    assert shell.returncode == 0, shell.stderr
    assert "folded 5" in shell.stdout and "throughput True" in shell.stdout  # 3 attempt + 2 review measures, one tenant
    assert "'end_to_end', 'inference', 'queue_wait', 'review_wait'" in shell.stdout
    assert 'relayops_queue_wait_seconds_count{tenant="synthetic"} 3.0' in shell.stdout
    assert 'relayops_review_wait_seconds_count{tenant="synthetic"} 3.0' in shell.stdout
