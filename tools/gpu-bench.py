"""The GPU benchmark (issue: GPU benchmark in tools/). Standard library only; run by tools/gpu-bench.sh
and tools/gpu-check.sh.

In one run, on the same 1080p H.264 clips (tools/make-gpu-media.sh) and the same model, it measures:
  decode alone       `vapipe bench decode`    N streams, ingest.decoder nvdec          frames/s
  classifier alone   `vapipe bench infer`     infer.device cuda, precision fp16, batch B  images/s
  end to end         `vapipe run`             the five-process pipeline, N streams;   frames/s
                                              the job summary's steady_fps (and fps incl. start-up)
  per-frame loop     `vapipe bench per-frame` decode, preprocess, one forward per frame frames/s
decode and end to end for each stream count of --streams, in order; the classifier once, after the
first decode; the per-frame loop once, last, on --per-frame-streams streams. It then prints a Markdown table (for docs/benchmarks.md) and writes OUT/gpu-bench.json, OUT/gpu-bench.md,
the configs and every command's log under OUT.

Stream i reads clip i mod (number of clips), so 80 streams can share 8 files (each is decoded apart).
Every command has a timeout, and the run as a whole keeps within --budget-s: a step that would not fit
is skipped and reported as such. Results are written after every step, so a run stopped from outside
still leaves what it measured.

--cpu: the same logic on a machine without a GPU (decoder cpu, devices cpu, fp32, no `gpus` key), with
only config keys that exist in every build; for checking this script, not for figures.

  python3 tools/gpu-bench.py --vapipe build/cli/vapipe --media .devmedia --model resnet50_random.pt
         [--streams 32,80] [--batch 256] [--per-frame-streams 4] [--budget-s 360] [--out DIR] [--cpu]
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# --infer-set keys that are top-level config keys rather than infer's.
TOP_LEVEL_KEYS = {"lanes_per_device"}
CUDA_GRAPH_SMALL_BATCH = 64  # near the 2026-11-29 run's mean batch (72) at 80 streams
STREAMS_PER_GPU_GOAL = 80  # 1080p30 streams per H200 with every frame classified (the issue's goal)
E2E_OVER_DECODE_GOAL = 0.90


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(msg):
    print(f"[gpu-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Runner:
    """Runs commands with a per-command timeout inside an overall budget; logs each to OUT/logs/."""

    def __init__(self, out, budget_s):
        self.logs = os.path.join(out, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.deadline = time.monotonic() + budget_s

    def left(self):
        return self.deadline - time.monotonic()

    def run(self, name, cmd, timeout, env=None, min_s=15):
        """Returns dict(status=ok|failed|timeout|skipped, rc, stdout, stderr_tail, wall_s, log)."""
        limit = min(timeout, self.left() - 5)
        if limit < min_s:
            log(f"{name}: skipped, {self.left():.0f} s of the budget left")
            return {"status": "skipped", "reason": f"budget: {self.left():.0f} s left, needs at least {min_s} s"}
        path = os.path.join(self.logs, f"{name}.log")
        log(f"{name}: {' '.join(cmd)} (timeout {limit:.0f} s)")
        start = time.monotonic()
        with open(path, "w") as err:
            err.write(f"$ {' '.join(cmd)}\n")
            err.flush()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                    start_new_session=True)
            timed_out = False
            try:
                stdout, _ = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                timed_out = True
                stdout = self._stop(proc)
            wall = time.monotonic() - start
            err.write(f"\n--- stdout ---\n{stdout}\n--- exit {proc.returncode}{' (timeout)' if timed_out else ''}, {wall:.1f} s\n")
        with open(path) as f:
            tail = f.read()[-2000:]
        status = "timeout" if timed_out else ("ok" if proc.returncode == 0 else "failed")
        log(f"{name}: {status} (exit {proc.returncode}, {wall:.1f} s)")
        return {"status": status, "rc": proc.returncode, "stdout": stdout, "stderr_tail": tail, "wall_s": round(wall, 2),
                "log": os.path.relpath(path, os.path.dirname(self.logs))}

    @staticmethod
    def _stop(proc):
        # First SIGINT: `vapipe run` stops its stages cleanly (and writes its summary); then SIGKILL the
        # group (stage processes have their own groups, and get SIGTERM when their parent dies).
        for sig, wait in ((signal.SIGINT, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, _ = proc.communicate(timeout=wait)
                return out
            except subprocess.TimeoutExpired:
                continue
        return ""


def last_json_line(text):
    for line in reversed((text or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def find_clips(media):
    clips = sorted(glob.glob(os.path.join(media, "bench-*.mp4")))
    frames = {}
    manifest = os.path.join(media, "media.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            files = json.load(f).get("files", {})
        frames = {os.path.join(media, k): v.get("frames") for k, v in files.items()}
    if not clips:
        sys.exit(f"gpu-bench: no bench-*.mp4 in {media} (make them with tools/make-gpu-media.sh)")
    return [(os.path.abspath(c), frames.get(c)) for c in clips]


def write_config(path, args, clips, streams, batch, summary=True):
    uris = [clips[i % len(clips)][0] for i in range(streams)]
    cfg = {
        "job": {"name": os.path.basename(path)[:-5]},
        "streams": [{"id": f"s{i:03d}", "uri": u} for i, u in enumerate(uris)],
        # Every stream open at once, as cameras would be (ingest.max_open_streams reads 64 files at a time).
        "ingest": {"decoder": "cpu" if args.cpu else args.decoder, "max_open_streams": 0},
        "preprocess": {"device": "cpu", "dtype": "float32"},
        "batch": {"max_batch_size": batch, "max_delay_ms": args.max_delay_ms},
        "infer": {"model": args.model, "labels": args.labels, "device": "cpu"},
        # metrics: gpu-bench scrapes the stage figures during the run (where the time went)
        "publish": {"endpoint": f"tcp://127.0.0.1:{free_port()}", "metrics_address": f"127.0.0.1:{free_port()}"},
        # Enough frame slots that ingest is not throttled by the pool: 2 per stream, at least 32.
        "transport": {"frame_slots": max(32, 2 * streams)},
        "log": {"level": args.log_level},
    }
    if summary:
        cfg["job"]["summary_path"] = path[:-5] + "-summary.json"
    if args.frame_slot_bytes:
        cfg["transport"]["frame_slot_bytes"] = args.frame_slot_bytes
    if not args.cpu:
        # Keys of the GPU path (vapipe validate rejects them in builds without it).
        cfg["gpus"] = args.gpus if args.gpus == "all" else [int(g) for g in args.gpus.split(",")]
        cfg["preprocess"] = {"device": "cuda", "dtype": "float16"}
        cfg["infer"].update({"device": "cuda", "precision": "fp16", "channels_last": True})
        if args.host_pools:
            cfg["transport"]["device_pools"] = False
    for kv in args.infer_set:
        key, _, value = kv.partition("=")
        value = json.loads(value) if value in ("true", "false") or value.lstrip("-").isdigit() else value
        if key in TOP_LEVEL_KEYS:
            cfg[key] = value
        else:
            cfg["infer"][key] = value
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)  # JSON is YAML
    expected = sum(clips[i % len(clips)][1] for i in range(streams)) if all(c[1] for c in clips) else None
    return path, expected


STAGE_SAMPLE = re.compile(r'^vapipe_stage_(\w+?)_seconds_total\{stage="(\w+)",lane="(\d+)"\} (\S+)$')
OWN_TOTAL = re.compile(
    r'^vapipe_(infer|batch)_(batches|frames|rows|full_batches|cuda_graph_batches)_total\{lane="(\d+)"\} (\S+)$')


class MetricsScraper:
    """Scrapes a running job's /metrics every `every` seconds (the stage figures, pipeline/stage_stats.h)."""

    def __init__(self, address, every=1.0):
        self.url, self.every, self.samples = f"http://{address}/metrics", every, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop.wait(self.every):
            try:
                text = urllib.request.urlopen(self.url, timeout=2).read().decode()
            except OSError:
                continue
            figures = {}
            for line in text.splitlines():
                m = STAGE_SAMPLE.match(line)
                if m:
                    figures[(m.group(2), int(m.group(3)), m.group(1))] = float(m.group(4))
                m = OWN_TOTAL.match(line)
                if m:
                    figures[(m.group(1), int(m.group(3)), m.group(2))] = float(m.group(4))
            if figures:
                self.samples.append((time.monotonic(), figures))

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=5)

    def where_the_time_went(self):
        """Per stage and lane, over the middle half of the scrapes while frames flowed (infer's frame
        count rose; a short run's start-up would otherwise fill the window: at 32 streams on the H200,
        2 s of frames in a 6 s job, every share read 0): the share of wall time busy (own work), blocked
        sending, waiting for pool slots and waiting for input; infer's mean batch."""
        frames = [sum(v for (stage, _, what), v in f.items() if stage == "infer" and what == "frames")
                  for _, f in self.samples]
        rising = [k for k in range(1, len(frames)) if frames[k] > frames[k - 1]]
        if not rising:
            return None
        first, last = rising[0] - 1, rising[-1]  # the scrapes around the frames' flow
        if last - first >= 4:
            first, last = first + (last - first) // 4, first + (3 * (last - first)) // 4
        (t0, a), (t1, b) = self.samples[first], self.samples[last]
        if t1 <= t0:
            return None
        out = {}
        for (stage, lane, what), value in b.items():
            delta = value - a.get((stage, lane, what), 0.0)
            out.setdefault(f"{stage}[{lane}]", {})[what] = delta
        rows = {}
        for name, d in out.items():
            wall = t1 - t0
            row = {k: round(d[k] / wall, 3) for k in ("busy", "send_blocked", "slot_wait", "input_wait") if k in d}
            if "busy" in row:
                row["own_work"] = round(max(0.0, row["busy"] - row.get("send_blocked", 0) - row.get("slot_wait", 0)), 3)
            if d.get("batches"):
                row["mean_batch"] = round(d.get("frames", 0) / d["batches"], 1)
                if "cuda_graph_batches" in d:
                    row["graph_share"] = round(d["cuda_graph_batches"] / d["batches"], 3)
            rows[name] = row
        return {"window_s": round(t1 - t0, 1), "stages": rows, "t": (t0, t1)}  # "t": for ResourceSampler


