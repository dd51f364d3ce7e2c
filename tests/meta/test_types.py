"""The application code type-checks (mypy with the Django plugin); see mypy.ini."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [name for name in ("relayops", "tenancy", "pipeline", "dlq", "review", "controls", "ingest", "webhooks", "console", "demo") if (ROOT / name).is_dir()]


def test_mypy_finds_no_errors():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", *PACKAGES], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
