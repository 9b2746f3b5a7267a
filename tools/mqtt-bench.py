"""publish.mqtt under load: a live job of K test:// streams (320x240, 30 fps) with an MQTT broker on
`results/` (a message per frame, the heaviest use) to a real Mosquitto on loopback, with a subscriber
(mosquitto_sub) stamping each message as it arrives, for `--seconds`; then a stop. Then the same with the
broker killed (SIGKILL, as a crash) for the middle third of the run and started again on its port, to
see the queue hold the messages and deliver them, in order, once it is back. Prints, per row: results
published (the JSON-lines file), received by the subscriber, in order or not, duplicates, the delay from
publish to the subscriber (median, 95th percentile, max; each result's capture_unix_ms +
latency_ms.total is when publish had it), and publish's final counts from its log.

Usage (after tools/build.sh): /usr/bin/python3 tools/mqtt-bench.py [--streams 1 4 8] [--seconds 20] [--qos 1]
"""
import argparse
import datetime
import json
import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port, live_sink_job, percentile, run_with_outage  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAPIPE = os.path.join(ROOT, "build", "cli", "vapipe")


class Broker:
    """Mosquitto on a port of its own, and a subscriber to everything that writes "UNIX_TIME TOPIC PAYLOAD"
    lines; down() kills both (the broker as a crash), up() starts them again on the same port."""

    def __init__(self, workdir):
        self.port, self.workdir, self.outputs, self.procs = free_port(), workdir, [], []
        self.conf = os.path.join(workdir, "mosquitto.conf")
        with open(self.conf, "w") as f:
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    f"max_queued_messages 1000000\nuser {pwd.getpwuid(os.getuid()).pw_name}\n")
        self.up()

    def up(self):
        broker = subprocess.Popen(["mosquitto", "-c", self.conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.01)
        out = os.path.join(self.workdir, f"received-{len(self.outputs)}.txt")
        with open(out, "w") as f:
            sub = subprocess.Popen(["mosquitto_sub", "-p", str(self.port), "-t", "#", "-q", "1", "-F", "%U %t %p"],
                                   stdout=f, stderr=subprocess.DEVNULL)
        time.sleep(0.2)  # subscribed before vapipe's next try (1 s after it lost the broker)
        self.outputs.append(out)
        self.procs = [sub, broker]

    def down(self, sig=signal.SIGKILL):
        for proc in self.procs:
            proc.send_signal(sig)
            proc.wait()

    def received(self):
        got = []
        for out in self.outputs:
            with open(out) as f:
                for line in f:
                    stamp, topic, payload = line.rstrip("\n").split(" ", 2)
                    got.append((float(stamp), topic, payload))
        return got


def run(k, seconds, outage, qos):
    with tempfile.TemporaryDirectory(prefix="vapipe-mqtt-") as workdir:
        broker = Broker(workdir)
        config, results_path = live_sink_job(workdir, "mqtt-bench", k, {
            "mqtt": [{"url": f"mqtt://127.0.0.1:{broker.port}", "topics": ["results/"], "qos": qos,
                      "status_topic": ""}]})
        stderr = run_with_outage(VAPIPE, config, seconds, outage, broker.down, broker.up)
        time.sleep(0.5)  # the subscriber's last lines
        broker.down(signal.SIGTERM)
        with open(results_path) as f:
            published = [json.loads(line) for line in f if '"topic":"results/' in line]
        got = [(t, topic, json.loads(p)) for t, topic, p in broker.received()]
    delays = [(t - (p["capture_unix_ms"] + p["latency_ms"]["total"]) / 1000) * 1000 for t, _, p in got]
    prefix = "vapipe/mqtt-bench/results/"
    order_kept = all([p["seq"] for _, topic, p in got if topic == f"{prefix}s{i}"] ==
                     sorted(p["seq"] for _, topic, p in got if topic == f"{prefix}s{i}") for i in range(k))
    keys = [(topic, p["seq"]) for _, topic, p in got]
    final = re.search(r"publish\.mqtt\[0\] \([^)]*\): (\d+) message\(s\) delivered, (\d+) refused, (\d+) dropped "
                      r"\(queue full\), (\d+) undelivered", stderr)
    lost = re.search(r", (\d+) lost with a connection", stderr)
    return {"streams": k, "outage": outage, "published": len(published), "received": len(got),
            "missing": len({(f"vapipe/mqtt-bench/{m['topic']}", m["payload"]["seq"]) for m in published} - set(keys)),
            "in_order": order_kept, "duplicates": len(keys) - len(set(keys)),
            "p50_ms": percentile(delays, 0.5), "p95_ms": percentile(delays, 0.95),
            "max_ms": max(delays) if delays else float("nan"),
            "final": (final.groups() + ((lost.group(1),) if lost else ("0",))) if final else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--qos", type=int, default=1, choices=[0, 1, 2])
    args = ap.parse_args()
    rows = []
    for k in args.streams:
        for outage in (False, True):
            rows.append(run(k, args.seconds, outage, args.qos))
            print(rows[-1], file=sys.stderr)
    print(f"\nMQTT on results/ at qos {args.qos}, {datetime.date.today()}, {os.cpu_count()} CPUs, {args.seconds:g} s "
          f"per row (`/usr/bin/python3 tools/mqtt-bench.py {' '.join(sys.argv[1:])}`)\n")
    print("| streams x 30 fps | broker | results published | received | missing | in order | duplicates | "
          "publish to subscriber p50 (ms) | p95 | max | publish's count: delivered / refused / dropped / "
          "undelivered / lost |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        final = " / ".join(r["final"]) if r["final"] else "(not in its log)"
        print(f"| {r['streams']} | {'killed for the middle third' if r['outage'] else 'up'} | {r['published']} | "
              f"{r['received']} | {r['missing']} | {'yes' if r['in_order'] else 'NO'} | {r['duplicates']} | "
              f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['max_ms']:.0f} | {final} |")


if __name__ == "__main__":
    main()
