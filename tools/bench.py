"""Runs the benchmark (see bench.sh). Standard library only, except make_resnet18.py (torch)."""
import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERNS = ["smpte", "ball", "snow", "pinwheel", "colors", "spokes", "gradient", "red"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def live_sink_job(workdir, name, streams, publish):
    """A live job of `streams` test:// streams (320x240, 30 fps) on the shipped CNN, with a results file
    and `publish` (a sink's keys): (config path, results file path). For tools/webhook-bench.py and
    tools/mqtt-bench.py."""
    results_path = os.path.join(workdir, "results.jsonl")
    cfg = {"job": {"name": name, "mode": "live"},
           "streams": [{"id": f"s{i}", "uri": "test://ball?frames=0&width=320&height=240&fps=30&live=true"}
                       for i in range(streams)],
           "batch": {"max_batch_size": 16, "max_delay_ms": 20},
           "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                     "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
           "publish": {"endpoint": f"tcp://127.0.0.1:{free_port()}", "jsonl_path": results_path, **publish}}
    path = os.path.join(workdir, "job.yaml")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path, results_path


def run_with_outage(vapipe, config, seconds, outage, down, up):
    """Runs the job for `seconds`, with down() and up() a third and two thirds in when `outage`; stops it
    with SIGINT and returns its stderr."""
    import signal
    proc = subprocess.Popen([vapipe, "run", config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if outage:
        time.sleep(seconds / 3)
        down()
        time.sleep(seconds / 3)
        up()
        time.sleep(seconds / 3)
    else:
        time.sleep(seconds)
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=120)[1]


def make_clips(out, count, frames):
    os.makedirs(out, exist_ok=True)
    paths = []
    for i in range(count):
        pattern = PATTERNS[i % len(PATTERNS)]
        path = os.path.join(out, f"{i:02d}-{pattern}-1280x720-{frames}.mp4")
        if not os.path.exists(path):
            extra = "motion=wavy" if pattern == "ball" else "horizontal-speed=2"
            subprocess.run(
                f"gst-launch-1.0 -q videotestsrc pattern={pattern} num-buffers={frames} {extra} "
                f"! video/x-raw,format=I420,width=1280,height=720,framerate=30/1 "
                f"! x264enc bitrate=3000 speed-preset=veryfast key-int-max=60 ! h264parse ! mp4mux "
                f"! filesink location={path}", shell=True, check=True)
        paths.append(path)
    return paths


def write_config(path, name, clips, model, labels, batch):
    cfg = {
        "job": {"name": name, "summary_path": path.replace(".yaml", "-summary.json")},
        "streams": [{"id": f"clip{i}", "uri": c} for i, c in enumerate(clips)],
        "batch": {"max_batch_size": batch, "max_delay_ms": 20},
        "infer": {"model": model, "labels": labels},
        "publish": {"endpoint": f"tcp://127.0.0.1:{free_port()}"},
        "log": {"level": "warn"},
    }
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    return path


def bench(vapipe, what, config, *extra):
    # The same OpenMP setting the supervisor gives the stages, so the per-frame loop is not handicapped.
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    out = subprocess.run([vapipe, "bench", what, config, *extra], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"vapipe bench {what} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def pipeline(vapipe, config):
    start = time.time()
    out = subprocess.run([vapipe, "run", config], capture_output=True, text=True)
    wall = time.time() - start
    if out.returncode != 0:
        sys.exit(f"vapipe run failed ({out.returncode}):\n{out.stderr[-3000:]}")
    with open(config.replace(".yaml", "-summary.json")) as f:
        summary = json.load(f)
    return summary, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vapipe", required=True)
    ap.add_argument("--clips", type=int, default=8)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    clips = make_clips(os.path.join(args.out, "clips"), args.clips, args.frames)
    resnet = os.path.join(args.out, "resnet18_random.pt")
    if not os.path.exists(resnet):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "make_resnet18.py"), resnet,
                        resnet.replace(".pt", ".labels.txt")], check=True)
    models = [
        ("pattern_cnn", os.path.join(ROOT, "models", "pattern_cnn.pt"), os.path.join(ROOT, "models", "pattern_cnn.labels.txt"), 32),
        ("resnet18", resnet, resnet.replace(".pt", ".labels.txt"), 8),
    ]
    rows, raw = [], {}
    decode = None
    for name, model, labels, batch in models:
        config = write_config(os.path.join(args.out, f"{name}.yaml"), f"bench-{name}", clips, model, labels, batch)
        if decode is None:
            decode = bench(args.vapipe, "decode", config)
            pre = bench(args.vapipe, "preprocess", config)
        infer = bench(args.vapipe, "infer", config)
        per_frame = bench(args.vapipe, "per-frame", config)
        summary, wall = pipeline(args.vapipe, config)
        stages = {"decode": decode["per_second"], "preprocess": pre["per_second"], "infer": infer["per_second"]}
        bound = 1.0 / sum(1.0 / v for v in stages.values())
        e2e = summary["steady_fps"]
        raw[name] = {"stages": stages, "infer_batch": batch, "bound": bound, "end_to_end_steady_fps": e2e,
                     "end_to_end_job_fps": summary["fps"], "job_wall_s": summary["wall_s"], "per_frame": per_frame["per_second"],
                     "frames": summary["frames"], "summary": summary}
        rows.append((name, batch, stages, bound, e2e, summary["fps"], per_frame["per_second"], summary["frames"]))
    date = datetime.date.today().isoformat()
    cpu = platform.processor() or platform.machine()
    lines = [
        f"Measured {date} on {os.cpu_count()} cores ({cpu}), {args.clips} clips of {args.frames} frames 1280x720 H.264, "
        f"command `tools/bench.sh --clips {args.clips} --frames {args.frames}`.",
        "",
        "| model | batch | decode alone | preprocess alone | infer alone | bound 1/sum(1/x) | end to end (steady) | e2e / bound | end to end (job, incl. start-up) | per-frame loop | e2e / per-frame |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, batch, s, bound, e2e, job, pf, frames in rows:
        lines.append(f"| {name} | {batch} | {s['decode']:.0f} | {s['preprocess']:.0f} | {s['infer']:.0f} | {bound:.0f} | "
                     f"{e2e:.0f} | {e2e / bound:.0%} | {job:.0f} | {pf:.0f} | {e2e / pf:.2f}x |")
    lines.append("")
    lines.append("All figures are frames (images) per second; 'end to end (steady)' counts from the first frame's capture "
                 "to the last result, 'job' from `vapipe run` start to its summary (includes GStreamer, model load and warm-up).")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"date": date, "rows": raw}, f, indent=1)


if __name__ == "__main__":
    main()
