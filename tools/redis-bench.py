"""publish.redis under load: a live job of K test:// streams (320x240, 30 fps) adding every result
(`results/`, a message per frame, the heaviest use) to a real Redis server on loopback, for `--seconds`;
then a stop. Then the same with the server killed (SIGKILL, as a crash) for the middle third of the run
and started again on its port (its append-only file, fsynced at each write, keeps what it had taken), to
see the queue hold the messages and deliver them, in order, once it is back. Prints, per row: results
published (the JSON-lines file), entries in the streams, missing, in order or not, duplicates, the delay
from publish to the server (median, 95th percentile, max: an entry's id is the server's clock when it
added it; each result's capture_unix_ms + latency_ms.total is when publish had it), and publish's final
counts from its log.

--failover: the same job against a master that Redis Sentinel watches (redis+sentinel://; a replica and
one sentinel, quorum 1, the master found down after 1 s), with the master killed a third in (Sentinel
promotes the replica), then with a failover ordered a third in (SENTINEL FAILOVER, as for an upgrade:
the old master takes writes until Sentinel makes it a replica); the streams are read from the master
Sentinel names at the end.

Usage (after tools/build.sh): /usr/bin/python3 tools/redis-bench.py [--streams 1 4 8] [--seconds 20] [--failover]
"""
import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port, live_sink_job, percentile, run_with_outage  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAPIPE = os.path.join(ROOT, "build", "cli", "vapipe")


class Server:
    """redis-server on a port of its own, its append-only file in `workdir`; down() kills it (as a crash),
    up() starts it again on the same port with what its file kept."""

    def __init__(self, workdir, replica_of=None):
        self.port, self.workdir, self.proc, self.replica_of = free_port(), workdir, None, replica_of
        os.makedirs(workdir, exist_ok=True)
        self.up()

    def cli(self, *command):
        return subprocess.run(["redis-cli", "-p", str(self.port), *command], capture_output=True, text=True).stdout

    def up(self):
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                                      self.workdir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                                      "--logfile", os.path.join(self.workdir, "redis.log"),
                                      *(["--replicaof", "127.0.0.1", str(self.replica_of)] if self.replica_of else [])],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while self.cli("PING").strip() != "PONG":
            time.sleep(0.01)

    def down(self, sig=signal.SIGKILL):
        self.proc.send_signal(sig)
        self.proc.wait()

    def entries(self, key):
        """[(server's ms, payload)] of the stream `key`, in order."""
        lines = self.cli("XRANGE", key, "-", "+").splitlines()
        return [(int(lines[i].split("-")[0]), json.loads(lines[i + 4])) for i in range(0, len(lines) - 4, 5)]


class Sentinel:
    """A master, its replica, and a sentinel (redis-server --sentinel) watching them as "mymaster"."""

    def __init__(self, workdir):
        self.master = Server(os.path.join(workdir, "first"))
        self.replica = Server(os.path.join(workdir, "second"), replica_of=self.master.port)
        self.port = free_port()
        conf = os.path.join(workdir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {self.port}\nbind 127.0.0.1\ndir {workdir}\nlogfile {workdir}/sentinel.log\n"
                    f"sentinel monitor mymaster 127.0.0.1 {self.master.port} 1\n"
                    "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n")
        self.proc = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        while "flags\nslave\n" not in self.cli("SENTINEL", "replicas", "mymaster"):  # (it found the replica)
            time.sleep(0.05)
        # The replica has loaded the master's data (a first sync waits 5 s, diskless, for more replicas):
        # one promoted before that would lack what the master had.
        while "master_link_status:up" not in self.replica.cli("INFO", "replication"):
            time.sleep(0.05)

    def cli(self, *command):
        return subprocess.run(["redis-cli", "-p", str(self.port), *command], capture_output=True, text=True).stdout

    @property
    def url(self):
        return f"redis+sentinel://127.0.0.1:{self.port}/mymaster"

    def current(self):
        """The server Sentinel names the master now."""
        port = int(self.cli("SENTINEL", "get-master-addr-by-name", "mymaster").split()[1])
        return self.master if port == self.master.port else self.replica

    def close(self):
        self.proc.terminate()
        self.proc.wait()
        for server in (self.master, self.replica):
            if server.proc.poll() is None:
                server.down(signal.SIGTERM)


