"""publish.webhooks under load: a live job of K test:// streams (320x240, 30 fps) with a webhook on
`results/` (a POST per frame, the heaviest use) to a receiver in this process (Python's
ThreadingHTTPServer, HTTP/1.1 keep-alive), for `--seconds`; then a stop. Then the same with the receiver
down for the middle third of the run, to see the queue hold the messages and deliver them, in order,
once it is back. Prints, per row: results published (the JSON-lines file), delivered to the receiver,
in order or not, duplicates, the delay from publish to the receiver (median, 95th percentile, max; each
result's capture_unix_ms + latency_ms.total is when publish had it), and publish's final counts from its
log.

Usage (after tools/build.sh): /usr/bin/python3 tools/webhook-bench.py [--streams 1 4 8] [--seconds 20]
"""
import argparse
import datetime
import http.server
import json
import os
import re
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port, live_sink_job, percentile, run_with_outage  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAPIPE = os.path.join(ROOT, "build", "cli", "vapipe")


class Receiver:
    """Records (arrival time, body) of each POST; `down()` closes it, `up()` listens again on its port."""

    def __init__(self):
        self.port, self.received, self.lock = free_port(), [], threading.Lock()
        self.connections = set()  # kept alive by the client: down() closes them too
        self.server = None
        self.up()

    def up(self):
        received, lock, connections = self.received, self.lock, self.connections

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with lock:
                    connections.add(self.connection)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    received.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self):
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for c in self.connections:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.connections.clear()


def run(k, seconds, outage):
    with tempfile.TemporaryDirectory(prefix="vapipe-webhook-") as workdir:
        receiver = Receiver()
        config, results_path = live_sink_job(workdir, "webhook-bench", k, {
            "webhooks": [{"url": f"http://127.0.0.1:{receiver.port}/hook", "topics": ["results/"]}]})
        stderr = run_with_outage(VAPIPE, config, seconds, outage, receiver.down, receiver.up)
        receiver.down()
        with open(results_path) as f:
            published = [json.loads(line) for line in f if '"topic":"results/' in line]
    got = receiver.received
    delays = [(t - (b["payload"]["capture_unix_ms"] + b["payload"]["latency_ms"]["total"]) / 1000) * 1000
              for t, b in got]
    order_kept = all(
        [b["payload"]["seq"] for _, b in got if b["topic"] == f"results/s{i}"] ==
        sorted(b["payload"]["seq"] for _, b in got if b["topic"] == f"results/s{i}") for i in range(k))
    keys = [(b["topic"], b["payload"]["seq"]) for _, b in got]
    final = re.search(r"publish\.webhooks\[0\] \([^)]*\): (\d+) message\(s\) delivered, (\d+) refused, (\d+) dropped "
                      r"\(queue full\), (\d+) undelivered", stderr)
    return {"streams": k, "outage": outage, "published": len(published), "delivered": len(got),
            "in_order": order_kept, "duplicates": len(keys) - len(set(keys)),
            "p50_ms": percentile(delays, 0.5), "p95_ms": percentile(delays, 0.95),
            "max_ms": max(delays) if delays else float("nan"),
            "final": final.groups() if final else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    rows = []
    for k in args.streams:
        for outage in (False, True):
            rows.append(run(k, args.seconds, outage))
            print(rows[-1], file=sys.stderr)
    print(f"\nWebhook on results/, {datetime.date.today()}, {os.cpu_count()} CPUs, {args.seconds:g} s per row "
          f"(`/usr/bin/python3 tools/webhook-bench.py {' '.join(sys.argv[1:])}`)\n")
    print("| streams x 30 fps | receiver | results published | delivered | in order | duplicates | "
          "publish to receiver p50 (ms) | p95 | max | publish's count: delivered / refused / dropped / undelivered |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        final = " / ".join(r["final"]) if r["final"] else "(not in its log)"
        print(f"| {r['streams']} | {'down for the middle third' if r['outage'] else 'up'} | {r['published']} | "
              f"{r['delivered']} | {'yes' if r['in_order'] else 'NO'} | {r['duplicates']} | {r['p50_ms']:.1f} | "
              f"{r['p95_ms']:.1f} | {r['max_ms']:.0f} | {final} |")


if __name__ == "__main__":
    main()
