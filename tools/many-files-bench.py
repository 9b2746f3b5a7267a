#!/usr/bin/env python3
"""An archive folder of many files: what ingest holds while it reads them, with `ingest.max_open_streams`
at each value given (0: every file at once, as before it existed), and `ingest.decoder_threads` at each
value given (0: auto, one CPU's share per file; 16: what each decoder takes by itself on a 16-CPU machine).

Makes one short H.264 clip and copies it N times into a folder, then runs `vapipe run` over the folder
(`glob:`) with the shipped CNN, once per limit. While each job runs, samples the ingest process every
0.2 s: its open files, threads and resident memory; and the size of its frame pool in /dev/shm. Prints
a Markdown table: the peaks, the wall time and the job's exit status and result count.

    /usr/bin/python3 tools/many-files-bench.py [--files 300] [--frames 30] [--limits 0,64,16]
        [--size 320x240] [--decoder-threads 0,16]
        [--open-files SOFT]   # run the jobs under this limit of open files (soft and hard), as a shell's 1024
"""
import argparse
from importlib import import_module
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
recovery = import_module("recovery-bench")  # noqa: E402  (its stage_pid: a job's stage process)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_clip(path, frames, size):
    width, height = size.split("x")
    subprocess.run(f"gst-launch-1.0 -q videotestsrc pattern=ball num-buffers={frames} "
                   f"! video/x-raw,width={width},height={height},framerate=30/1 "
                   f"! x264enc speed-preset=veryfast key-int-max=30 "
                   f"! h264parse ! mp4mux ! filesink location={path}", shell=True, check=True)


def sample(pid):
    """(open files, threads, RSS in MB) of process `pid`, or None once it is gone."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        threads = len(os.listdir(f"/proc/{pid}/task"))
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024
        return fds, threads, rss
    except (OSError, StopIteration):
        return None


def run_job(work, folder, limit, threads, vapipe, open_files):
    name = f"{limit}-{threads}"
    out = os.path.join(work, f"results-{name}.jsonl")
    config = os.path.join(work, f"job-{name}.yaml")
    with open(config, "w") as f:
        json.dump({"job": {"name": f"many-{name}", "max_restarts": 0},
                   "streams": [{"glob": os.path.join(folder, "*.mp4")}],
                   "ingest": {"max_open_streams": limit, "decoder_threads": threads},
                   "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                             "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
                   "publish": {"endpoint": f"tcp://127.0.0.1:{free_port()}", "jsonl_path": out, "wait_for_subscribers": 0}}, f)
    limit_files = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))) if open_files else None
    start = time.time()
    log_path = os.path.join(work, f"job-{name}.log")
    log = open(log_path, "w")  # a file, not a pipe: a job's log outgrows a pipe's buffer and would block it
    proc = subprocess.Popen([vapipe, "run", config], stdout=subprocess.DEVNULL, stderr=log, text=True,
                            preexec_fn=limit_files)
    peak = [0, 0, 0.0]
    pool_mb = 0.0
    ingest = None
    while proc.poll() is None:
        if ingest is None:
            ingest = recovery.stage_pid(proc.pid, "ingest", timeout=0.2)
        if ingest is not None:
            s = sample(ingest)
            if s:
                peak = [max(a, b) for a, b in zip(peak, s)]
        for name in os.listdir("/dev/shm"):
            if name.startswith(f"vapipe-{proc.pid}-") and name.endswith("frames-0"):
                try:
                    pool_mb = max(pool_mb, os.path.getsize(os.path.join("/dev/shm", name)) / 1e6)
                except OSError:
                    pass
        time.sleep(0.2)
    wall = time.time() - start
    log.close()
    with open(log_path) as f:
        err = f.read()
    results = 0
    if os.path.exists(out):
        with open(out) as f:
            results = sum('"results/' in line for line in f)
    return {"limit": limit, "decoder_threads": threads, "code": proc.returncode, "wall_s": wall, "results": results, "fds": peak[0],
            "threads": peak[1], "rss_mb": peak[2], "pool_mb": pool_mb,
            "failed": err.count("failed:"), "tail": err[-600:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--frames", type=int, default=30, help="frames per file (30 fps)")
    ap.add_argument("--limits", default="0,64,16", help="ingest.max_open_streams values, comma-separated")
    ap.add_argument("--decoder-threads", default="0", help="ingest.decoder_threads values, comma-separated")
    ap.add_argument("--size", default="320x240", help="the clip's frame size")
    ap.add_argument("--open-files", type=int, default=0, help="RLIMIT_NOFILE for the jobs (0: this shell's)")
    ap.add_argument("--vapipe", default=os.path.join(ROOT, "build", "cli", "vapipe"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="vapipe-many-files-")
    try:
        folder = os.path.join(work, "folder")
        os.makedirs(folder)
        first = os.path.join(folder, "clip-00000.mp4")
        make_clip(first, args.frames, args.size)
        for n in range(1, args.files):
            shutil.copyfile(first, os.path.join(folder, f"clip-{n:05d}.mp4"))
        rows = []
        for limit in [int(x) for x in args.limits.split(",")]:
            for threads in [int(x) for x in args.decoder_threads.split(",")]:
                r = run_job(work, folder, limit, threads, args.vapipe, args.open_files)
                rows.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "tail"}), file=sys.stderr)
                if r["code"] not in (0,):
                    print(r["tail"], file=sys.stderr)
        print(f"\n{args.files} files of {args.frames} frames ({args.size} H.264), shipped CNN, {os.cpu_count()} CPUs"
              + (f", open files limited to {args.open_files}" if args.open_files else "") + "\n")
        print("| max_open_streams | decoder_threads | exit | results | wall (s) | ingest open files (peak) "
              "| ingest threads (peak) | ingest RSS (MB, peak) | frame pool in /dev/shm (MB) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['limit'] or 'all (0)'} | {r['decoder_threads'] or 'auto (0)'} | {r['code']} | {r['results']} | {r['wall_s']:.1f} | {r['fds']} | "
                  f"{r['threads']} | {r['rss_mb']:.0f} | {r['pool_mb']:.0f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
