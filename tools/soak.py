"""Memory over a long live run: does any stage grow? Two live RTSP cameras (real servers on loopback)
for `--minutes`; one of them is killed and started again every `--outage-every` seconds, so ingest
rebuilds its pipeline (reconnects) many times. Samples each stage's resident memory (VmRSS) every
`--sample` seconds after a warm-up, and prints, per stage: RSS at the start and the end of the window,
the slope of a least-squares line through the samples (kB per minute), and its threads and open file
descriptors (first sample, most, last sample: a camera down at a sample holds fewer).

With `--regions N`, each camera is also classified as N regions (streams with `source`: decoded once,
each frame copied per region).

With `--loop-files N`, the job reads N short clips (`--clip-frames`, 30 fps, 320x240 H.264) with
`streams[].loop` instead of the cameras: each loop builds a new decoding pipeline, so a 0.5 s clip
makes ingest build and tear down 120 pipelines a minute per file, and a leak per pipeline shows fast.

Usage (after tools/build.sh): /usr/bin/python3 tools/soak.py [--minutes 5] [--outage-every 10] [--regions 0]
                                                        [--loop-files 0 --clip-frames 15]
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

recovery = import_module("recovery-bench")


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def threads_and_fds(pid):
    """(threads, open file descriptors) of a process, or None once it is gone: a leak of either shows
    over many reconnections as surely as one of memory."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")), len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def slope_per_minute(samples):
    """Least-squares slope of (t seconds, kB) in kB per minute."""
    n = len(samples)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in samples) / n
    mv = sum(v for _, v in samples) / n
    den = sum((t - mt) ** 2 for t, _ in samples)
    return 60.0 * sum((t - mt) * (v - mv) for t, v in samples) / den if den else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--outage-every", type=float, default=10, help="seconds between camera kills (0: none)")
    ap.add_argument("--warmup", type=float, default=20)
    ap.add_argument("--sample", type=float, default=5)
    ap.add_argument("--regions", type=int, default=0, help="regions of each camera, as streams with `source`")
    ap.add_argument("--loop-files", type=int, default=0, help="looping clips instead of the cameras")
    ap.add_argument("--clip-frames", type=int, default=15, help="frames of each looping clip, at 30 fps")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.loop_files:
        args.outage_every = 0
    with tempfile.TemporaryDirectory(prefix="vapipe-soak-") as workdir:
        if args.loop_files:
            cams = {}
            members = []
            for i in range(args.loop_files):
                clip = os.path.join(workdir, f"loop{i}.mp4")
                subprocess.run(["gst-launch-1.0", "-q", "videotestsrc", f"pattern={['ball', 'smpte', 'pinwheel'][i % 3]}",
                                f"num-buffers={args.clip_frames}", "!",
                                "video/x-raw,width=320,height=240,framerate=30/1", "!", "x264enc", "key-int-max=15",
                                "!", "h264parse", "!", "mp4mux", "!", "filesink", f"location={clip}"], check=True)
                members.append({"id": f"loop{i}", "uri": clip, "loop": True})
        else:
            cams = {"door": recovery.Camera("smpte"), "yard": recovery.Camera("pinwheel")}
            members = [{"id": f"{sid}-r{r}", "source": sid, "roi": [r / args.regions, 0, 1 / args.regions, 1]}
                       for sid in cams for r in range(args.regions)]
        log_path = os.path.join(workdir, "job.log")
        proc, bus = recovery.start_job(workdir, cams, members, log_path=log_path)
        stages = {name: recovery.stage_pid(proc.pid, name) for name in ("ingest", "preprocess", "batch", "infer", "publish")}
        samples = {name: [] for name in stages}
        handles = {name: [] for name in stages}  # (threads, fds) at each sample
        start = time.time()
        end = start + args.warmup + args.minutes * 60
        next_kill = start + args.warmup + args.outage_every if args.outage_every > 0 else float("inf")
        outages = 0
        next_sample = start + args.warmup
        while time.time() < end:
            now = time.time()
            if now >= next_kill:
                cams["yard"].kill()
                time.sleep(1.0)
                cams["yard"] = recovery.Camera("pinwheel", cams["yard"].port)
                outages += 1
                next_kill = now + args.outage_every
            if now >= next_sample:
                for name, pid in stages.items():
                    kb = rss_kb(pid)
                    if kb is not None:
                        samples[name].append((now - start, kb))
                    counts = threads_and_fds(pid)
                    if counts is not None:
                        handles[name].append(counts)
                next_sample += args.sample
            time.sleep(min(0.5, max(0.0, min(next_kill, next_sample) - time.time())))
        results_total = bus.count(0, time.time(), lambda topic, p: topic.startswith("results/"))
        resumed = bus.count(0, time.time(), lambda topic, p: topic == "events/yard" and p["event"] == "resumed")
        region_resumed = bus.count(0, time.time(), lambda topic, p: topic.startswith("events/yard-r") and
                                   p["event"] == "resumed")
        loops = bus.count(0, time.time(), lambda topic, p: topic.startswith("events/") and
                          p["event"] == "changed" and "looped" in p.get("message", ""))
        alive = proc.poll() is None
        recovery.stop_job(proc, bus)
        with open(log_path) as log:
            log_tail = log.read()[-3000:]
        for cam in cams.values():
            cam.kill()
    if not alive:
        sys.exit("the job ended during the soak:\n" + log_tail)
    what = (f"{args.loop_files} looping clips of {args.clip_frames} frames ({loops} loops, each a new pipeline)"
            if args.loop_files else "")
    print(f"\nSoak, {datetime.date.today()}, {args.minutes:g} min after {args.warmup:g} s of warm-up, " + (what or "two live RTSP "
          f"cameras{f' with {args.regions} regions each (`source`)' if args.regions else ''}, one killed every "
          f"{args.outage_every:g} s ({outages} outages, {resumed} `resumed` events"
          f"{f', {region_resumed} for its regions' if args.regions else ''})") + ", "
          f"{results_total} results (`/usr/bin/python3 tools/soak.py {' '.join(sys.argv[1:])}`)\n")
    print("| stage | RSS at start (MB) | RSS at end (MB) | slope (kB/min) | threads (start, most, end) | open files "
          "(start, most, end) |\n|---|---|---|---|---|---|")
    out = {}
    for name, s in samples.items():
        if not s:
            continue
        slope = slope_per_minute(s)
        h = handles[name] or [(0, 0)]
        threads, fds = [t for t, _ in h], [f for _, f in h]
        out[name] = {"start_kb": s[0][1], "end_kb": s[-1][1], "slope_kb_per_min": slope,
                     "threads": [threads[0], max(threads), threads[-1]], "fds": [fds[0], max(fds), fds[-1]]}
        print(f"| {name} | {s[0][1] / 1024:.1f} | {s[-1][1] / 1024:.1f} | {slope:+.0f} | "
              f"{threads[0]}, {max(threads)}, {threads[-1]} | {fds[0]}, {max(fds)}, {fds[-1]} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": str(datetime.date.today()), "outages": outages, "loops": loops, "resumed": resumed, "stages": out,
                       "samples": samples}, f, indent=1)


if __name__ == "__main__":
    main()