class ResourceSampler:
    """While a step runs, four times a second: the CPU seconds of each vapipe process (by /proc: the stage
    processes of `vapipe run` as "ingest[0]" ..., a `vapipe bench X` as "bench X") and, where
    nvidia-smi is, the GPU's use (`nvidia-smi dmon -s um`: sm, the share of time a kernel ran; dec,
    NVDEC's; fb, the memory in use, MB). Together they say what a stage that is not near 100% own work waits on: its CPU cores,
    the GPU's SMs, or the decoders."""

    def __init__(self, vapipe, every=0.25):
        self.vapipe, self.every = os.path.realpath(vapipe), every
        self.cpu, self.gpu = [], []  # (monotonic, {name: cpu_s}), (monotonic, {"sm": %, "dec": %, ...})
        self.tick = os.sysconf("SC_CLK_TCK")
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._cpu_loop, daemon=True)]
        self.dmon = None
        if shutil.which("nvidia-smi"):
            # Each line stamped with its time of day (-o T) and, where stdbuf is, written as it comes
            # (a pipe would otherwise hold dmon's lines back until its buffer fills).
            cmd = ["nvidia-smi", "dmon", "-s", "um", "-d", "1", "-o", "T"]  # use %, memory in use (fb, MB)
            if shutil.which("stdbuf"):
                cmd = ["stdbuf", "-oL"] + cmd
            try:
                self.dmon = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                self.threads.append(threading.Thread(target=self._gpu_loop, daemon=True))
            except OSError:
                self.dmon = None
        for t in self.threads:
            t.start()

    def _processes(self):
        found = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode(errors="replace").split("\0")
                if len(argv) < 3 or os.path.realpath(argv[0]) != self.vapipe or argv[1] not in ("stage", "bench"):
                    continue
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu_s = (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime
            if argv[1] == "bench":
                name = f"bench {argv[2]}"
            else:
                lane = argv[argv.index("--lane") + 1] if "--lane" in argv[:-1] else "0"
                name = f"{argv[2]}[{lane}]"
            found[name] = found.get(name, 0.0) + cpu_s
        return found

    def _cpu_loop(self):
        while True:
            self.cpu.append((time.monotonic(), self._processes()))
            if self.stop.wait(self.every):
                return

    @staticmethod
    def _monotonic_of(time_of_day):
        """time.monotonic() at today's HH:MM:SS (dmon's -o T), or None."""
        try:
            hms = datetime.time.fromisoformat(time_of_day)
        except ValueError:
            return None
        wall = datetime.datetime.combine(datetime.date.today(), hms).timestamp()
        return wall - (time.time() - time.monotonic())

    def _gpu_loop(self):
        columns = None
        for line in self.dmon.stdout:
            if line.startswith("#"):
                if columns is None:
                    columns = line.lstrip("#").lower().split()  # time gpu sm mem enc dec ...
                continue
            parts = line.split()
            if not columns or len(parts) != len(columns):
                continue
            row = {}
            for k, v in zip(columns, parts):
                try:
                    row[k] = float(v)
                except ValueError:
                    pass  # "-": not measured on this GPU
            stamped = self._monotonic_of(parts[columns.index("time")]) if "time" in columns else None
            self.gpu.append((stamped if stamped is not None else time.monotonic(), row))

    def finish(self):
        self.stop.set()
        if self.dmon:
            self.dmon.terminate()
            try:
                self.dmon.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.dmon.kill()
        for t in self.threads:
            t.join(timeout=5)

    def cpu_cores(self, t0=None, t1=None):
        """Each process's CPU cores in use (CPU seconds per second) between t0 and t1 (default: its
        whole sampled life)."""
        out = {}
        names = {n for _, f in self.cpu for n in f}
        for name in names:
            seen = [(t, f[name]) for t, f in self.cpu if name in f and (t0 is None or t0 - 0.2 <= t <= t1 + 0.2)]
            if len(seen) >= 2 and seen[-1][0] > seen[0][0]:
                out[name] = round((seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0]), 2)
        return out

    def gpu_use(self, t0=None, t1=None):
        """Mean and peak of sm and dec (percent) between t0 and t1; without a window, over the seconds
        in which NVDEC or a kernel was busy."""
        rows = [r for t, r in self.gpu if (t0 - 0.6 <= t <= t1 + 0.6 if t0 is not None else r.get("sm", 0) or r.get("dec", 0))]
        if not rows:
            return None
        use = {"seconds": len(rows)}
        for k in ("sm", "dec", "mem", "fb"):
            values = [r[k] for r in rows if k in r]
            if values:
                use[k] = round(sum(values) / len(values), 1)
                use[k + "_max"] = max(values)
        return use


