#!/usr/bin/env python3
"""A watched folder on a share that stops answering (streams[].watch_s over a hard-mounted NFS share
whose server has gone, played here by tests/e2e/hanging_share.py, a FUSE file system whose requests
all wait while it is switched off): what the job still does while its look waits, and how soon it
goes on once the share answers again.

Starts `vapipe run` on a watched folder of the share holding `--files` clips, switches the share off
once they are classified, then times: a crashed stage's restart (infer killed) while the look waits,
`vapipe status`'s "a look RUNNING FOR", a stop (SIGINT) while it waits, and, after the share is back,
`vapipe run --resume` classifying the file that came while it hung.

Then (`--scenario reload`, or both by default) a live job of `--cameras` test cameras whose config
file is on the share: the share is switched off and the job gets SIGHUP (the re-read waits on it), and
it times a crashed stage's restart and the results after it, the added camera's first result once the
share answers, and a stop while a second re-read waits. Needs root (or the fuse group) and
python3-fusepy. Prints a Markdown summary.

    /usr/bin/python3 tools/hung-share-bench.py [--files 5] [--frames 30] [--size 320x240] [--cameras 4]
                                               [--scenario folder|reload|both]
"""
import argparse
from importlib import import_module
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
many = import_module("many-files-bench")  # noqa: E402  (make_clip, free_port)
recovery = import_module("recovery-bench")  # noqa: E402  (stage_pid)
watch = import_module("watch-bench")  # noqa: E402  (read_jsonl, wait_for)
read_jsonl, wait_for = watch.read_jsonl, watch.wait_for
HANGING_SHARE = os.path.join(ROOT, "tests", "e2e", "hanging_share.py")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--size", default="320x240")
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--scenario", choices=["folder", "reload", "both"], default="both")
    ap.add_argument("--vapipe", default=os.path.join(ROOT, "build", "cli", "vapipe"))
    args = ap.parse_args()
    if args.scenario in ("folder", "both"):
        on_a_share(args, watched_folder)
    if args.scenario in ("reload", "both"):
        on_a_share(args, live_reload)


def kill_infer_and_wait_for_its_restart(run, infer):
    """SIGKILL to the job's infer stage (pid `infer`); (restarted within 60 s, seconds from the kill)."""
    killed = time.time()
    os.kill(infer, signal.SIGKILL)

    def restarted():
        try:
            return recovery.stage_pid(run.pid, "infer", timeout=0.01) not in (None, infer)
        except Exception:  # noqa: BLE001 (not there yet)
            return False
    ok = wait_for(restarted, 60)
    return ok, time.time() - killed


