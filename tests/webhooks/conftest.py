"""Webhook tests: real receivers (tests/webhooks/receiver.py) in their own processes on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.waiting import wait_for

RECEIVER = Path(__file__).with_name("receiver.py")


@dataclass
class Receiver:
    state: Path
    process: subprocess.Popen | None = None
    port: int = 0
    history: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/relayops?token=query-secret"

    def start(self, *options: str) -> "Receiver":
        (self.state / "port").unlink(missing_ok=True)
        argv = [sys.executable, str(RECEIVER), str(self.state), *options]
        if self.port:
            argv += ["--port", str(self.port)]
        self.process = subprocess.Popen(argv)
        self.history.append(self.process)
        self.port = int(wait_for(lambda: (self.state / "port").exists() and (self.state / "port").read_text(),
                                 timeout=30, what="the receiver to listen"))
        return self

    def knows(self, secret: str) -> "Receiver":
        """The secret this receiver verifies signatures with (the one shown when the endpoint was made)."""
        (self.state / "secret").write_text(secret)
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        for process in self.history:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)

    def log(self) -> list[dict]:
        path = self.state / "log.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def applied(self) -> list[str]:
        return (self.state / "seen").read_text().split()


@pytest.fixture
def receivers(tmp_path):
    made: list[Receiver] = []

    def make(*options: str) -> Receiver:
        state = tmp_path / f"receiver{len(made)}"
        state.mkdir()
        (state / "secret").write_text("not-yet-known")
        receiver = Receiver(state=state).start(*options)
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.stop()
