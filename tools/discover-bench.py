#!/usr/bin/env python3
"""How long `vapipe discover` takes for a network of ONVIF cameras: `--cameras` test cameras
(tests/e2e/onvif_camera.py, each its own process with two profiles and a clock up to 30 min off,
every one listening on 239.255.255.250:3702 as cameras do), found by one multicast probe and each asked for its profiles and
stream URIs with a user and password. Prints a Markdown summary.

    /usr/bin/python3 tools/discover-bench.py [--cameras 50] [--runs 3] [--timeout 3]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONVIF_CAMERA = os.path.join(ROOT, "tests", "e2e", "onvif_camera.py")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cameras", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3)
    ap.add_argument("--answer-delay-max", type=float, default=0.5,
                    help="each camera answers a probe after a random wait up to this (WS-Discovery: 0.5 s)")
    ap.add_argument("--vapipe", default=os.path.join(ROOT, "build", "cli", "vapipe"))
    args = ap.parse_args()
    cameras = []
    with tempfile.TemporaryDirectory(prefix="vapipe-discover-bench-") as work:
        password = os.path.join(work, "password")
        with open(password, "w") as f:
            f.write("bench-password\n")
        try:
            for n in range(args.cameras):
                cameras.append(subprocess.Popen(
                    [sys.executable, ONVIF_CAMERA, "--name", f"Bench camera {n}", "--user", "admin", "--password",
                     "bench-password", "--stream", f"main=rtsp://10.0.{n // 250}.{n % 250 + 1}/main",
                     "--stream", f"sub=rtsp://10.0.{n // 250}.{n % 250 + 1}/sub", "--multicast",
                     "--clock-offset", str((n % 7 - 3) * 600), "--answer-delay-max", str(args.answer_delay_max)],
                    stdout=subprocess.PIPE, text=True))
            for c in cameras:
                if not c.stdout.readline().startswith("ready"):
                    sys.exit("a test camera did not start (port 3702 taken?)")
            rows = []
            for _ in range(args.runs):
                started = time.time()
                p = subprocess.run([args.vapipe, "discover", "--timeout", str(args.timeout), "--user", "admin",
                                    "--password-file", password], capture_output=True, text=True, timeout=300)
                took = time.time() - started
                found = re.search(r"(\d+) cameras? answered .* in ([0-9.]+) s; (\d+) streams?", p.stdout)
                rows.append((took, found.group(1) if found else "?", found.group(3) if found else "?", p.returncode))
        finally:
            for c in cameras:
                c.terminate()
            for c in cameras:
                c.wait()
    print(f"## `vapipe discover` of {args.cameras} ONVIF cameras (`tools/discover-bench.py --cameras {args.cameras} "
          f"--timeout {args.timeout:g} --answer-delay-max {args.answer_delay_max:g}`)\n")
    print("| run | cameras found | streams listed | wall s (probe timeout included) | exit |")
    print("|---|---|---|---|---|")
    for k, (took, cams, streams, code) in enumerate(rows, 1):
        print(f"| {k} | {cams} | {streams} | {took:.2f} | {code} |")


if __name__ == "__main__":
    main()
