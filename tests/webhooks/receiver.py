"""A webhook receiver as a downstream system would write one, run as its own process on loopback.

It verifies ``RelayOps-Signature`` with its secret (read from ``<state>/secret`` at each request; docs/webhooks.md), applies each event id once
(remembered in ``<state>/seen``, so a restarted receiver still dedupes) and logs every request it got to
``<state>/log.jsonl``: its event id, topic, whether the signature held, whether it was a duplicate, and
the status it answered. It writes its port to ``<state>/port`` once it listens.

    python receiver.py STATE_DIR [--port P] [--fail-first N] [--status S] [--hang-after-apply]
        [--hang]

``--fail-first N`` answers 500 to its first N requests; ``--status S`` answers S to every request;
``--hang-after-apply`` applies the first valid event, then never answers (the test kills it mid-request);
``--hang`` never answers at all (a timeout).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TOLERANCE_SECONDS = 300


def verify(secret: str, header: str, body: bytes) -> bool:
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    timestamp, signature = parts.get("t", ""), parts.get("v1", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return False
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("state", type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--status", type=int, default=0)
    parser.add_argument("--hang-after-apply", action="store_true")
    parser.add_argument("--hang", action="store_true")
    args = parser.parse_args()
    lock = threading.Lock()
    counter = {"requests": 0}
    seen_file = args.state / "seen"
    seen_file.touch()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            event_id = self.headers.get("RelayOps-Event-Id", "")
            with lock:
                counter["requests"] += 1
                number = counter["requests"]
                valid = verify((args.state / "secret").read_text().strip(), self.headers.get("RelayOps-Signature", ""), body)
                document = json.loads(body) if valid else {}
                valid = valid and document.get("id") == event_id
                duplicate = valid and event_id in seen_file.read_text().split()
                if args.hang:
                    status = 0
                elif not valid:
                    status = 401
                elif number <= args.fail_first:
                    status = 500
                elif args.status:
                    status = args.status
                else:
                    status = 200
                    if not duplicate:  # the effect: applied once per event id, durably
                        with seen_file.open("a") as seen:
                            seen.write(event_id + "\n")
                            seen.flush()
                            os.fsync(seen.fileno())
                entry = {"event_id": event_id, "topic": self.headers.get("RelayOps-Topic"), "at": time.time(),
                         "timestamp": self.headers.get("RelayOps-Timestamp"), "valid": valid,
                         "duplicate": duplicate, "status": status, "document": document}
                with (args.state / "log.jsonl").open("a") as log:
                    log.write(json.dumps(entry) + "\n")
            if args.hang or (args.hang_after_apply and status == 200):
                while True:  # applied, but the answer never leaves: the test kills this process
                    time.sleep(1)
            answer = b"receiver-private-words: do not store me"
            self.send_response(status)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    (args.state / "port.tmp").write_text(str(server.server_address[1]))
    (args.state / "port.tmp").rename(args.state / "port")
    server.serve_forever()


if __name__ == "__main__":
    main()
