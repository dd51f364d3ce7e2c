"""A cluster process carries what it uses: the webhook publisher's HTTP client and cryptography load at
its first delivery, the LLM extractor's client only when that extractor is chosen. Each is megabytes of
every worker's memory (docs/performance.md, "A worker's memory")."""

from __future__ import annotations

import pytest

from pipeline import queue
from tests.conftest import invoice
from tests.integration.test_processes import Child

pytestmark = pytest.mark.django_db(transaction=True)

ONLY_WHEN_USED = ["httpx", "cryptography"]


def test_a_node_that_delivers_no_webhook_imports_neither_httpx_nor_cryptography():
    queue.enqueue("acme", "doc-1", 1, invoice(1))
    (report,) = Child("footprint", worker="footprint", libraries=ONLY_WHEN_USED).finish()
    assert (report["outcome"], report["published"]) == ("committed", 1)  # it did the whole path
    assert report["imported"] == []
