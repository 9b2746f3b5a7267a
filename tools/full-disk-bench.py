"""A live job whose results disk fills: K live test cameras (160x120, `--fps` each) classified with the
shipped CNN, results to the bus and to publish.jsonl_path. After `--warmup` s, publish's file-size
limit is lowered from outside (prlimit: the kernel then refuses its writes as a full disk does) for
`--refuse-s` s, then lifted ("space freed"). Prints: results/s on the bus before and while the file
refused them, publish's resident memory before, at the end of the refusal and after, the lines kept
for the file (from /healthz) and how long after the lift they were all written, and whether the file
then holds exactly what the bus had (per stream, the same seqs).

Usage (after tools/build.sh, as root for prlimit):
  /usr/bin/python3 tools/full-disk-bench.py [--cameras 16] [--fps 30] [--refuse-s 20]
"""
import argparse
import datetime
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
os.environ.setdefault("VAPIPE_BIN", os.path.join(ROOT, "build", "cli", "vapipe"))
from e2e.common import Run, Subscriber, free_port, results_by_stream, write_config  # noqa: E402

PATTERNS = ["smpte", "ball", "snow", "pinwheel", "colors", "spokes", "gradient", "red"]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def count_bus_results(path):
    with open(path) as f:
        return sum('"topic": "results/' in line for line in f)


def health(address):
    with urllib.request.urlopen(f"http://{address}/healthz", timeout=5) as r:
        return json.load(r)["results_file"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cameras", type=int, default=16)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--warmup", type=float, default=8)
    ap.add_argument("--refuse-s", type=float, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="vapipe-full-disk-") as workdir:
        address = f"127.0.0.1:{free_port()}"
        streams = [(f"cam{i:02d}", f"test://{PATTERNS[i % len(PATTERNS)]}?frames=0&live=true&fps={args.fps}"
                    f"&width=160&height=120") for i in range(args.cameras)]
        config, endpoint = write_config(workdir, streams, job={"mode": "live"},
                                        batch={"max_batch_size": 32, "max_delay_ms": 10},
                                        publish={"metrics_address": address})
        results_file = os.path.join(workdir, "results.jsonl")
        sub = Subscriber(endpoint, workdir)
        run = Run(config)
        publish = run.watch_stages()["publish"]
        time.sleep(args.warmup)
        t0, n0 = time.time(), count_bus_results(sub.path)
        time.sleep(3)
        before_rate = (count_bus_results(sub.path) - n0) / (time.time() - t0)
        before_rss = rss_mb(publish)
        hard = resource.prlimit(publish, resource.RLIMIT_FSIZE)[1]
        resource.prlimit(publish, resource.RLIMIT_FSIZE, (os.path.getsize(results_file) + 100, hard))
        t1, n1 = time.time(), count_bus_results(sub.path)
        time.sleep(args.refuse_s)
        refusing_rate = (count_bus_results(sub.path) - n1) / (time.time() - t1)
        refused = health(address)
        refused_rss = rss_mb(publish)
        resource.prlimit(publish, resource.RLIMIT_FSIZE, (hard, hard))
        lifted = time.time()
        while time.time() - lifted < 30:
            h = health(address)
            if h["writable"] and h["lines_waiting"] == 0:
                break
            time.sleep(0.05)
        written_after = time.time() - lifted
        after = health(address)
        time.sleep(2)
        after_rss = rss_mb(publish)
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        bus = results_by_stream(sub.wait(timeout=30))
        with open(results_file) as f:
            recorded = [json.loads(line) for line in f]
        kept = results_by_stream(recorded)
        same = all([r["seq"] for r in kept.get(s, [])] == [r["seq"] for r in bus[s]] for s in bus)
        line_bytes = os.path.getsize(results_file) / max(1, len(recorded))
    print(f"\nA live job's results file refusing lines, {datetime.date.today()}, {os.cpu_count()} CPUs "
          f"(`/usr/bin/python3 tools/full-disk-bench.py {' '.join(sys.argv[1:])}`)\n")
    print("| cameras | results/s before | while refused | lines kept after "
          f"{args.refuse_s:g} s | publish RSS before / refused / after (MB) | all written after the lift | "
          "lines lost | file == bus | exit |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.cameras} x {args.fps} fps | {before_rate:.0f} | {refusing_rate:.0f} | "
          f"{refused['lines_waiting']} ({refused['lines_waiting'] * line_bytes / 1e6:.1f} MB at {line_bytes:.0f} B a line) | "
          f"{before_rss:.0f} / {refused_rss:.0f} / {after_rss:.0f} | {written_after:.2f} s (try every 5 s) | "
          f"{after['lines_lost']} | {'yes' if same else 'NO'} | {code} |")


if __name__ == "__main__":
    main()
