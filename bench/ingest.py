"""Ingest API throughput and the latency it adds over a direct ``enqueue``.

Usage: ./run bench ingest [--requests 600] [--clients 8] [--db relayops_bench_ingest]
Creates the benchmark database on the DATABASE_URL server, serves the API from a subprocess (Django's
threaded WSGI server, as ``runserver`` uses, with DEBUG off and TCP_NODELAY: without it a keep-alive
client waits ~40 ms per response for a delayed ACK), and POSTs synthetic invoices with keep-alive
connections: first from one client, then from ``--clients`` concurrent clients (threads, each its own
connection). Each request is a new document (201). Then it calls ``ingest.documents.submit`` directly
(the checks and ``queue.enqueue`` the API runs) as many times from this process, and prints
requests/s, p50/p95 latency of both, and what the API adds (HTTP, authentication, JSON, problem
handling) at p50 and p95. No cluster runs: jobs stay queued, as behind a busy cluster.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

from benchdb import ROOT, database_url, fresh_database, stop  # bench/ is on sys.path when run as a script


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _percentile(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1] if len(samples) > 1 else samples[0]


def _report(name: str, latencies: list[float], seconds: float) -> None:
    print(f"{name}: {len(latencies)} in {seconds:.2f} s = {len(latencies) / seconds:,.0f}/s; "
          f"latency p50 {_percentile(latencies, 50):.2f} ms, p95 {_percentile(latencies, 95):.2f} ms")


def _bodies(prefix: str, count: int) -> list[dict]:
    from pipeline.extraction import synthetic

    return [{"document_id": f"{prefix}-{n}", "content": synthetic.valid(f"bench-{n % 50}").text} for n in range(count)]


def _post_all(url: str, key: str, bodies: list[dict], latencies: list[float]) -> None:
    import httpx

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        for body in bodies:
            started = time.perf_counter()
            response = client.post("/api/v1/documents", json=body)
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code != 201:
                raise SystemExit(f"unexpected HTTP {response.status_code}: {response.text}")


def _clients(url: str, key: str, bodies: list[dict], clients: int) -> tuple[list[float], float]:
    shares = [bodies[i::clients] for i in range(clients)]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    threads = [threading.Thread(target=_post_all, args=(url, key, share, out)) for share, out in zip(shares, latencies)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [ms for out in latencies for ms in out], time.perf_counter() - started


def _direct(bodies: list[dict]) -> tuple[list[float], float]:
    from ingest.documents import submit

    latencies = []
    started = time.perf_counter()
    for body in bodies:
        began = time.perf_counter()
        submit("bench", body["document_id"], 1, body["content"])
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies, time.perf_counter() - started


def _serve(db: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": database_url(db), "DEBUG": "0", "SECRET_KEY": "bench", "LOG_LEVEL": "ERROR",
           "DJANGO_SETTINGS_MODULE": "relayops.settings"}
    return subprocess.Popen([sys.executable, __file__, "--serve", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def serve(port: int) -> None:
    """The server subprocess: Django's threaded WSGI server with TCP_NODELAY on each connection."""
    import django

    django.setup()
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    class Handler(WSGIRequestHandler):
        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadedWSGIServer(("127.0.0.1", port), Handler)
    server.set_app(get_wsgi_application())
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600, help="requests per measurement")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--db", default="relayops_bench_ingest")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server subprocess
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve)

    fresh_database(args.db, RELAYOPS_KICKS="0")  # no cluster runs: no kick tasks pile up in the broker
    from django.db import connection

    from ingest.keys import create_api_key

    key = create_api_key("bench", "bench").raw
    connection.close()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _serve(args.db, port)
    try:
        from demo.frontdoor import wait_until_serving

        wait_until_serving(url, server)
        _post_all(url, key, _bodies("warmup", 50), [])
        one, one_s = _clients(url, key, _bodies("one", args.requests), 1)
        _report("API, 1 client", one, one_s)
        many, many_s = _clients(url, key, _bodies("many", args.requests), args.clients)
        _report(f"API, {args.clients} concurrent clients", many, many_s)
        direct, direct_s = _direct(_bodies("direct", args.requests))
        _report("direct submit -> enqueue (this process)", direct, direct_s)
        for q in (50, 95):
            added = _percentile(one, q) - _percentile(direct, q)
            print(f"the API adds at p{q}: {added:.2f} ms ({_percentile(one, q) / _percentile(direct, q):.1f}x enqueue)")
        print(f"concurrency: {args.clients} clients give {(len(many) / many_s) / (len(one) / one_s):.2f}x the "
              "requests/s of one (2 cores shared by the server, PostgreSQL and the clients)")
    finally:
        stop(server, 10)


if __name__ == "__main__":
    main()
