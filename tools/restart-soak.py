"""Many crashes in a row: does anything pile up? A live job of two test cameras on two lanes
(`lanes_per_device: 2`, `job.max_restarts` high) runs for `--rounds` rounds; each round SIGKILLs one
stage of lane 1 (infer, preprocess, batch and ingest in turn; publish every `--publish-every` rounds)
and waits for lane 1's camera's results to come back. Printed per round: seconds from the kill to the
camera's first result again, lane 0's camera's results per second meanwhile; and at the start and the
end: the job's shared memory names in /dev/shm, the supervisor's and publish's resident memory and
open file descriptors. Everything but the stage that was killed is the same process throughout.

Usage (after tools/build.sh): /usr/bin/python3 tools/restart-soak.py [--rounds 20]
Needs Debian's python3-zmq. Prints Markdown; --json PATH writes the figures.
"""
import argparse
import datetime
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module  # noqa: E402

recovery = import_module("recovery-bench")


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def shm_names(supervisor):
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"vapipe-{supervisor}-"))


def snapshot(supervisor):
    publish = recovery.stage_pid(supervisor, "publish")
    return {"shm": shm_names(supervisor), "supervisor_rss_kb": status_kb(supervisor, "VmRSS"),
            "supervisor_fds": fds(supervisor), "publish_pid": publish,
            "publish_rss_kb": status_kb(publish, "VmRSS"), "publish_fds": fds(publish)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--publish-every", type=int, default=5, help="also kill publish every N rounds (0: never)")
    ap.add_argument("--json")
    args = ap.parse_args()
    live = "test://{}?frames=0&live=true&fps=30&width=320&height=240"
    rows = []
    with tempfile.TemporaryDirectory(prefix="vapipe-restart-soak-") as workdir:
        cams = {"door": live.format("smpte"), "yard": live.format("pinwheel")}  # lanes 0 and 1
        proc, bus = recovery.start_job(workdir, cams, lanes_per_device=2,
                                       job={"name": "restart-soak", "mode": "live", "max_restarts": 100000})
        if bus.first(0, recovery.is_result("yard"), timeout=60) is None:
            sys.exit("no result:\n" + proc.stderr.read()[-2000:])
        time.sleep(2)
        before = snapshot(proc.pid)
        order = ["infer", "preprocess", "batch", "ingest"]
        for i in range(args.rounds):
            if args.publish_every and (i + 1) % args.publish_every == 0:
                name, lane = "publish", 0
            else:
                name, lane = order[i % len(order)], 1
            pid = recovery.stage_pid(proc.pid, name, lane=lane)
            killed = time.time()
            os.kill(pid, signal.SIGKILL)
            back = bus.first(killed + 0.05, recovery.is_result("yard"), timeout=120)
            door = bus.count(killed, back, recovery.is_result("door")) / (back - killed) if back else None
            rows.append({"killed": f"{name}[{lane}]" if name != "publish" else "publish",
                         "to_result_s": back - killed if back else None, "other_lane_results_per_s": door})
            print(f"round {i + 1}: {rows[-1]}", file=sys.stderr)
            time.sleep(1)
        after = snapshot(proc.pid)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
        left = shm_names(proc.pid)
        bus.close()
    print(f"\nRestart soak, {datetime.date.today()}, {os.cpu_count()} CPUs, {args.rounds} crashes "
          f"(`{' '.join(['/usr/bin/python3', 'tools/restart-soak.py'] + sys.argv[1:])}`)\n")
    print("| round | killed | kill -> lane 1's camera's first result again (s) | lane 0's camera meanwhile (results/s) |")
    print("|---|---|---|---|")
    for i, r in enumerate(rows):
        to = f"{r['to_result_s']:.2f}" if r["to_result_s"] is not None else "never"
        other = f"{r['other_lane_results_per_s']:.1f}" if r["other_lane_results_per_s"] is not None else "-"
        print(f"| {i + 1} | {r['killed']} | {to} | {other} |")
    print("\n| | before the first crash | after the last |\n|---|---|---|")
    print(f"| shared memory names of the job | {len(before['shm'])} | {len(after['shm'])} |")
    print(f"| supervisor RSS (kB), open fds | {before['supervisor_rss_kb']}, {before['supervisor_fds']} | "
          f"{after['supervisor_rss_kb']}, {after['supervisor_fds']} |")
    print(f"| publish RSS (kB), open fds (pid) | {before['publish_rss_kb']}, {before['publish_fds']} "
          f"({before['publish_pid']}) | {after['publish_rss_kb']}, {after['publish_fds']} ({after['publish_pid']}) |")
    print(f"\nexit status {code}; shared memory left after exit: {len(left)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": str(datetime.date.today()), "rounds": rows, "before": before, "after": after,
                       "exit": code, "left": left}, f, indent=1)


if __name__ == "__main__":
    main()