def summary_check(summary, expected):
    """Every frame classified exactly once, in order, no failed stream."""
    problems = []
    if expected is not None and summary.get("frames") != expected:
        problems.append(f"frames {summary.get('frames')} of {expected}")
    if summary.get("failed_streams"):
        problems.append(f"{summary['failed_streams']} failed streams")
    for s in summary.get("streams", []):
        for k in ("gaps", "out_of_order", "frame_errors", "dropped"):
            if s.get(k):
                problems.append(f"{s['stream_id']}: {k} {s[k]}")
        if s.get("status") != "done":
            problems.append(f"{s['stream_id']}: status {s.get('status')}")
    return problems


def fmt(x, spec=".0f"):
    return "—" if x is None else format(x, spec)


def gpu_use_text(use):
    if not use:
        return "GPU use not sampled"
    memory = f", GPU memory in use up to {use['fb_max'] / 1024:.1f} GiB" if use.get("fb_max") is not None else ""
    return (f"SMs busy {fmt(use.get('sm'))}% (peak {fmt(use.get('sm_max'))}%), NVDEC {fmt(use.get('dec'))}% "
            f"(peak {fmt(use.get('dec_max'))}%){memory} over {use['seconds']} s")


def gpu_name():
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().replace("\n", "; ") or None
    except (OSError, subprocess.SubprocessError):
        return None


