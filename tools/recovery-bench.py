"""How long vapipe takes to recover, measured on this machine with real processes (default settings):

- camera outage: the RTSP server of one of two live cameras is killed (SIGKILL) and started again on
  the same port `--down` seconds later. Printed: kill -> its `reconnecting` event; server back -> the
  camera's first result again; the other camera's results per second meanwhile.
- stage crash: infer of lane 1 is killed (SIGKILL) in a live job of two cameras on two lanes
  (`lanes_per_device: 2`); the supervisor restarts that lane. Printed: kill -> the lane's camera's
  `resumed` event and its first result again; the other lane's camera's results per second meanwhile.
- publish crash: publish is killed; the supervisor restarts it alone. Printed: kill -> the first
  result on the bus again (the subscriber reconnects by itself).

Usage (after tools/build.sh): /usr/bin/python3 tools/recovery-bench.py [--rounds 3] [--down 3]
Needs Debian's python3-zmq. Prints a Markdown table and writes JSON with --json PATH.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAPIPE = os.environ.get("VAPIPE_BIN") or os.path.join(ROOT, "build", "cli", "vapipe")  # another build: VAPIPE_BIN
RTSP_SERVER = os.path.join(ROOT, "build", "tests", "vapipe_rtsp_test_server")


class Camera:
    def __init__(self, pattern, port=None, x264_options=None):
        """The test server at 640x360; `x264_options` (its GOP, or "key-int-max=15 bframes=2 !
        video/x-h264,profile=main" for B-frames) as tests/fakes/rtsp_test_server_main.cpp takes them."""
        self.pattern, self.port = pattern, port or free_port()
        args = [RTSP_SERVER, str(self.port), pattern, "640", "360"] + ([x264_options] if x264_options else [])
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.uri = self.proc.stdout.readline().strip()
        if not self.uri.startswith("rtsp://"):
            sys.exit(f"RTSP test server did not start on port {self.port}")

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


class Bus:
    """Every message on the result bus, with the time it arrived."""

    def __init__(self, endpoint):
        self.messages, self.lock = [], threading.Lock()
        self.sock = zmq.Context.instance().socket(zmq.SUB)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, 200)
        self.sock.connect(endpoint)
        self.sock.setsockopt_string(zmq.SUBSCRIBE, "")
        self.running = True
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while self.running:
            try:
                topic, payload = self.sock.recv_multipart()
            except zmq.Again:
                continue
            with self.lock:
                self.messages.append((time.time(), topic.decode(), json.loads(payload)))

    def first(self, after, pred, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                for t, topic, p in self.messages:
                    if t >= after and pred(topic, p):
                        return t
            time.sleep(0.01)
        return None

    def count(self, since, until, pred):
        with self.lock:
            return sum(1 for t, topic, p in self.messages if since <= t <= until and pred(topic, p))

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close(0)


def start_job(workdir, cameras, members=(), log_path=None, **extra):
    """`vapipe run` on `cameras` ({id: Camera or URI}), live; `members`: more stream entries (regions of the
    cameras, with `source`); `extra` adds or replaces config sections (`publish` adds keys to it).
    `log_path`: the job's stderr goes to that file rather than to a pipe, which a long run would fill
    (nobody reads it until the end: the job then blocks on its next log line)."""
    port = free_port()
    infer = extra.pop("infer", None) or {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                                         "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")}
    cfg = {"job": {"name": "recovery", "mode": "live"}, **extra,
           "streams": [{"id": sid, "uri": getattr(cam, "uri", cam)} for sid, cam in cameras.items()] + list(members),
           "batch": {"max_batch_size": 8, "max_delay_ms": 20},
           "infer": infer,
           "publish": {**extra.pop("publish", {}), "endpoint": f"tcp://127.0.0.1:{port}"}}
    path = os.path.join(workdir, "recovery.yaml")
    with open(path, "w") as f:
        json.dump(cfg, f)
    bus = Bus(cfg["publish"]["endpoint"])
    time.sleep(0.3)
    if log_path:
        with open(log_path, "w") as log:
            proc = subprocess.Popen([VAPIPE, "run", path], stdout=subprocess.DEVNULL, stderr=log, text=True)
    else:
        proc = subprocess.Popen([VAPIPE, "run", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, bus


def stage_pid(supervisor, name, lane=0, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = [a.decode() for a in f.read().split(b"\0") if a]
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid == supervisor and len(argv) >= 3 and argv[1] == "stage" and argv[2] == name and \
                    argv[argv.index("--lane") + 1] == str(lane):
                return int(entry)
        time.sleep(0.05)
    return None


def stop_job(proc, bus):
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    bus.close()


def is_result(sid):
    return lambda topic, p: topic == f"results/{sid}"


def camera_outage(workdir, down_s):
    cams = {"door": Camera("smpte"), "yard": Camera("pinwheel")}
    proc, bus = start_job(workdir, cams)
    if bus.first(0, is_result("yard"), timeout=60) is None:
        sys.exit("no result from the yard camera:\n" + proc.stderr.read()[-2000:])
    time.sleep(2)
    killed = time.time()
    cams["yard"].kill()
    reconnecting = bus.first(killed, lambda topic, p: topic == "events/yard" and p["event"] == "reconnecting")
    time.sleep(max(0.0, killed + down_s - time.time()))
    back = time.time()
    cams["yard"] = Camera("pinwheel", cams["yard"].port)
    resumed = bus.first(back, is_result("yard"))
    door_rate = bus.count(killed, back, is_result("door")) / (back - killed)
    time.sleep(1)
    stop_job(proc, bus)
    for cam in cams.values():
        cam.kill()
    return {"detect_s": reconnecting - killed if reconnecting else None,
            "back_to_result_s": resumed - back if resumed else None,
            "other_camera_results_per_s": door_rate}


def stage_crash(workdir):
    cams = {"door": Camera("smpte"), "yard": Camera("pinwheel")}  # lanes 0 and 1
    proc, bus = start_job(workdir, cams, lanes_per_device=2)
    if bus.first(0, is_result("yard"), timeout=60) is None:
        sys.exit("no result:\n" + proc.stderr.read()[-2000:])
    time.sleep(2)
    infer = stage_pid(proc.pid, "infer", lane=1)
    killed = time.time()
    os.kill(infer, signal.SIGKILL)
    resumed = bus.first(killed, lambda topic, p: topic == "events/yard" and p["event"] == "resumed")
    result = bus.first(resumed or killed, is_result("yard"))
    door_rate = bus.count(killed, result, is_result("door")) / (result - killed) if result else None
    time.sleep(1)
    stop_job(proc, bus)
    for cam in cams.values():
        cam.kill()
    return {"to_resumed_s": resumed - killed if resumed else None, "to_result_s": result - killed if result else None,
            "other_lane_results_per_s": door_rate}


def publish_crash(workdir):
    cams = {"door": Camera("smpte"), "yard": Camera("pinwheel")}
    proc, bus = start_job(workdir, cams)
    if bus.first(0, is_result("door"), timeout=60) is None:
        sys.exit("no result:\n" + proc.stderr.read()[-2000:])
    time.sleep(2)
    publish = stage_pid(proc.pid, "publish")
    killed = time.time()
    os.kill(publish, signal.SIGKILL)
    result = bus.first(killed + 0.05, lambda topic, p: topic.startswith("results/"))
    time.sleep(1)
    stop_job(proc, bus)
    for cam in cams.values():
        cam.kill()
    return {"to_result_s": result - killed if result else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--down", type=float, default=3.0, help="seconds the camera stays down")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = {"outage": [], "crash": [], "publish": []}
    with tempfile.TemporaryDirectory(prefix="vapipe-recovery-") as workdir:
        for i in range(args.rounds):
            rows["outage"].append(camera_outage(workdir, args.down))
            rows["crash"].append(stage_crash(workdir))
            rows["publish"].append(publish_crash(workdir))
            print(f"round {i + 1}: {rows['outage'][-1]} {rows['crash'][-1]} {rows['publish'][-1]}", file=sys.stderr)

    def col(kind, key):
        vals = [r[key] for r in rows[kind] if r[key] is not None]
        missing = len(rows[kind]) - len(vals)
        text = ", ".join(f"{v:.2f}" for v in vals)
        return text + (f" ({missing} never)" if missing else "")

    print(f"\nRecovery, {datetime.date.today()}, {os.cpu_count()} CPUs, {args.rounds} rounds, camera down {args.down} s "
          f"(`{' '.join(['/usr/bin/python3', 'tools/recovery-bench.py'] + sys.argv[1:])}`)\n")
    print("| what | seconds, each round |\n|---|---|")
    print(f"| camera killed -> its `reconnecting` event | {col('outage', 'detect_s')} |")
    print(f"| camera back -> its first result | {col('outage', 'back_to_result_s')} |")
    print(f"| other camera meanwhile, results/s | {col('outage', 'other_camera_results_per_s')} |")
    print(f"| infer of lane 1 killed -> its camera's `resumed` | {col('crash', 'to_resumed_s')} |")
    print(f"| infer of lane 1 killed -> its camera's first result again | {col('crash', 'to_result_s')} |")
    print(f"| camera of lane 0 meanwhile, results/s | {col('crash', 'other_lane_results_per_s')} |")
    print(f"| publish killed -> first result on the bus again | {col('publish', 'to_result_s')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": str(datetime.date.today()), "rounds": rows, "down_s": args.down}, f, indent=1)


if __name__ == "__main__":
    main()
