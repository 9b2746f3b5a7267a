#!/usr/bin/env python3
"""What starting vapipe's processes costs: the CPU time of `vapipe --version` (what every process pays
before its main: the dynamic loading and static initialisers of the libraries it links), and a short
archive job's wall time with each stage's peak memory (RSS, sampled every 50 ms). Several binaries can
be measured in one run, to compare builds: `--vapipe A --vapipe B`.

    /usr/bin/python3 tools/process-start-bench.py [--vapipe build/cli/vapipe]... [--runs 5]

The job: three 320x240 test sources of 60 frames each and the shipped pattern CNN, nothing waited for.
Prints a Markdown table.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = """job: {{name: start-bench}}
streams:
  - {{id: a, uri: "test://ball?frames=60&width=320&height=240"}}
  - {{id: b, uri: "test://smpte?frames=60&width=320&height=240"}}
  - {{id: c, uri: "test://snow?frames=60&width=320&height=240"}}
infer: {{model: {root}/models/pattern_cnn.pt, labels: {root}/models/pattern_cnn.labels.txt}}
publish: {{endpoint: "tcp://127.0.0.1:{port}", wait_for_subscribers: 0}}
"""


def cpu_of_version(vapipe, runs):
    """Median user+system CPU seconds of `vapipe --version`."""
    times = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([vapipe, "--version"], check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def role_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return None
    args = [a.decode(errors="replace") for a in args if a]
    if len(args) >= 3 and args[1] == "stage":
        return args[2]
    if len(args) >= 2 and args[1] == "run":
        return "run"
    return None


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def run_job(vapipe, config):
    """Wall seconds of the job, and each role's peak RSS in MB."""
    peaks = {}
    start = time.monotonic()
    proc = subprocess.Popen([vapipe, "run", config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample():
        while not done.is_set():
            for pid in [proc.pid] + children(proc.pid):
                role = role_of(pid)
                if role:
                    peaks[role] = max(peaks.get(role, 0.0), rss_mb(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate(timeout=300)
    wall = time.monotonic() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"{vapipe} run failed ({proc.returncode}):\n{err[-3000:]}")
    return wall, peaks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vapipe", action="append", help="a vapipe binary (repeat to compare; default build/cli/vapipe)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    binaries = args.vapipe or [os.path.join(ROOT, "build", "cli", "vapipe")]
    roles = ["run", "ingest", "preprocess", "batch", "infer", "publish"]
    print("| binary | `vapipe --version` CPU (s, median) | job wall (s, median) | " +
          " | ".join(f"{r} peak RSS (MB)" for r in roles) + " |")
    print("|---|---|---|" + "---|" * len(roles))
    with tempfile.TemporaryDirectory() as d:
        config = os.path.join(d, "job.yaml")
        for vapipe in binaries:
            with open(config, "w") as f:
                f.write(CONFIG.format(root=ROOT, port=5700 + os.getpid() % 200))
            cpu = cpu_of_version(vapipe, args.runs)
            walls, peaks = [], {}
            for _ in range(args.runs):
                wall, p = run_job(vapipe, config)
                walls.append(wall)
                for role, mb in p.items():
                    peaks.setdefault(role, []).append(mb)
            cells = [f"{statistics.median(peaks[r]):.0f}" if r in peaks else "-" for r in roles]
            print(f"| {vapipe} | {cpu:.2f} | {statistics.median(walls):.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
