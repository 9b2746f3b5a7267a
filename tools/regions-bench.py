#!/usr/bin/env python3
"""Several regions of one video: decoded once (`streams[].source`) or once per region (the same `uri`
given to each region's stream).

Makes 1280x720 30 fps H.264 clips (tools/bench.py's), then runs `vapipe run` over them with the model of
a config that tools/bench.sh wrote (its streams replaced): each clip as one stream (the whole frame),
then as N regions with one `uri` each, then as N regions of which N-1 have `source`. Prints a Markdown
table: frames classified, wall time (start-up included), classified frames per second of wall time, and
the CPU seconds of the whole job (every stage process).

    tools/bench.sh                        # once: builds, and writes build/bench/pattern_cnn.yaml
    /usr/bin/python3 tools/regions-bench.py [--clips 2] [--frames 900] [--regions 2]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from bench import make_clips  # noqa: E402  (tools/bench.py's clips)


def regions(n):
    """n vertical strips of the frame, [x, y, width, height]."""
    return [[i / n, 0, 1 / n, 1] for i in range(n)]


def streams_for(mode, clips, n):
    streams = []
    for c, path in enumerate(clips):
        if mode == "whole":
            streams.append({"id": f"clip{c}", "uri": path})
            continue
        for r, roi in enumerate(regions(n)):
            entry = {"id": f"clip{c}-r{r}", "roi": roi}
            if mode == "source" and r > 0:
                entry["source"] = f"clip{c}-r0"
            else:
                entry["uri"] = path
            streams.append(entry)
    return streams


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", type=int, default=2)
    ap.add_argument("--frames", type=int, default=900, help="frames per clip (30 fps)")
    ap.add_argument("--regions", type=int, default=2)
    ap.add_argument("--config", default=os.path.join(ROOT, "build", "bench", "pattern_cnn.yaml"),
                    help="a config tools/bench.sh wrote: its model, batching and stages are used")
    ap.add_argument("--vapipe", default=os.path.join(ROOT, "build", "cli", "vapipe"))
    args = ap.parse_args()
    if not os.path.exists(args.config):
        sys.exit(f"{args.config} is missing: run tools/bench.sh first (it writes the configs and the model)")
    work = os.path.join(ROOT, "build", "bench", "regions")
    clips = make_clips(os.path.join(work, "clips"), args.clips, args.frames)
    with open(args.config) as f:
        template = json.load(f)
    rows = []
    for mode in ("whole", "uri", "source"):
        config = json.loads(json.dumps(template))
        config["streams"] = streams_for(mode, clips, args.regions)
        config["job"]["name"] = f"regions-{mode}"
        config["job"]["summary_path"] = os.path.join(work, f"{mode}-summary.json")
        path = os.path.join(work, f"{mode}.yaml")
        with open(path, "w") as f:
            json.dump(config, f, indent=1)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        proc = subprocess.run([args.vapipe, "run", path], capture_output=True, text=True)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            sys.exit(f"{mode}: vapipe run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(config["job"]["summary_path"]) as f:
            frames = json.load(f)["frames"]
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rows.append((mode, len(config["streams"]), frames, wall, cpu))
        print(f"{mode}: {frames} frames in {wall:.1f} s, {cpu:.1f} CPU s", file=sys.stderr)
    what = {"whole": "each clip whole (1 stream)",
            "uri": f"{args.regions} regions, each with the clip's `uri` (decoded {args.regions}x)",
            "source": f"{args.regions} regions, {args.regions - 1} with `source` (decoded once)"}
    print(f"{args.clips} clips of {args.frames} frames, 1280x720 H.264; model from {os.path.basename(args.config)}\n")
    print("| streams | stream count | frames classified | wall s | frames/s | CPU s (all stages) | CPU ms per frame |")
    print("|---|---|---|---|---|---|---|")
    for mode, count, frames, wall, cpu in rows:
        print(f"| {what[mode]} | {count} | {frames} | {wall:.1f} | {frames / wall:.0f} | {cpu:.1f} | "
              f"{1000 * cpu / frames:.2f} |")


if __name__ == "__main__":
    main()