def on_a_share(args, scenario):
    """Runs scenario(args, work, backing, share, switch) with the FUSE share mounted."""

    work = tempfile.mkdtemp(prefix="vapipe-hung-share-bench-")
    backing, share, switch = (os.path.join(work, n) for n in ("backing", "share", "switched-off"))
    os.makedirs(backing)
    os.makedirs(share)
    fs = subprocess.Popen([sys.executable, HANGING_SHARE, backing, share, switch], stderr=subprocess.PIPE)
    try:
        if not wait_for(lambda: os.path.ismount(share), 10):
            sys.exit("cannot mount the FUSE share here (root and python3-fusepy needed)")
        scenario(args, work, backing, share, switch)
    finally:
        if os.path.exists(switch):
            os.remove(switch)
        fs.terminate()
        try:
            fs.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fs.kill()
        subprocess.run(["umount", "-l", share], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


def watched_folder(args, work, backing, share, switch):
    run = again = None
    try:
        clip = os.path.join(work, "clip.mp4")
        many.make_clip(clip, args.frames, args.size)
        for n in range(args.files):
            shutil.copyfile(clip, os.path.join(backing, f"f{n:03d}.mp4"))
        jsonl = os.path.join(work, "results.jsonl")
        metrics = f"127.0.0.1:{many.free_port()}"
        config = os.path.join(work, "job.yaml")
        with open(config, "w") as f:
            json.dump({"job": {"name": "hung-share-bench"},
                       "streams": [{"glob": "share/*.mp4", "watch_s": 1, "settle_s": 0}],
                       "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                                 "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
                       "publish": {"endpoint": f"tcp://127.0.0.1:{many.free_port()}", "wait_for_subscribers": 0,
                                   "jsonl_path": jsonl, "metrics_address": metrics}}, f)
        log_path = os.path.join(work, "run.log")
        log = open(log_path, "w")

        def log_text():
            with open(log_path, errors="replace") as f:
                return f.read()

        def ended():
            return {m["payload"]["stream_id"] for m in read_jsonl(jsonl)
                    if m["topic"].startswith("events/") and m["payload"]["event"] == "eos"}

        run = subprocess.Popen([args.vapipe, "run", config], stdout=log, stderr=subprocess.STDOUT)
        infer = recovery.stage_pid(run.pid, "infer")
        ids = {f"f{n:03d}" for n in range(args.files)}
        if not wait_for(lambda: ended() >= ids, 120):
            sys.exit("the files were not classified:\n" + log_text()[-3000:])
        open(switch, "w").close()
        off = time.time()
        wait_for(lambda: os.path.exists(switch + ".waits"), 10)
        waiting = time.time() - off
        shutil.copyfile(clip, os.path.join(backing, "late.mp4"))  # seen once the share answers
        restart_ok, restart_s = kill_infer_and_wait_for_its_restart(run, infer)

        def says_running():
            out = subprocess.run([args.vapipe, "status", metrics], capture_output=True, text=True, timeout=30).stdout
            return "a look RUNNING FOR" in out
        status_ok = wait_for(says_running, 60)
        status_s = time.time() - off
        stopped = time.time()
        run.send_signal(signal.SIGINT)
        stop_ok = wait_for(lambda: "job 'hung-share-bench' finished" in log_text(), 60)
        stop_s = time.time() - stopped
        exited_while_off = wait_for(lambda: run.poll() is not None, 5)
        hung_s = time.time() - off
        back = time.time()
        os.remove(switch)
        code = run.wait(timeout=60)
        exit_after_back_s = time.time() - back
        log.close()

        resumed = time.time()
        again = subprocess.Popen([args.vapipe, "run", config, "--resume"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        late_ok = wait_for(lambda: "late" in ended(), 60)
        late_s = time.time() - resumed
        again.send_signal(signal.SIGINT)
        again_code = again.wait(timeout=60)
        per_stream = {}
        for m in read_jsonl(jsonl):
            if m["topic"].startswith("results/"):
                per_stream.setdefault(m["payload"]["stream_id"], []).append(m["payload"]["seq"])
        whole = sum(per_stream.get(s) == list(range(args.frames)) for s in ids | {"late"})

        print(f"## A watched folder on a share that stops answering (`tools/hung-share-bench.py --files {args.files} "
              f"--frames {args.frames} --size {args.size}`)\n")
        print(f"- the share switched off once {args.files} files were classified: a look waited on it "
              f"{waiting:.2f} s later (`watch_s: 1`)")
        print(f"- infer killed while the look waited: {'restarted' if restart_ok else 'NOT restarted'} "
              f"{restart_s:.2f} s later (the job's 1 s back-off included)")
        print(f"- `vapipe status` said \"a look RUNNING FOR\" {'' if status_ok else 'NEVER, '}{status_s:.1f} s after "
              f"the share went")
        print(f"- SIGINT while the look waited: the job {'finished' if stop_ok else 'did NOT finish'} in {stop_s:.2f} s; "
              f"the process {'exited' if exited_while_off else 'had not exited'} before the share came back "
              f"({hung_s:.1f} s off in all), exit status {code}, {exit_after_back_s:.2f} s after it came back")
        print(f"- `vapipe run --resume` once it answered: the file that came while it hung "
              f"{'classified' if late_ok else 'NOT classified'} {late_s:.2f} s after the start (exit {again_code}); "
              f"{whole} of {args.files + 1} files with every frame once")
    finally:
        for p in (run, again):
            if p and p.poll() is None:
                p.kill()


def live_reload(args, work, backing, share, switch):
    jsonl = os.path.join(work, "live.jsonl")
    config = os.path.join(backing, "live.yaml")
    patterns = ["ball", "smpte", "pinwheel", "snow", "checkers-4", "circular", "zone-plate", "spokes"]

    def camera(n):
        return {"id": f"cam{n}", "uri": f"test://{patterns[n % len(patterns)]}?frames=0&live=true&fps=15&width=160&height=120"}

    def write(cameras):
        with open(config, "w") as f:
            json.dump({"job": {"name": "hung-reload-bench", "mode": "live"},
                       "streams": [camera(n) for n in range(cameras)],
                       "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                                 "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
                       "publish": {"endpoint": f"tcp://127.0.0.1:{endpoint}", "wait_for_subscribers": 0,
                                   "jsonl_path": jsonl}}, f)
    endpoint = many.free_port()
    write(args.cameras)
    log_path = os.path.join(work, "live.log")
    log = open(log_path, "w")

    def log_text():
        with open(log_path, errors="replace") as f:
            return f.read()

    def results(sid):
        return sum(m["topic"] == f"results/{sid}" for m in read_jsonl(jsonl))

    run = subprocess.Popen([args.vapipe, "run", os.path.join(share, "live.yaml")], stdout=log, stderr=subprocess.STDOUT)
    try:
        infer = recovery.stage_pid(run.pid, "infer")
        if not wait_for(lambda: all(results(f"cam{n}") >= 10 for n in range(args.cameras)), 120):
            sys.exit("the cameras gave no results:\n" + log_text()[-3000:])
        write(args.cameras + 1)  # one more camera, read once the share answers
        open(switch, "w").close()
        off = time.time()
        run.send_signal(signal.SIGHUP)
        wait_for(lambda: os.path.exists(switch + ".waits"), 10)
        waiting = time.time() - off
        before = results("cam0")
        killed = time.time()
        restart_ok, restart_s = kill_infer_and_wait_for_its_restart(run, infer)
        going_on = wait_for(lambda: results("cam0") >= before + 5, 60)
        going_on_s = time.time() - killed
        added = f"cam{args.cameras}"
        added_before_back = results(added)
        back = time.time()
        os.remove(switch)
        added_ok = wait_for(lambda: results(added) >= 1, 60)
        added_s = time.time() - back

        os.remove(switch + ".waits")
        write(args.cameras + 2)
        open(switch, "w").close()
        run.send_signal(signal.SIGHUP)
        wait_for(lambda: os.path.exists(switch + ".waits"), 10)
        stopped = time.time()
        run.send_signal(signal.SIGINT)
        stop_ok = wait_for(lambda: "job 'hung-reload-bench' finished" in log_text(), 60)
        stop_s = time.time() - stopped
        back = time.time()
        os.remove(switch)
        code = run.wait(timeout=60)
        exit_after_back_s = time.time() - back
        print(f"\n## A live job's config on a share that stops answering (`tools/hung-share-bench.py --scenario "
              f"reload --cameras {args.cameras}`)\n")
        print(f"- the share switched off and SIGHUP: the re-read waited on it {waiting:.2f} s later")
        print(f"- infer killed while the re-read waited: {'restarted' if restart_ok else 'NOT restarted'} "
              f"{restart_s:.2f} s later (1 s back-off included); cam0's results going on "
              f"{'' if going_on else 'NEVER, '}{going_on_s:.2f} s after the kill")
        print(f"- the camera the reload adds: {added_before_back} results while the share was off; its first result "
              f"{'' if added_ok else 'NEVER, '}{added_s:.2f} s after the share answered")
        print(f"- SIGINT while a second re-read waited: the job {'finished' if stop_ok else 'did NOT finish'} in "
              f"{stop_s:.2f} s; exit status {code}, {exit_after_back_s:.2f} s after the share came back")
    finally:
        if run.poll() is None:
            run.kill()
        log.close()


if __name__ == "__main__":
    main()
