"""Run on its own by test_parallel_runs.py (not collected with the suite): it records the name of its test
database in the file named by RELAYOPS_PROBE_OUT, then runs one job end to end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.db import connection

from pipeline import queue
from pipeline.worker import process_once
from tests.conftest import invoice

pytestmark = pytest.mark.django_db


def test_probe(clock):
    Path(os.environ["RELAYOPS_PROBE_OUT"]).write_text(connection.settings_dict["NAME"])
    queue.enqueue("acme", "doc-1", 1, invoice(), clock=clock)
    assert process_once("w1", clock=clock).outcome == "committed"