def main():
    ap = argparse.ArgumentParser(description="GPU benchmark: NVDEC alone, classifier alone, end to end, per-frame loop.")
    ap.add_argument("--vapipe", required=True, help="the vapipe binary")
    ap.add_argument("--media", required=True, help="folder with bench-*.mp4 (and media.json) from tools/make-gpu-media.sh")
    ap.add_argument("--model", help="TorchScript model (tools/make_resnet50.py); --cpu default: models/pattern_cnn.pt")
    ap.add_argument("--labels", help="default: MODEL with .pt replaced by .labels.txt")
    ap.add_argument("--streams", default=None, help="comma-separated stream counts (default 32; --cpu: 2)")
    ap.add_argument("--batch", type=int, default=None, help="max batch size and classifier batch (default 256; --cpu: 8)")
    ap.add_argument("--max-delay-ms", type=float, default=20.0)
    ap.add_argument("--per-frame-streams", type=int, default=None, help="streams for the per-frame loop (default 4; --cpu: 1)")
    ap.add_argument("--gpus", default="all", help="the config's gpus: all, or a comma-separated list of indices")
    ap.add_argument("--decoder", default="nvdec", choices=["nvdec", "auto", "cpu"], help="ingest.decoder outside --cpu")
    ap.add_argument("--frame-slot-bytes", type=int, default=0, help="transport.frame_slot_bytes (default: vapipe's)")
    ap.add_argument("--host-pools", action="store_true",
                    help="transport.device_pools: false (frames and tensors through host shared memory, no CUDA IPC)")
    ap.add_argument("--infer-set", action="append", default=[], metavar="KEY=VALUE",  # or lanes_per_device=N
                    help="an infer key of the generated configs (YAML value), e.g. jit_optimize=true")
    ap.add_argument("--log-level", default="warn")
    ap.add_argument("--budget-s", type=float, default=360.0, help="wall-clock budget for the whole run")
    ap.add_argument("--skip", action="append", default=[], choices=["decode", "infer", "e2e", "per-frame"])
    ap.add_argument("--out", help="folder for configs, logs and results (default: a new temporary folder)")
    ap.add_argument("--cpu", action="store_true", help="check the logic without a GPU (cpu decoder and devices, fp32)")
    args = ap.parse_args()
    for kv in args.infer_set:
        if "=" not in kv or not kv.partition("=")[0]:
            ap.error(f"--infer-set {kv!r}: expected KEY=VALUE, e.g. jit_optimize=true")

    if args.model is None:
        if not args.cpu:
            sys.exit("gpu-bench: --model is required (make one with tools/make_resnet50.py)")
        args.model = os.path.join(ROOT, "models", "pattern_cnn.pt")
    args.model = os.path.abspath(args.model)
    if args.labels is None:
        args.labels = (args.model[:-3] if args.model.endswith(".pt") else args.model) + ".labels.txt"
    args.labels = os.path.abspath(args.labels)
    for p in (args.vapipe, args.model, args.labels):
        if not os.path.exists(p):
            sys.exit(f"gpu-bench: {p} does not exist")
    counts = [int(n) for n in (args.streams or ("2" if args.cpu else "32")).split(",")]
    batch = args.batch or (8 if args.cpu else 256)
    pf_streams = args.per_frame_streams or (1 if args.cpu else 4)
    out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="vapipe-gpu-bench-"))
    os.makedirs(out, exist_ok=True)
    clips = find_clips(args.media)
    runner = Runner(out, args.budget_s)
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
           "VAPIPE_GPU_COUNT": os.environ.get("VAPIPE_GPU_COUNT", "0" if args.cpu else "1")}
    version = subprocess.run([args.vapipe, "--version"], capture_output=True, text=True).stdout.strip()
    mode = "cpu" if args.cpu else "gpu"
    result = {
        "schema": "vapipe.gpu_bench", "mode": mode, "date": datetime.date.today().isoformat(),
        "host": platform.node(), "cpus": os.cpu_count(), "gpu": gpu_name(), "vapipe": version,
        "model": os.path.basename(args.model), "batch": batch, "max_delay_ms": args.max_delay_ms,
        "clips": [{"path": os.path.basename(c), "frames": n} for c, n in clips], "stream_counts": counts,
        "per_frame_streams": pf_streams, "out": out, "steps": {}, "rows": [],
    }

    def save():
        with open(os.path.join(out, "gpu-bench.json"), "w") as f:
            json.dump(result, f, indent=1)

    def step(name, cmd, timeout, min_s=15):
        r = runner.run(name, cmd, timeout, env=env, min_s=min_s)
        entry = {k: v for k, v in r.items() if k not in ("stdout", "stderr_tail")}
        if r["status"] == "ok" and last_json_line(r["stdout"]) is not None:
            entry["result"] = last_json_line(r["stdout"])
        elif r["status"] in ("failed", "timeout"):
            entry["stderr_tail"] = r["stderr_tail"][-1200:]
        result["steps"][name] = entry
        save()
        return entry

    def per_second(entry):
        res = entry.get("result") if entry else None
        return res.get("per_second") if res else None

    # Order of priority, should the budget run short: each stream count's decode and end to end (with
    # the classifier alone after the first decode), then the per-frame loop.
    infer = per_frame = None
    for k, n in enumerate(counts):
        cfg, expected = write_config(os.path.join(out, f"{mode}-{n}streams.yaml"), args, clips, n, batch)
        row = {"streams": n, "expected_frames": expected}
        result["rows"].append(row)
        if "decode" not in args.skip:
            sampler = ResourceSampler(args.vapipe)
            entry = step(f"decode-{n}", [args.vapipe, "bench", "decode", cfg], 120)
            sampler.finish()
            row["decode"] = per_second(entry)
            row["decode_resources"] = {"cpu_cores": sampler.cpu_cores(), "gpu": sampler.gpu_use()}
            res = (entry or {}).get("result") or {}
            row["decode_startup_s"], row["decode_prerolled"] = res.get("startup_s"), res.get("prerolled")
        if k == 0 and "infer" not in args.skip:
            entry = step(f"infer-b{batch}", [args.vapipe, "bench", "infer", cfg, "--batch", str(batch)], 180)
            infer = per_second(entry)
            # The classifier alone plain and replayed as a CUDA graph, at the full batch and at one of the
            # sizes the pipeline's batches take (what a graph saves is per batch, so more at small ones).
            graphs = result["classifier_cuda_graphs"] = {}
            for b in sorted({batch} if args.cpu else {batch, CUDA_GRAPH_SMALL_BATCH}, reverse=True):
                e = entry if b == batch else step(f"infer-b{b}", [args.vapipe, "bench", "infer", cfg, "--batch", str(b)], 120)
                res = (e or {}).get("result") or {}
                graphs[str(b)] = {"plain": res.get("per_second"), "cuda_graph": res.get("cuda_graph_per_second"),
                                  "note": res.get("cuda_graph")}
        if "e2e" not in args.skip:
            with open(cfg) as f:
                scraper = MetricsScraper(json.load(f)["publish"]["metrics_address"])
            sampler = ResourceSampler(args.vapipe)
            e = step(f"e2e-{n}", [args.vapipe, "run", cfg], 240, min_s=30)
            scraper.finish()
            sampler.finish()
            w = row["where_the_time_went"] = scraper.where_the_time_went()
            if w:
                t0, t1 = w.pop("t")
                for name, cores in sampler.cpu_cores(t0, t1).items():
                    w["stages"].setdefault(name, {})["cpu_cores"] = cores
                w["gpu"] = sampler.gpu_use(t0, t1)
            spath = cfg[:-5] + "-summary.json"
            if e.get("status") in ("ok", "failed", "timeout") and os.path.exists(spath):
                with open(spath) as f:
                    s = json.load(f)
                e["summary"] = s
                row.update({"e2e_steady": s.get("steady_fps"), "e2e_job": s.get("fps"), "frames": s.get("frames"),
                            "steady_s": s.get("steady_s"), "job_wall_s": s.get("wall_s"), "latency_ms_mean_max": max(
                                (x.get("latency_ms_mean", 0) for x in s.get("streams", [])), default=None)})
                problems = summary_check(s, expected)
                row["every_frame"] = not problems and e["status"] == "ok"
                row["problems"] = problems[:10]
            row["e2e_status"] = e.get("status")
            save()
    if "per-frame" not in args.skip:
        pcfg, _ = write_config(os.path.join(out, f"{mode}-perframe-{pf_streams}streams.yaml"), args, clips,
                               pf_streams, batch, summary=False)
        per_frame = per_second(step(f"per-frame-{pf_streams}", [args.vapipe, "bench", "per-frame", pcfg], 150))
    for row in result["rows"]:
        row["infer"], row["per_frame"] = infer, per_frame
        d, e2e = row.get("decode"), row.get("e2e_steady")
        row["e2e_over_decode"] = e2e / d if e2e and d else None
        row["e2e_over_per_frame"] = e2e / per_frame if e2e and per_frame else None
        row["streams_1080p30"] = e2e / 30.0 if e2e else None
    save()

    # The table.
    dev = "NVDEC" if not args.cpu else "CPU decoder"
    where = (result["gpu"] + f", {os.cpu_count()} CPU cores") if result["gpu"] else f"{os.cpu_count()} CPU cores, no GPU"
    per_clip = sorted({n for _, n in clips if n})
    lines = [
        f"{'GPU' if not args.cpu else 'CPU check (--cpu, not a benchmark)'}: measured {result['date']} on {where}; "
        f"{len(clips)} distinct 1080p30 H.264 clips ({'/'.join(map(str, per_clip)) or 'unknown'} frames each), "
        f"stream i reads clip i mod {len(clips)}; model {result['model']} "
        f"({'fp32, CPU' if args.cpu else 'TorchScript fp16, channels-last, CUDA'}); batch {batch}, max delay "
        f"{args.max_delay_ms:g} ms; per-frame loop on {pf_streams} stream{'s' if pf_streams != 1 else ''}; {version}.",
        "",
        f"| streams | decode alone ({dev}) | classifier alone (batch {batch}) | end to end (steady) | e2e / decode | "
        f"end to end (job, incl. start-up) | per-frame loop | e2e / per-frame | 1080p30 streams (e2e / 30) | "
        f"frames, steady s | every frame classified |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        ok = {True: "yes", False: "NO: " + "; ".join(r.get("problems") or [r.get("e2e_status") or "?"])}.get(
            r.get("every_frame"), r.get("e2e_status") or "—")
        lines.append(
            f"| {r['streams']} | {fmt(r.get('decode'))} | {fmt(r.get('infer'))} | {fmt(r.get('e2e_steady'))} | "
            f"{fmt(r.get('e2e_over_decode'), '.0%')} | {fmt(r.get('e2e_job'))} | {fmt(r.get('per_frame'))} | "
            f"{fmt(r.get('e2e_over_per_frame'), '.1f')}{'x' if r.get('e2e_over_per_frame') else ''} | "
            f"{fmt(r.get('streams_1080p30'), '.1f')} | {fmt(r.get('frames'), 'd')}, {fmt(r.get('steady_s'), '.1f')} | {ok} |")
    lines += ["", "frames (images) per second. Steps: " + ", ".join(
        f"{k} {v['status']}" + (f" ({v.get('wall_s')} s)" if v.get("wall_s") is not None else "")
        for k, v in result["steps"].items()) + "."]
    starts = [r for r in result["rows"] if r.get("decode_startup_s") is not None]
    if starts:
        lines += ["", "Decode alone counts from the moment every stream's pipeline was built and its file prerolled "
                      "(decoder started, first frame decoded), as ingest builds them behind its start-up gate; that "
                      "start-up took: " + ", ".join(
                          f"{r['streams']} streams {r['decode_startup_s']:.1f} s ({r.get('decode_prerolled')} "
                          f"prerolled)" for r in starts) + ". End to end (steady) counts from the first frame's capture."]
    used = [r for r in result["rows"] if r.get("decode_resources")]
    if used:
        lines += ["", "While decoding alone (the bench process's CPU cores over its life; the GPU's use, from "
                      "`nvidia-smi dmon`, over the seconds it was busy): " + "; ".join(
                          f"{r['streams']} streams: {fmt((r['decode_resources']['cpu_cores'] or {}).get('bench decode'), '.1f')} "
                          f"cores, {gpu_use_text(r['decode_resources'].get('gpu'))}" for r in used) + "."]
    if not args.cpu:
        best = max((r for r in result["rows"] if r.get("e2e_steady")), key=lambda r: r["e2e_steady"], default=None)
        if best:
            ratio_ok = best.get("e2e_over_decode") is not None and best["e2e_over_decode"] >= E2E_OVER_DECODE_GOAL
            streams_ok = best["e2e_steady"] >= 30 * STREAMS_PER_GPU_GOAL
            lines.append(f"Goal: end to end >= {E2E_OVER_DECODE_GOAL:.0%} of NVDEC alone: "
                         f"{'met' if ratio_ok else 'NOT met'} ({fmt(best.get('e2e_over_decode'), '.0%')} at "
                         f"{best['streams']} streams); >= {STREAMS_PER_GPU_GOAL} 1080p30 streams "
                         f"({30 * STREAMS_PER_GPU_GOAL} frames/s): {'met' if streams_ok else 'NOT met'} "
                         f"({best['e2e_steady'] / 30:.1f}).")
    graphs = result.get("classifier_cuda_graphs")
    if graphs:
        lines += ["", "Classifier alone, images/s, each batch run plainly (one launch per layer) and replayed as a "
                      "CUDA graph (infer.cuda_graphs): " + "; ".join(
                          f"batch {b}: {fmt(g['plain'])} plain, {fmt(g['cuda_graph'])} as a graph"
                          + (f" ({g['note']})" if g.get("note") else "") for b, g in graphs.items()) + "."]
    for r in result["rows"]:
        w = r.get("where_the_time_went")
        if not w:
            continue
        lines += ["", f"Where the time went at {r['streams']} streams (shares of {w['window_s']} s in the middle of the "
                      f"run, from the stage metrics): the stage whose own work is near 100% limits the job.", "",
                  "| stage | own work | blocked sending | waiting for slots | waiting for input | mean batch | "
                  "batches replayed as CUDA graphs | CPU cores |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, st in w["stages"].items():
            if name.startswith("ingest"):
                name += " (its streams' waits, summed)"
            lines.append(f"| {name} | {fmt(st.get('own_work'), '.0%')} | {fmt(st.get('send_blocked'), '.0%')} | "
                         f"{fmt(st.get('slot_wait'), '.0%')} | {fmt(st.get('input_wait'), '.0%')} | "
                         f"{fmt(st.get('mean_batch'), '.1f')} | {fmt(st.get('graph_share'), '.0%')} | "
                         f"{fmt(st.get('cpu_cores'), '.1f')} |")
        if w.get("gpu"):
            lines += ["", f"The GPU over that window (`nvidia-smi dmon`): {gpu_use_text(w['gpu'])}."]
    text = "\n".join(lines)
    result["markdown"] = text
    save()
    with open(os.path.join(out, "gpu-bench.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\n(results: {os.path.join(out, 'gpu-bench.json')}; configs and logs in {out})")
    failed = [k for k, v in result["steps"].items() if v["status"] != "ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
