#!/usr/bin/env python3
"""A watched archive folder (streams[].watch_s): how soon a file that lands is classified, and what a
long-running watch holds as files accumulate.

Makes one short H.264 clip, starts `vapipe run` on an empty folder with a `glob:` watched every
`--watch-s` seconds, then moves a copy of the clip into the folder (a rename: it lands whole) every
`--every` seconds, `--files` times; then `--burst` copies at once. Each file's arrival is timed here;
its `started` event and its last result's publication come from the results file (`time_unix_ms`, and
`capture_unix_ms` plus `latency_ms.total`), so the figures do not depend on when the file is flushed.
Samples each process's resident memory at the start and after the files. Prints a Markdown summary.
Also times one look over a folder of `--listed` files (`vapipe validate`, which expands the pattern as a
look does).

    /usr/bin/python3 tools/watch-bench.py [--files 20] [--every 1.0] [--burst 200] [--watch-s 1]
        [--frames 30] [--size 320x240] [--listed 10000]
"""
import argparse
from importlib import import_module
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
many = import_module("many-files-bench")  # noqa: E402  (make_clip, sample, free_port)
recovery = import_module("recovery-bench")  # noqa: E402  (stage_pid)

STAGES = ["ingest", "preprocess", "batch", "infer", "publish"]


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def rss_of(pids):
    return {name: (many.sample(pid) or (0, 0, 0))[2] for name, pid in pids.items()}


def wait_for(predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--burst", type=int, default=200)
    ap.add_argument("--watch-s", type=float, default=1.0)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--listed", type=int, default=10000)
    ap.add_argument("--vapipe", default=os.path.join(ROOT, "build", "cli", "vapipe"))
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="vapipe-watch-bench-")
    try:
        clip = os.path.join(work, "clip.mp4")
        many.make_clip(clip, args.frames, args.size)
        folder = os.path.join(work, "nvr")
        incoming = os.path.join(work, "incoming")  # same file system: a rename lands a file whole
        os.makedirs(folder)
        os.makedirs(incoming)
        jsonl = os.path.join(work, "results.jsonl")
        config = os.path.join(work, "job.yaml")
        with open(config, "w") as f:
            json.dump({"job": {"name": "watch-bench"},
                       "streams": [{"glob": "nvr/**/*.mp4", "watch_s": args.watch_s, "settle_s": 0}],  # renamed in: whole
                       "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                                 "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
                       "publish": {"endpoint": f"tcp://127.0.0.1:{many.free_port()}", "wait_for_subscribers": 0,
                                   "jsonl_path": jsonl}}, f)
        log = open(os.path.join(work, "run.log"), "w")
        run = subprocess.Popen([args.vapipe, "run", config], stdout=log, stderr=subprocess.STDOUT)
        pids = {name: recovery.stage_pid(run.pid, name) for name in STAGES}
        pids["run"] = run.pid
        time.sleep(2)  # opened and idle
        idle = rss_of(pids)

        def land(name, day):
            os.makedirs(os.path.join(folder, day), exist_ok=True)
            tmp = os.path.join(incoming, name + ".mp4")
            shutil.copyfile(clip, tmp)
            at = time.time()
            os.rename(tmp, os.path.join(folder, day, name + ".mp4"))
            return f"{day}-{name}", at

        arrived = {}
        for n in range(args.files):
            sid, at = land(f"one{n:03d}", "steady")
            arrived[sid] = at
            time.sleep(args.every)
        ended = lambda ids: {m["payload"]["stream_id"] for m in read_jsonl(jsonl)  # noqa: E731
                             if m["topic"].startswith("events/") and m["payload"]["event"] == "eos"} >= set(ids)
        wait_for(lambda: ended(arrived), 120)
        after_steady = rss_of(pids)
        burst_start = time.time()
        burst = {}
        for n in range(args.burst):
            sid, at = land(f"many{n:04d}", "burst")
            burst[sid] = at
        wait_for(lambda: ended(burst), 600)
        burst_s = time.time() - burst_start
        after_burst = rss_of(pids)
        run.send_signal(signal.SIGINT)
        code = run.wait(timeout=120)
        log.close()

        messages = read_jsonl(jsonl)
        started, last_result, results = {}, {}, {}
        for m in messages:
            p = m["payload"]
            if m["topic"].startswith("events/") and p["event"] == "started":
                started[p["stream_id"]] = p["time_unix_ms"] / 1000
            elif m["topic"].startswith("results/"):
                done = (p["capture_unix_ms"] + p["latency_ms"]["total"]) / 1000
                last_result[p["stream_id"]] = max(last_result.get(p["stream_id"], 0), done)
                results[p["stream_id"]] = results.get(p["stream_id"], 0) + 1

        def spread(values):
            values = sorted(values)
            return f"{values[0]:.2f} / {statistics.median(values):.2f} / {values[-1]:.2f}"

        to_start = [started[s] - arrived[s] for s in arrived if s in started]
        to_end = [last_result[s] - arrived[s] for s in arrived if s in last_result]
        burst_end = max(last_result[s] for s in burst if s in last_result) - burst_start if burst else 0
        whole = sum(results.get(s) == args.frames for s in list(arrived) + list(burst))
        print(f"## A watched folder (`tools/watch-bench.py --files {args.files} --every {args.every} --burst "
              f"{args.burst} --watch-s {args.watch_s} --frames {args.frames} --size {args.size}`)\n")
        print(f"- exit status {code}; {whole} of {len(arrived) + len(burst)} files with all {args.frames} results, "
              f"{sum(results.values())} results in all")
        print(f"- one file every {args.every} s, watched every {args.watch_s} s: landed to `started` "
              f"{spread(to_start)} s, to its last result {spread(to_end)} s (least / median / most, {len(to_start)} files)")
        print(f"- {args.burst} files at once: every result {burst_end:.1f} s after the first landed "
              f"(waited {burst_s:.1f} s here, results file polled)")
        print("- resident memory (MB), idle / after the steady files / after the burst: " +
              ", ".join(f"{name} {idle[name]:.0f} / {after_steady[name]:.0f} / {after_burst[name]:.0f}"
                        for name in ["run"] + STAGES))

        # One look's cost: the pattern over a folder of many files, as a look expands it.
        listed = os.path.join(work, "listed")
        for d in range(args.listed // 100):
            os.makedirs(os.path.join(listed, f"d{d:03d}"))
            for n in range(100):
                open(os.path.join(listed, f"d{d:03d}", f"f{n:03d}.mp4"), "w").close()
        with open(os.path.join(work, "listed.yaml"), "w") as f:
            json.dump({"streams": [{"glob": "listed/**/*.mp4", "watch_s": 10}],
                       "infer": {"model": "m.pt", "labels": "m.txt"}}, f)
        times = []
        for _ in range(3):
            t = time.time()
            subprocess.run([args.vapipe, "validate", os.path.join(work, "listed.yaml")], capture_output=True, check=False)
            times.append(time.time() - t)
        print(f"- a look over {args.listed} files in {args.listed // 100} folders (`vapipe validate`, which "
              f"expands the pattern as a look does, start-up included): {', '.join(f'{t:.2f}' for t in times)} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
