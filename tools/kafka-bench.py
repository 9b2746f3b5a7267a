"""publish.kafka under load: a live job of K test:// streams (320x240, 30 fps) producing every result
(`results/`, a message per frame, the heaviest use) to a Kafka cluster of three brokers on loopback
(librdkafka's mock cluster, tests/fakes/kafka_test_cluster.h: Kafka's protocol, not Apache Kafka's
broker), for `--seconds`; then a stop. Then the same with every broker down for the middle third of the
run and up again, to see the queue hold the messages and deliver them, in order, once it is back. Prints,
per row: results published (the JSON-lines file), records in the topic, missing, each stream in order or
not, duplicates, the delay from publish having a result to its handing to the producer (the record's
CreateTime; each result's capture_unix_ms + latency_ms.total is when publish had it: the wait in
publish's queue), and publish's final counts from its log.

--archive N: also the cost to an archive job: N test:// streams of 1,500 frames with publish.kafka on
results/, events/ and job/summary at queue_policy block, against the same job without it, alternated,
three runs each (the job summary's frames/s and publish's own work).

Usage (after tools/build.sh): /usr/bin/python3 tools/kafka-bench.py [--streams 1 4 8] [--seconds 20] [--archive 4]
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port, live_sink_job, percentile, run_with_outage  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAPIPE = os.path.join(ROOT, "build", "cli", "vapipe")
CLUSTER = os.path.join(ROOT, "build", "tests", "vapipe_kafka_test_cluster")


class Cluster:
    """vapipe_kafka_test_cluster: three brokers on loopback, driven over its stdin."""

    def __init__(self):
        self.proc = subprocess.Popen([CLUSTER, "3"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = "kafka://" + self.proc.stdout.readline().strip()

    def ask(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        lines = []
        while (line := self.proc.stdout.readline().rstrip("\n")) != ".":
            lines.append(line)
        return lines

    def records(self, topic, at_least=0):
        return [json.loads(line) for line in self.ask(f"read {topic} {at_least}")]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def run(k, seconds, outage):
    with tempfile.TemporaryDirectory(prefix="vapipe-kafka-") as workdir:
        cluster = Cluster()
        config, results_path = live_sink_job(workdir, "kafka-bench", k, {
            "kafka": [{"url": cluster.url, "topics": ["results/"]}]})
        stderr = run_with_outage(VAPIPE, config, seconds, outage, lambda: cluster.ask("down"), lambda: cluster.ask("up"))
        with open(results_path) as f:
            published = [json.loads(line) for line in f if '"topic":"results/' in line]
        records = cluster.records("vapipe.kafka-bench.results", len(published))
        cluster.close()
    got = {}
    for r in records:
        got.setdefault(r["key"], []).append((r["timestamp_ms"], json.loads(r["value"])))
    delays = [ms - (p["capture_unix_ms"] + p["latency_ms"]["total"]) for s in got for ms, p in got[s]]
    keys = [(f"results/{s}", p["seq"]) for s in got for _, p in got[s]]
    in_order = all([p["seq"] for _, p in got[s]] == sorted(p["seq"] for _, p in got[s]) for s in got)
    final = re.search(r"publish\.kafka\[0\] \([^)]*\): (\d+) message\(s\) delivered, (\d+) refused, (\d+) dropped "
                      r"\(queue full\), (\d+) undelivered", stderr)
    return {"streams": k, "outage": "all brokers down for the middle third" if outage else "up",
            "published": len(published), "received": len(keys),
            "missing": len({(m["topic"], m["payload"]["seq"]) for m in published} - set(keys)),
            "in_order": in_order, "duplicates": len(keys) - len(set(keys)),
            "p50_ms": percentile(delays, 0.5), "p95_ms": percentile(delays, 0.95),
            "max_ms": max(delays) if delays else float("nan"), "final": final.groups() if final else None}


def archive(k, with_kafka, cluster):
    with tempfile.TemporaryDirectory(prefix="vapipe-kafka-") as workdir:
        results_path = os.path.join(workdir, "results.jsonl")
        publish = {"endpoint": f"tcp://127.0.0.1:{free_port()}", "jsonl_path": results_path}
        if with_kafka:
            publish["kafka"] = [{"url": cluster.url, "topics": ["results/", "events/", "job/summary"],
                                 "topic_prefix": f"vapipe.archive-{os.getpid()}-{archive.runs}.", "queue_policy": "block"}]
        archive.runs += 1
        cfg = {"job": {"name": "kafka-archive", "mode": "archive"},
               "streams": [{"id": f"s{i}", "uri": "test://ball?frames=1500&width=320&height=240"} for i in range(k)],
               "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                         "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
               "publish": publish}
        path = os.path.join(workdir, "job.yaml")
        with open(path, "w") as f:
            json.dump(cfg, f)
        p = subprocess.run([VAPIPE, "run", path], capture_output=True, text=True)
        with open(results_path) as f:
            summary = [json.loads(line)["payload"] for line in f if '"topic":"job/summary"' in line][0]
        own = re.search(r"publish done: \d+ messages.*?its own work ([\d.]+) s", p.stderr)
        delivered = re.search(r"publish\.kafka\[0\] \([^)]*\): (\d+) message\(s\) delivered", p.stderr)
        records = len(cluster.records(publish["kafka"][0]["topic_prefix"] + "results", k * 1500)) if with_kafka else None
        return summary["fps"], float(own.group(1)) if own else float("nan"), delivered.group(1) if delivered else "-", records
archive.runs = 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--archive", type=int, default=0, help="also the cost to an archive job of N streams")
    args = ap.parse_args()
    rows = []
    for k in args.streams:
        for outage in (False, True):
            rows.append(run(k, args.seconds, outage))
            print(rows[-1], file=sys.stderr)
    print(f"\nKafka on results/, {datetime.date.today()}, {os.cpu_count()} CPUs, librdkafka's mock cluster of 3 brokers, "
          f"{args.seconds:g} s per row (`/usr/bin/python3 tools/kafka-bench.py {' '.join(sys.argv[1:])}`)\n")
    print("| streams x 30 fps | cluster | results published | records | missing | in order | duplicates | "
          "publish to producer p50 (ms) | p95 | max | publish's count: delivered / refused / dropped / undelivered |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        final = " / ".join(r["final"]) if r["final"] else "(not in its log)"
        print(f"| {r['streams']} | {r['outage']} | {r['published']} | {r['received']} | {r['missing']} | "
              f"{'yes' if r['in_order'] else 'NO'} | {r['duplicates']} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
              f"{r['max_ms']:.0f} | {final} |")
    if args.archive:
        cluster = Cluster()
        print(f"\nArchive job of {args.archive} test:// streams x 1,500 frames (320x240, the pattern CNN), alternated:\n")
        print("| run | publish.kafka | job frames/s | publish's own work (s) | delivered | records in results topic |")
        print("|---|---|---|---|---|---|")
        for i in range(3):
            for with_kafka in (True, False):
                fps, own, delivered, records = archive(args.archive, with_kafka, cluster)
                print(f"| {i + 1} | {'on (block)' if with_kafka else 'off'} | {fps:.0f} | {own:.2f} | {delivered} | "
                      f"{records if records is not None else '-'} |", flush=True)
        cluster.close()


if __name__ == "__main__":
    main()
