"""``manage.py ingest``: files and folders in, counts out, non-zero on conflicts or invalid files, and a
re-run that creates nothing."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from pipeline.extraction import synthetic
from pipeline.models import Job
from tests.acceptance.conftest import ROOT, database_url

pytestmark = pytest.mark.django_db


def folder(tmp_path: Path, count: int = 3) -> Path:
    inbox = tmp_path / "inbox"
    (inbox / "2026").mkdir(parents=True)
    for n in range(count):
        (inbox / "2026" / f"INV-{n}.txt").write_text(synthetic.valid(n).text)
    (inbox / ".hidden").write_text("skipped")
    return inbox


def ingest(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_folder_is_ingested_once_and_a_rerun_creates_nothing(tmp_path):
    inbox = folder(tmp_path)
    out, _ = ingest("--tenant", "acme", str(inbox))
    assert out.strip() == "created: 3, already present: 0, conflicting: 0, invalid: 0"
    assert sorted(Job.objects.values_list("idempotency_key", flat=True)) == [
        "acme:INV-0:v1", "acme:INV-1:v1", "acme:INV-2:v1"]
    before = list(Job.objects.values())
    out, _ = ingest("--tenant", "acme", str(inbox))
    assert out.strip() == "created: 0, already present: 3, conflicting: 0, invalid: 0"
    assert list(Job.objects.values()) == before


def test_prefix_and_version_make_the_document_id(tmp_path):
    file = tmp_path / "scan 7.txt"
    file.write_text(synthetic.valid(7).text)
    ingest("--tenant", "globex", "--id-prefix", "mail/", "--version", "2", str(file))
    job = Job.objects.get()
    assert (job.tenant, job.document_id, job.operation_version) == ("globex", "mail/scan 7", 2)
    assert job.payload == {"text": synthetic.valid(7).text, "metadata": {}}


def test_conflicts_and_invalid_files_are_counted_named_and_fail_the_command(tmp_path):
    inbox = folder(tmp_path, 2)
    ingest("--tenant", "acme", str(inbox))
    (inbox / "2026" / "INV-0.txt").write_text("changed since the first run")  # same id, other content
    (inbox / "empty.txt").write_text("  \n")
    (inbox / "latin1.txt").write_bytes("Caf\xe9".encode("latin-1"))
    (inbox / "bad\x01name.txt").write_text("INVOICE")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 conflicting and 3 invalid"):
        call_command("ingest", "--tenant", "acme", str(inbox), stdout=out, stderr=err)
    assert out.getvalue().strip() == "created: 0, already present: 1, conflicting: 1, invalid: 3"
    assert "acme:INV-0:v1 exists with other content" in err.getvalue()
    assert "content: must not be empty" in err.getvalue() and "not UTF-8" in err.getvalue()
    assert "document_id" in err.getvalue()
    assert Job.objects.count() == 2


def test_bad_arguments_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        ingest("--tenant", "acme", str(tmp_path / "missing"))
    with pytest.raises(CommandError, match="tenant_id"):
        ingest("--tenant", "Not A Tenant", str(folder(tmp_path)))
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_the_command_exits_non_zero_and_shows_a_progress_bar_on_a_terminal(tmp_path):
    inbox = folder(tmp_path, 2)
    (inbox / "empty.txt").write_text("")
    env = {"DJANGO_SETTINGS_MODULE": "relayops.settings_test", "DATABASE_URL": database_url(), "PATH": "/usr/bin:/bin",
           "LOG_LEVEL": "WARNING"}
    terminal, tty = pty.openpty()  # stderr is a terminal, as for a person typing the command
    try:
        run = subprocess.run([sys.executable, "manage.py", "ingest", "--tenant", "acme", str(inbox)], cwd=ROOT,
                             env=env, stdout=subprocess.PIPE, stderr=tty, text=True, timeout=120)
        os.close(tty)
        screen = b""
        while chunk := _read(terminal):
            screen += chunk
    finally:
        os.close(terminal)
    assert run.returncode == 1
    assert "created: 2, already present: 0, conflicting: 0, invalid: 1" in run.stdout
    text = screen.decode(errors="replace")
    assert "ingesting: 100%" in text and "3/3" in text, text  # tqdm's bar
    assert "empty.txt: invalid: content: must not be empty" in text


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the other end is closed: everything was read
        return b""