def run(k, seconds, outage):
    with tempfile.TemporaryDirectory(prefix="vapipe-redis-") as workdir:
        server = Server(workdir)
        config, results_path = live_sink_job(workdir, "redis-bench", k, {
            "redis": [{"url": f"redis://127.0.0.1:{server.port}", "topics": ["results/"]}]})
        stderr = run_with_outage(VAPIPE, config, seconds, outage, server.down, server.up)
        got = {i: server.entries(f"vapipe:redis-bench:results/s{i}") for i in range(k)}
        server.down(signal.SIGTERM)
        with open(results_path) as f:
            published = [json.loads(line) for line in f if '"topic":"results/' in line]
    return summarize(k, "killed for the middle third" if outage else "up", published, got, stderr)


def run_failover(k, seconds, kind):
    """kind: "killed" (the master SIGKILLed a third in) or "ordered" (SENTINEL FAILOVER a third in)."""
    with tempfile.TemporaryDirectory(prefix="vapipe-redis-") as workdir:
        watched = Sentinel(workdir)
        config, results_path = live_sink_job(workdir, "redis-bench", k, {
            "redis": [{"url": watched.url, "topics": ["results/"]}]})
        act = (lambda: watched.master.down()) if kind == "killed" else \
            (lambda: watched.cli("SENTINEL", "FAILOVER", "mymaster"))
        stderr = run_with_outage(VAPIPE, config, seconds, True, act, lambda: None)
        server = watched.current()
        got = {i: server.entries(f"vapipe:redis-bench:results/s{i}") for i in range(k)}
        switched = server is watched.replica
        watched.close()
        with open(results_path) as f:
            published = [json.loads(line) for line in f if '"topic":"results/' in line]
    return summarize(k, f"master {kind} a third in" + ("" if switched else " (NO FAILOVER)"), published, got, stderr)


def summarize(k, outage, published, got, stderr):
    delays = [ms - (p["capture_unix_ms"] + p["latency_ms"]["total"]) for i in got for ms, p in got[i]]
    keys = [(f"results/s{i}", p["seq"]) for i in got for _, p in got[i]]
    order_kept = all([p["seq"] for _, p in got[i]] == sorted(p["seq"] for _, p in got[i]) for i in got)
    final = re.search(r"publish\.redis\[0\] \([^)]*\): (\d+) message\(s\) delivered, (\d+) refused, (\d+) dropped "
                      r"\(queue full\), (\d+) undelivered", stderr)
    return {"streams": k, "outage": outage, "published": len(published), "received": len(keys),
            "missing": len({(m["topic"], m["payload"]["seq"]) for m in published} - set(keys)),
            "in_order": order_kept, "duplicates": len(keys) - len(set(keys)),
            "p50_ms": percentile(delays, 0.5), "p95_ms": percentile(delays, 0.95),
            "max_ms": max(delays) if delays else float("nan"), "final": final.groups() if final else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--failover", action="store_true", help="through Redis Sentinel, with failovers")
    args = ap.parse_args()
    rows = []
    for k in args.streams:
        for case in (("killed", "ordered") if args.failover else (False, True)):
            rows.append(run_failover(k, args.seconds, case) if args.failover else run(k, args.seconds, case))
            print(rows[-1], file=sys.stderr)
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
    print(f"\nRedis streams on results/, {datetime.date.today()}, {os.cpu_count()} CPUs, Redis {version}, "
          f"{args.seconds:g} s per row (`/usr/bin/python3 tools/redis-bench.py {' '.join(sys.argv[1:])}`)\n")
    print("| streams x 30 fps | server | results published | entries | missing | in order | duplicates | "
          "publish to server p50 (ms) | p95 | max | publish's count: delivered / refused / dropped / undelivered |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        final = " / ".join(r["final"]) if r["final"] else "(not in its log)"
        print(f"| {r['streams']} | {r['outage']} | {r['published']} | "
              f"{r['received']} | {r['missing']} | {'yes' if r['in_order'] else 'NO'} | {r['duplicates']} | "
              f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['max_ms']:.0f} | {final} |")


if __name__ == "__main__":
    main()
