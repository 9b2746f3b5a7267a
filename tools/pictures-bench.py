"""Segment pictures to a phone and to Home Assistant: how long after publish has a segment's picture it
reaches an MQTT subscriber (publish.mqtt's `pictures`: the JPEG, retained, on picture/<stream>/<label>)
and a webhook receiver (`attach_pictures`, format text: the JPEG as the body, as ntfy takes it).

A live job of K `test://blink` streams (black and white frames in turn, `--fps` a second, WIDTHxHEIGHT)
with `segments_min_frames: 1`, so that every frame begins a segment and asks for its picture: the
heaviest use. A real Mosquitto on loopback with a subscriber stamping each message (and its length,
not its bytes), and an HTTP receiver in this process stamping each request. Prints, per run: pictures
published (the results file's `picture` messages with a file), pictures the broker's subscriber got
(only the latest per stream and label counts, so a burst may publish fewer) and the webhook got (each
one), the delay from the picture message's time_unix_ms to each arrival (p50, p95, max), and the
pictures' sizes.

Usage (after tools/build.sh): /usr/bin/python3 tools/pictures-bench.py [--streams 1 4] [--seconds 20] [--fps 2]
                               [--size 1280x720]
"""
import argparse
import datetime
import http.server
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port, percentile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAPIPE = os.path.join(ROOT, "build", "cli", "vapipe")


def start_broker(workdir):
    """Mosquitto on a free port, and a subscriber of picture/# writing "UNIX_TIME TOPIC LENGTH" lines."""
    port = free_port()
    conf = os.path.join(workdir, "mosquitto.conf")
    with open(conf, "w") as f:
        f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                f"user {pwd.getpwuid(os.getuid()).pw_name}\n")
    broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.01)
    out = os.path.join(workdir, "mqtt-received.txt")
    with open(out, "w") as f:
        sub = subprocess.Popen(["mosquitto_sub", "-p", str(port), "-t", "vapipe/+/picture/#", "-q", "1",
                                "-F", "%U %t %l"], stdout=f, stderr=subprocess.DEVNULL)
    time.sleep(0.2)
    return port, out, [sub, broker]


def start_receiver():
    """An HTTP server on loopback recording (arrival, X-Filename, bytes) of each image/jpeg POST."""
    got = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Type") == "image/jpeg":
                got.append((time.time(), self.headers.get("X-Filename"), len(body)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, got


def run(streams, seconds, fps, size):
    workdir = tempfile.mkdtemp(prefix="vapipe-pictures-bench-")
    port, mqtt_out, procs = start_broker(workdir)
    server, posted = start_receiver()
    width, height = size.split("x")
    results = os.path.join(workdir, "results.jsonl")
    cfg = {"job": {"name": "bench", "mode": "live"},
           "streams": [{"id": f"s{i}",
                        "uri": f"test://blink?frames=0&width={width}&height={height}&fps={fps}&live=true"}
                       for i in range(streams)],
           "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                     "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
           "publish": {"endpoint": f"tcp://127.0.0.1:{free_port()}", "jsonl_path": results,
                       "segments_min_frames": 1, "segments_pictures_dir": os.path.join(workdir, "pictures"),
                       "mqtt": [{"url": f"mqtt://127.0.0.1:{port}", "topics": ["events/"], "home_assistant": True,
                                 "labels": ["black", "white"]}],
                       "webhooks": [{"url": f"http://127.0.0.1:{server.server_address[1]}/alerts",
                                     "topics": ["segments/"], "format": "text", "attach_pictures": True}]}}
    config = os.path.join(workdir, "job.yaml")
    with open(config, "w") as f:
        json.dump(cfg, f)
    proc = subprocess.Popen([VAPIPE, "run", config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(seconds)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    time.sleep(1)
    for p in procs:
        p.terminate()
        p.wait()
    server.shutdown()

    pictures = []  # (time_unix_ms / 1000, stream, label id, path)
    with open(results) as f:
        for line in f:
            m = json.loads(line)
            p = m["payload"]
            if p.get("schema") == "vapipe.segment" and p.get("event") == "picture" and p.get("picture"):
                pictures.append((p["time_unix_ms"] / 1000, p["stream_id"], p["label"], p["picture"]))
    sizes = [os.path.getsize(p[3]) for p in pictures if os.path.exists(p[3])]
    # MQTT: each arrival against the latest picture of its stream and label published before it.
    mqtt_delays = []
    with open(mqtt_out) as f:
        for line in f:
            stamp, topic, length = line.split()
            if int(length) == 0:
                continue
            _, _, _, stream, label = topic.split("/")
            before = [p[0] for p in pictures if p[1] == stream and p[2] == label and p[0] <= float(stamp)]
            if before:
                mqtt_delays.append((float(stamp) - before[-1]) * 1000)
    by_file = {f"{p[1]}_{os.path.basename(p[3])}": p[0] for p in pictures}
    hook_delays = [(t - by_file[name]) * 1000 for t, name, _ in posted if name in by_file]
    return {"pictures": len(pictures), "sizes": sizes, "mqtt": mqtt_delays, "hook": hook_delays}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--fps", type=int, default=2)
    ap.add_argument("--size", default="1280x720")
    args = ap.parse_args()
    print(f"# {datetime.date.today()}: tools/pictures-bench.py --streams {' '.join(map(str, args.streams))} "
          f"--seconds {args.seconds:g} --fps {args.fps} --size {args.size}")
    print("| streams x pictures/s | pictures published | JPEG bytes (median) | MQTT received | MQTT delay p50 / p95 / max (ms) "
          "| webhook received | webhook delay p50 / p95 / max (ms) |")
    print("|---|---|---|---|---|---|---|")
    for k in args.streams:
        r = run(k, args.seconds, args.fps, args.size)

        def delays(v):
            return f"{percentile(v, 0.5):.1f} / {percentile(v, 0.95):.1f} / {max(v) if v else float('nan'):.1f}"
        print(f"| {k} x {args.fps} | {r['pictures']} | {percentile(r['sizes'], 0.5):.0f} | {len(r['mqtt'])} | "
              f"{delays(r['mqtt'])} | {len(r['hook'])} | {delays(r['hook'])} |", flush=True)


if __name__ == "__main__":
    main()
