"""A cluster process carries what it uses. The API framework is the web process's (qcluster's start-up
checks leave out the URLconf's, and ninja is no installed app); the webhook publisher's HTTP client and
cryptography load at its first delivery; the LLM extractor's client only when that extractor is chosen;
the admin's modules when its registry is first read (a web request, the checks, which qcluster runs in a
forked child). Each is megabytes of every forked worker's memory (docs/performance.md, "After: a worker's memory and
its log lines")."""

from __future__ import annotations

import pytest

from pipeline import queue
from tests.conftest import invoice
from tests.integration.test_processes import Child

pytestmark = pytest.mark.django_db(transaction=True)

ONLY_WHEN_USED = ["ninja", "httpx", "cryptography",
                  # the admin: every app's admin module, and what the admin site's pages import
                  "pipeline.admin", "dlq.admin", "controls.admin", "webhooks.admin", "tenancy.admin_base",
                  "console.dashboard", "review.views"]


def test_a_node_that_delivers_no_webhook_imports_neither_the_api_framework_nor_httpx_nor_cryptography_nor_the_admin():
    queue.enqueue("acme", "doc-1", 1, invoice(1))
    (report,) = Child("footprint", worker="footprint", libraries=ONLY_WHEN_USED).finish()
    assert (report["outcome"], report["published"]) == ("committed", 1)  # it did the whole path
    assert report["imported"] == []


def test_manage_py_qcluster_is_the_command_that_leaves_out_the_urlconf_checks():
    from django.core.management import get_commands

    assert get_commands()["qcluster"] == "pipeline"


def test_every_check_of_relayops_has_a_tag_that_qcluster_runs():
    """qcluster runs tagged checks only (all tags but the URLconf's): an untagged check of ours would
    silently never run at a node's start-up."""
    import sys
    from pathlib import Path

    from django.core.checks.registry import registry

    root = Path(__file__).resolve().parents[2]
    ours = [check for check in registry.get_checks(include_deployment_checks=True)
            if root in Path(sys.modules[check.__module__].__file__).resolve().parents
            and ".venv" not in Path(sys.modules[check.__module__].__file__).parts]
    assert len(ours) >= 8  # pipeline's, webhooks', console's
    untagged = [f"{check.__module__}.{check.__name__}" for check in ours if not set(check.tags) - {"urls"}]
    assert untagged == []
