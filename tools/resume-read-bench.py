#!/usr/bin/env python3
"""What `vapipe run --resume` costs before a stage starts: reading the whole results file of an archive
job (a watched folder's job that has run for long has one large file). Runs one real archive job of one
test stream to get real lines, writes a results file of `--streams` such streams of `--frames` results
each from them (their ids and seq changed, one summary at the end), then times `vapipe run --resume` of a
config with those streams three times: the job is complete, so it reads the file, says so and exits.

    /usr/bin/python3 tools/resume-read-bench.py [--streams 300] [--frames 3000]
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config_text(streams, frames, jsonl):
    return json.dumps({"job": {"name": "resume-read"},
                       "streams": [{"id": f"s{n:04d}", "uri": f"test://ball?frames={frames}&width=64&height=48"}
                                   for n in range(streams)],
                       "infer": {"model": os.path.join(ROOT, "models", "pattern_cnn.pt"),
                                 "labels": os.path.join(ROOT, "models", "pattern_cnn.labels.txt")},
                       "publish": {"wait_for_subscribers": 0, "jsonl_path": jsonl}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=300)
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--vapipe", default=os.path.join(ROOT, "build", "cli", "vapipe"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="vapipe-resume-read-")
    try:
        one = os.path.join(work, "one.jsonl")
        with open(os.path.join(work, "one.yaml"), "w") as f:
            f.write(config_text(1, args.frames, one))
        subprocess.run([args.vapipe, "run", os.path.join(work, "one.yaml")], check=True, capture_output=True)
        with open(one) as f:
            lines = [json.loads(line) for line in f]
        per_stream = [m for m in lines if m["topic"] != "job/summary"]
        summary = [m for m in lines if m["topic"] == "job/summary"][0]
        big = os.path.join(work, "results.jsonl")
        with open(big, "w") as out:
            for n in range(args.streams):
                sid = f"s{n:04d}"
                for m in per_stream:
                    m = {"topic": m["topic"].split("/")[0] + "/" + sid, "payload": dict(m["payload"], stream_id=sid)}
                    out.write(json.dumps(m, separators=(",", ":")) + "\n")
            streams = [dict(summary["payload"]["streams"][0], stream_id=f"s{n:04d}") for n in range(args.streams)]
            out.write(json.dumps({"topic": "job/summary", "payload": dict(summary["payload"], streams=streams,
                                                                        frames=args.streams * args.frames)}) + "\n")
        size_mb = os.path.getsize(big) / 1e6
        lines_in_all = args.streams * len(per_stream) + 1
        config = os.path.join(work, "job.yaml")
        with open(config, "w") as f:
            f.write(config_text(args.streams, args.frames, big))
        times = []
        for _ in range(3):
            t = time.time()
            run = subprocess.run(["/usr/bin/time", "-f", "%M", args.vapipe, "run", config, "--resume"],
                                 capture_output=True, text=True)
            times.append((time.time() - t, int(run.stderr.strip().splitlines()[-1]) / 1024))
            assert run.returncode == 0 and "already complete" in run.stderr, run.stderr[-2000:]
        print(f"`tools/resume-read-bench.py --streams {args.streams} --frames {args.frames}`: a results file of "
              f"{lines_in_all:,} lines ({size_mb:,.0f} MB, {args.streams} streams): `vapipe run --resume` read it "
              f"in " + ", ".join(f"{t:.1f} s" for t, _ in times) +
              f" (peak RSS {max(m for _, m in times):.0f} MB)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
