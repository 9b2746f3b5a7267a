#!/usr/bin/env python3
"""How fast an archive is scanned when not every frame is classified: every frame, `ingest.max_fps`
(decodes every frame, classifies a sample) and `ingest.keyframes_only` (decodes only key frames).

Makes long 1280x720 30 fps H.264 clips (tools/bench.py's: x264 veryfast, 3 Mbit/s, a key frame at most
every 60 frames, moving test patterns), then runs `vapipe run` over them once per mode with the model of a config that
tools/bench.sh wrote (its streams replaced), and prints a Markdown table: frames classified, wall time
(start-up included), and video frames scanned per second of wall time.

    tools/bench.sh                        # once: builds, and writes build/bench/resnet18.yaml
    /usr/bin/python3 tools/sampling-bench.py [--clips 4] [--frames 3000] [--modes all,max_fps=1,keyframes_only]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from bench import make_clips  # noqa: E402  (tools/bench.py's clips, longer)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=4)
    ap.add_argument("--frames", type=int, default=3000, help="frames per clip (30 fps)")
    ap.add_argument("--config", default=os.path.join(ROOT, "build", "bench", "resnet18.yaml"),
                    help="a config tools/bench.sh wrote: its model, batching and stages are used")
    ap.add_argument("--modes", default="all,max_fps=1,keyframes_only")
    ap.add_argument("--vapipe", default=os.path.join(ROOT, "build", "cli", "vapipe"))
    args = ap.parse_args()
    if not os.path.exists(args.config):
        sys.exit(f"{args.config} is missing: run tools/bench.sh first (it writes the configs and the model)")
    work = os.path.join(ROOT, "build", "bench", "sampling")
    clips = make_clips(os.path.join(work, "clips"), args.clips, args.frames)
    with open(args.config) as f:
        template = json.load(f)
    video_frames = args.clips * args.frames
    rows = []
    for mode in args.modes.split(","):
        config = json.loads(json.dumps(template))
        name = mode.replace("=", "-")
        config["streams"] = [{"id": f"clip{i}", "uri": p} for i, p in enumerate(clips)]
        config["job"]["name"] = f"sampling-{name}"
        config["job"]["summary_path"] = os.path.join(work, f"{name}-summary.json")
        ingest = config.setdefault("ingest", {})
        if mode.startswith("max_fps="):
            ingest["max_fps"] = float(mode.split("=", 1)[1])
        elif mode == "keyframes_only":
            ingest["keyframes_only"] = True
        elif mode != "all":
            sys.exit(f"unknown mode {mode}")
        path = os.path.join(work, f"{name}.yaml")
        with open(path, "w") as f:
            json.dump(config, f, indent=1)
        start = time.monotonic()
        proc = subprocess.run([args.vapipe, "run", path], capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            sys.exit(f"{mode}: vapipe run exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        with open(config["job"]["summary_path"]) as f:
            summary = json.load(f)
        rows.append((mode, summary["frames"], wall, video_frames / wall))
        print(f"{mode}: {summary['frames']} frames classified in {wall:.1f} s", file=sys.stderr)
    model = os.path.basename(template["infer"]["model"])
    print(f"\n{args.clips} clips x {args.frames} frames (1280x720 30 fps H.264, {video_frames / 30:.0f} s of video), "
          f"model {model}\n")
    print("| mode | frames classified | wall s | video frames/s (scanned / wall) |")
    print("|---|---|---|---|")
    for mode, frames, wall, rate in rows:
        print(f"| {mode} | {frames:,} | {wall:.1f} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
