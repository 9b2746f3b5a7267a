"""Live latency with several RTSP cameras: K real RTSP servers on loopback (640x360, 30 fps, H.264),
one live job classifying all of them with the shipped CNN for `--seconds`, a subscriber timing every
result. Prints, per K: results/s against what the cameras send, the capture-to-publish latency
(median, 95th and 99th percentile, max; from each result's `latency_ms.total`), and the frames the
live queues dropped (gaps in `seq`). The camera servers share the machine's cores with the pipeline.

Usage (after tools/build.sh): /usr/bin/python3 tools/live-bench.py [--cameras 2 4 8] [--seconds 20]
"""
import argparse
import datetime
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

recovery = import_module("recovery-bench")
PATTERNS = ["smpte", "ball", "snow", "pinwheel", "colors", "spokes", "gradient", "red"]


def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def run(k, seconds, warmup):
    with tempfile.TemporaryDirectory(prefix="vapipe-live-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)]) for i in range(k)}
        proc, bus = recovery.start_job(workdir, cams)
        deadline = time.time() + 60
        while time.time() < deadline and bus.count(0, time.time(), lambda t, p: t.startswith("results/")) < k:
            time.sleep(0.1)
        time.sleep(warmup)
        start = time.time()
        time.sleep(seconds)
        end = time.time()
        with bus.lock:
            window = [(t, topic, p) for t, topic, p in bus.messages if start <= t <= end and topic.startswith("results/")]
        recovery.stop_job(proc, bus)
        for cam in cams.values():
            cam.kill()
    latencies = [p["latency_ms"]["total"] for _, _, p in window]
    seqs = {}
    for _, _, p in window:
        seqs.setdefault(p["stream_id"], []).append(p["seq"])
    gaps = sum((max(s) - min(s) + 1) - len(s) for s in seqs.values())
    sent = sum(max(s) - min(s) + 1 for s in seqs.values())
    return {"cameras": k, "results_per_s": len(window) / (end - start), "camera_fps": 30 * k,
            "p50_ms": percentile(latencies, 0.5), "p95_ms": percentile(latencies, 0.95),
            "p99_ms": percentile(latencies, 0.99), "max_ms": max(latencies) if latencies else float("nan"),
            "dropped": gaps, "dropped_pct": 100.0 * gaps / sent if sent else 0.0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cameras", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=5)
    args = ap.parse_args()
    rows = []
    for k in args.cameras:
        rows.append(run(k, args.seconds, args.warmup))
        print(rows[-1], file=sys.stderr)
    print(f"\nLive latency, {datetime.date.today()}, {os.cpu_count()} CPUs, {args.seconds:g} s per row after "
          f"{args.warmup:g} s (`/usr/bin/python3 tools/live-bench.py {' '.join(sys.argv[1:])}`)\n")
    print("| cameras | sent (frames/s) | results/s | latency p50 (ms) | p95 | p99 | max | dropped |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['cameras']} | {r['camera_fps']} | {r['results_per_s']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | "
              f"{r['p99_ms']:.0f} | {r['max_ms']:.0f} | {r['dropped']} ({r['dropped_pct']:.1f}%) |")


if __name__ == "__main__":
    main()
