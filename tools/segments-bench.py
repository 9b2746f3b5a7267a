"""`vapipe segments` over a day of one camera's hourly files: writes a results file as an archive job
would (--files files of --frames-per-file results each, 12.5 frames/s so that a file is an hour,
camera_unix_ms as recorded_at gives it, four files' lines interleaved as a job with several open
writes them, a label that changes every 400 frames with 2% flicker), then times `vapipe segments` on
it plainly and with --join (all files as one camera), with and without --min-frames 25 --bridge, and
prints wall time, peak memory (max RSS) and the number of segments of each.

Needs GNU time (/usr/bin/time, Debian's `time`).

Usage (after tools/build.sh): /usr/bin/python3 tools/segments-bench.py [--files 24] [--frames-per-file 45000]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAPIPE = os.environ.get("VAPIPE_BIN", os.path.join(ROOT, "build", "cli", "vapipe"))


def write_results(path, files, per_file):
    random.seed(1)
    start = 1796220000000
    step = 3600000.0 / per_file if per_file else 80.0
    labels = ["car", "truck", "person", "empty"]
    current = {}
    with open(path, "w") as f:
        for group in range(0, files, 4):
            members = range(group, min(group + 4, files))
            for i in range(per_file):
                for k in members:
                    sid = "ch03_%02d" % k
                    t = start + k * 3600000 + i * step
                    if i % 400 == 0:
                        current[k] = random.choice(labels)
                    label = current[k] if random.random() > 0.02 else random.choice(labels)
                    f.write(json.dumps({"topic": "results/" + sid, "payload": {
                        "schema": "vapipe.result", "stream_id": sid, "seq": i, "pts_ms": i * step,
                        "capture_unix_ms": t + 5, "camera_unix_ms": t, "label": label, "score": 0.9,
                        "error": None}}) + "\n")


def run(args):
    # GNU time's %M: this run's own peak (getrusage's children figure is the largest of all so far).
    began = time.monotonic()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", VAPIPE, "segments"] + args, capture_output=True, text=True)
    wall = time.monotonic() - began
    if out.returncode != 0:
        sys.exit("vapipe segments %s failed: %s" % (" ".join(args), out.stderr))
    peak_kib = int(out.stderr.strip().splitlines()[-1])
    return wall, peak_kib, len(out.stdout.splitlines()) - 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=24)
    p.add_argument("--frames-per-file", type=int, default=45000)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="vapipe-segments-bench-") as d:
        path = os.path.join(d, "results.jsonl")
        write_results(path, a.files, a.frames_per_file)
        print("%d files x %d results: %d lines, %.0f MB" % (a.files, a.frames_per_file, a.files * a.frames_per_file,
                                                          os.path.getsize(path) / 1e6))
        print("| options | wall s | peak memory MB | segments |")
        print("|---|---|---|---|")
        for options in ([], ["--min-frames", "25", "--bridge"], ["--join", "cam3=ch03_*"],
                        ["--min-frames", "25", "--bridge", "--join", "cam3=ch03_*"]):
            wall, peak, segments = run([path] + options)
            print("| %s | %.2f | %.0f | %d |" % (" ".join(options) or "(none)", wall, peak / 1024, segments))


if __name__ == "__main__":
    main()
