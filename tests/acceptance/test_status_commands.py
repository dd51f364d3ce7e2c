"""relayops_status and relayops_health as an operator runs them: a node that stops cleanly shows as
stopped at once (its drains say they are gone), ``--watch`` into a pipe holds no terminal codes, and an
unknown tenant is an error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from pipeline import queue
from pipeline.models import DrainPresence
from tests.acceptance.conftest import ROOT, cluster_env
from tests.conftest import invoice
from tests.waiting import wait_for

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def command(*args: str, node: str = "probe") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=cluster_env(node, LOG_LEVEL="WARNING"),
                          capture_output=True, text=True, timeout=60)


def test_a_cleanly_stopped_node_is_shown_stopped_and_unhealthy_as_soon_as_it_exits(start_cluster):
    cluster = start_cluster()
    assert command("relayops_health", "--node", cluster.node).returncode == 0
    running = command("relayops_status").stdout
    assert f"{cluster.node}: 2 live" in running

    assert cluster.stop() == 0
    gone = DrainPresence.objects.filter(node=cluster.node)
    assert gone.exists() and not gone.filter(gone_at__isnull=True).exists()  # each worker said so on its way out
    health = command("relayops_health", "--node", cluster.node)
    assert health.returncode == 1
    assert f"unhealthy: node {cluster.node} stopped" in health.stderr and "its drains said so" in health.stderr
    status = command("relayops_status").stdout
    assert f"{cluster.node}: stopped" in status and f"{cluster.node}: 2 live" not in status


def test_watch_into_a_pipe_writes_plain_frames_and_stops_on_ctrl_c():
    queue.enqueue("acme", "doc-1", 1, invoice(1))
    watcher = subprocess.Popen([sys.executable, "manage.py", "relayops_status", "--watch", "0.2"], cwd=ROOT,
                               env=cluster_env("probe", LOG_LEVEL="WARNING"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    frames: list[str] = []
    try:
        assert watcher.stdout is not None
        while len(frames) < 3:
            line = watcher.stdout.readline()
            assert line, watcher.stderr.read() if watcher.stderr else "no output"
            if line.startswith("RelayOps status at"):
                frames.append(line)
    finally:
        watcher.send_signal(signal.SIGINT)
        out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    assert "\x1b" not in "".join(frames) + out  # no escape sequence of any kind
    assert "acme" in out or len(frames) == 3


def test_an_unknown_tenant_is_an_error():
    queue.enqueue("acme", "doc-1", 1, invoice(1))
    unknown = command("relayops_status", "--tenant", "nosuch")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "CommandError: unknown tenant 'nosuch': no job and no member has it"
    known = command("relayops_status", "--tenant", "acme")
    assert known.returncode == 0 and "acme" in known.stdout


def test_run_help_lists_the_relayops_commands():
    shown = subprocess.run(["./run", "help"], cwd=ROOT, capture_output=True, text=True, timeout=30,
                           env={k: v for k, v in os.environ.items() if k != "SECRET_KEY"})
    assert shown.returncode == 0
    for name in ("qcluster", "relayops_status", "relayops_health", "create_operator", "relayops_demo", "--add-tenant"):
        assert name in shown.stdout, name
