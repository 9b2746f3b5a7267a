"""Live latency with several RTSP cameras: K real RTSP servers on loopback (640x360, 30 fps, H.264),
one live job classifying all of them with the shipped CNN for `--seconds`, a subscriber timing every
result. Prints, per K: results/s against what the cameras send, the capture-to-publish latency
(median, 95th and 99th percentile, max; from each result's `latency_ms.total`), and the frames the
live queues dropped (gaps in `seq`). The camera servers share the machine's cores with the pipeline.

With --files, each "camera" is a recorded clip instead (640x360, 30 fps, H.264, made with gst-launch,
long enough for the run): a live job reads a file at its own pace since stop 55 (before, as fast as it
decoded, for the live queue to drop). "sent" is then what the clips hold a second; "dropped" counts
the frames of the window's span that have no result (a paced file numbers only what it sends). With
VAPIPE_BIN=path/to/an/older/vapipe the same run measures another build.

Usage (after tools/build.sh): /usr/bin/python3 tools/live-bench.py [--cameras 2 4 8] [--seconds 20] [--files]
"""
import argparse
import datetime
import os
import subprocess
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


def make_clip(path, pattern, seconds):
    subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", f"pattern={pattern}", f"num-buffers={int(seconds * 30)}", "!",
                    "video/x-raw,width=640,height=360,framerate=30/1", "!", "x264enc", "speed-preset=veryfast",
                    "key-int-max=30", "!", "h264parse", "!", "mp4mux", "!", "filesink", f"location={path}"], check=True)


def run(k, seconds, warmup, files=False, clip_seconds=None):
    with tempfile.TemporaryDirectory(prefix="vapipe-live-") as workdir:
        if files:
            cams = {}
            for i in range(k):
                cams[f"cam{i:02d}"] = os.path.join(workdir, f"clip{i:02d}.mp4")
                make_clip(cams[f"cam{i:02d}"], PATTERNS[i % len(PATTERNS)], clip_seconds or seconds + warmup + 30)
        else:
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
            if not files:
                cam.kill()
    latencies = [p["latency_ms"]["total"] for _, _, p in window]
    seqs = {}
    for _, _, p in window:
        # A file's frames are counted by their timestamps (30 fps): a paced file numbers only what it sends.
        seqs.setdefault(p["stream_id"], []).append(round(p["pts_ms"] * 30 / 1000) if files else p["seq"])
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
    ap.add_argument("--files", action="store_true", help="recorded clips in the live job instead of RTSP cameras")
    ap.add_argument("--clip-seconds", type=float, help="--files: each clip's length (default: the run's, plus 30 s)")
    args = ap.parse_args()
    rows = []
    for k in args.cameras:
        rows.append(run(k, args.seconds, args.warmup, args.files, args.clip_seconds))
        print(rows[-1], file=sys.stderr)
    print(f"\nLive latency{' of files read at their pace' if args.files else ''}, {datetime.date.today()}, {os.cpu_count()} CPUs, {args.seconds:g} s per row after "
          f"{args.warmup:g} s (`/usr/bin/python3 tools/live-bench.py {' '.join(sys.argv[1:])}`)\n")
    print(f"| {'files' if args.files else 'cameras'} | sent (frames/s) | results/s | latency p50 (ms) | p95 | p99 | max | dropped |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['cameras']} | {r['camera_fps']} | {r['results_per_s']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | "
              f"{r['p99_ms']:.0f} | {r['max_ms']:.0f} | {r['dropped']} ({r['dropped_pct']:.1f}%) |")


if __name__ == "__main__":
    main()
