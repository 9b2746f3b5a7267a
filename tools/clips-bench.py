"""What clips of segments (publish.segments_clips) cost ingest: K real RTSP cameras on loopback
(640x360, 30 fps, H.264 from x264, a key frame every 15 frames), one live job with segments and their
pictures, run once without clips and once with them. The patterns do not change, so each camera has
one segment from its first frames to the job's end, and its clip is being written all along: every
camera's compressed frames go to a muxer of their own the whole time the CPU is measured. Prints,
per K and run: ingest's CPU (% of one core, from /proc over `--seconds` after a warm-up), its
resident memory at the end (and its peak), the clips said once the job stopped (written, failed),
their size and length, and the time from the job's stop (SIGINT) to the last clip message.

With --bframes the cameras send B-frames (2 between P-frames, H.264 main profile), whose clips need
decoding times worked out from RTP's presentation times (stages/ingest/decoding_times.h).

Usage (after tools/build.sh): /usr/bin/python3 tools/clips-bench.py [--cameras 1 4] [--seconds 20] [--bframes]
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


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid):
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024
    return found.get("VmRSS", 0), found.get("VmHWM", 0)


BFRAMES = "key-int-max=15 bframes=2 ! video/x-h264,profile=main"


def run(k, clips, seconds, warmup=4, bframes=False):
    with tempfile.TemporaryDirectory(prefix="vapipe-clips-") as workdir:
        cams = {f"cam{i:02d}": recovery.Camera(PATTERNS[i % len(PATTERNS)], x264_options=BFRAMES if bframes else None)
                for i in range(k)}
        publish = {"segments_min_frames": 5, "segments_pictures_dir": os.path.join(workdir, "pictures")}
        if clips:
            publish.update({"segments_clips": True, "segments_clip_pre_s": 2, "segments_clip_max_s": 3600})
        proc, bus = recovery.start_job(workdir, cams, publish=publish)
        ingest = recovery.stage_pid(proc.pid, "ingest")
        deadline = time.time() + 60
        while time.time() < deadline and bus.count(0, time.time(), lambda t, p: t.startswith("results/")) < k:
            time.sleep(0.1)
        time.sleep(warmup)
        start, cpu0 = time.time(), cpu_seconds(ingest)
        time.sleep(seconds)
        end, cpu1 = time.time(), cpu_seconds(ingest)
        rss, peak = memory_mb(ingest)
        stopped = time.time()
        recovery.stop_job(proc, bus)
        clip_messages = [(t, p) for t, topic, p in list(bus.messages)
                         if topic.startswith("segments/") and p.get("event") == "clip"]
        said = [p for t, p in clip_messages]
        last_said_s = max((t for t, p in clip_messages), default=stopped) - stopped
        for cam in cams.values():
            cam.kill()
        written = [p for p in said if p["clip"]]
        sizes = [os.path.getsize(p["clip"]) / 1e6 for p in written if os.path.exists(p["clip"])]
        lengths = [p["duration_s"] for p in written]
        return {"cpu": 100 * (cpu1 - cpu0) / (end - start), "rss": rss, "peak": peak, "written": len(written),
                "failed": len(said) - len(written), "mb": sum(sizes) / max(1, len(sizes)),
                "length": (min(lengths), max(lengths)) if lengths else None, "said_s": last_said_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--bframes", action="store_true", help="cameras that send B-frames")
    args = ap.parse_args()
    print(f"# clips-bench {datetime.date.today()}: 640x360 30 fps H.264 cameras"
          f"{' with B-frames' if args.bframes else ''}, {args.seconds:g} s measured, "
          "one clip per camera written all along (pre-roll 2 s)")
    print("| cameras | clips | ingest CPU (% of a core) | ingest RSS / peak (MB) | clips written (failed) | "
          "MB per clip | clip length (s) | last clip said after the stop (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for k in args.cameras:
        for clips in (False, True):
            r = run(k, clips, args.seconds, bframes=args.bframes)
            length = f"{r['length'][0]:.2f} to {r['length'][1]:.2f}" if r["length"] else "-"
            said = f"{r['said_s']:.2f}" if clips else "-"
            print(f"| {k} | {'on' if clips else 'off'} | {r['cpu']:.1f} | {r['rss']:.0f} / {r['peak']:.0f} | "
                  f"{r['written']} ({r['failed']}) | {r['mb']:.2f} | {length} | {said} |", flush=True)


if __name__ == "__main__":
    main()
