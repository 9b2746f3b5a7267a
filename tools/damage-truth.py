#!/usr/bin/env python3
"""How right the results' "damaged" flag is, measured against the pictures themselves.

A file that lost data (an MPEG-TS recording with packets cut out) and the same file whole are decoded
by GStreamer to grey pictures, frame by frame with their timestamps. Decoding is exact: a picture of the
damaged file that decodes to the very bytes of the whole file's picture at the same timestamp is whole;
any other is smeared (it, or a picture it refers to, lost data and the decoder concealed it). Those
truths are then compared with the `damaged` of vapipe's results for that stream (a `publish.jsonl_path`
file), matched by `pts_ms`.

  tools/damage-truth.py WHOLE_FILE DAMAGED_FILE RESULTS_JSONL STREAM_ID [--timeline] [--list] [--tolerance N]

Prints the four counts (smeared and marked, smeared and not marked, whole and marked, whole and not
marked), recall (of the smeared pictures, the share marked) and precision (of those marked, the share
smeared). --timeline prints one letter per picture in time order, --list each picture's pts_ms and
letter, a line each. --tolerance N: a picture is smeared only where some pixel differs by more than N
grey levels (default 0: any difference). libav leaves differences of 1 in a few dozen pixels of the
pictures after a reference picture that lost part of its data, until the next key frame, even in
pictures that do not refer to it (seen with x264's open GOP, 2026-12-06): `--tolerance 2` counts those
whole. Needs gst-launch-1.0 only.
"""
import json
import re
import subprocess
import sys
import tempfile

CHAIN = re.compile(r"chain .*?\((\d+) bytes, dts: [^,]*, pts: (\d+):(\d+):(\d+)\.(\d+)")


def decode(path):
    """{pts in ms (rounded to 0.1): picture bytes} for every picture GStreamer decodes from `path`."""
    with tempfile.NamedTemporaryFile(suffix=".gray") as raw:
        cmd = ["gst-launch-1.0", "-v", "filesrc", "location=" + path, "!", "decodebin", "!", "videoconvert", "!",
               "video/x-raw,format=GRAY8", "!", "identity", "silent=false", "!", "filesink", "location=" + raw.name]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            said = (run.stderr or run.stdout).strip().splitlines()
            sys.exit(f"damage-truth: GStreamer could not decode {path}: {said[-1] if said else 'no output'}")
        out = run.stdout
        sizes_and_pts = []
        for line in out.splitlines():
            if "identity" not in line:
                continue
            m = CHAIN.search(line)
            if m:
                h, mi, s, frac = int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5)
                pts_ms = ((h * 60 + mi) * 60 + s) * 1000 + int(frac.ljust(9, "0")) / 1e6
                sizes_and_pts.append((int(m.group(1)), round(pts_ms, 1)))
        data = open(raw.name, "rb").read()
    pictures, at = {}, 0
    for size, pts in sizes_and_pts:
        pictures[pts] = data[at:at + size]
        at += size
    return pictures


def is_smeared(picture, reference, tolerance):
    """Whether a picture differs from the whole file's: any byte, or (tolerance) by more than that much."""
    if picture == reference:
        return False
    if tolerance == 0 or len(picture) != len(reference):
        return True
    return any(abs(a - b) > tolerance for a, b in zip(picture, reference))


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    whole_path, damaged_path, results_path, stream_id = sys.argv[1:5]
    tolerance = 0
    if "--tolerance" in sys.argv[5:]:
        at = sys.argv.index("--tolerance")
        try:
            tolerance = int(sys.argv[at + 1])
        except (IndexError, ValueError):
            sys.exit("damage-truth: --tolerance takes a number of grey levels")
    whole, damaged = decode(whole_path), decode(damaged_path)
    marked = {}
    try:
        lines = open(results_path).readlines()
    except OSError as e:
        sys.exit(f"damage-truth: results file {results_path}: {e.strerror}")
    for line in lines:
        payload = json.loads(line).get("payload", {})
        if payload.get("schema") == "vapipe.result" and payload.get("stream_id") == stream_id:
            marked[round(payload["pts_ms"], 1)] = bool(payload.get("damaged"))
    counts = {(s, m): 0 for s in (True, False) for m in (True, False)}
    unmatched = 0
    timeline = []  # per picture in time order: S smeared and marked, s smeared not marked, w whole but marked, . whole
    for pts, picture in sorted(damaged.items()):
        # Results' pts_ms and GStreamer's timestamps may differ in the last digit: the nearest within 1 ms.
        key = min(marked, key=lambda k: abs(k - pts)) if marked else None
        reference = whole.get(pts)
        if key is None or abs(key - pts) > 1.0 or reference is None:
            unmatched += 1
            continue
        truth = (is_smeared(picture, reference, tolerance), marked[key])
        counts[truth] += 1
        timeline.append((pts, {(True, True): "S", (True, False): "s", (False, True): "w", (False, False): "."}[truth]))
    smeared = counts[(True, True)] + counts[(True, False)]
    flagged = counts[(True, True)] + counts[(False, True)]
    print(f"{stream_id}: {len(damaged)} pictures of the damaged file ({len(whole)} whole), {len(marked)} results, "
          f"{unmatched} not matched")
    print(f"  smeared and marked {counts[(True, True)]}, smeared not marked {counts[(True, False)]}, "
          f"whole but marked {counts[(False, True)]}, whole not marked {counts[(False, False)]}")
    if smeared:
        print(f"  recall {counts[(True, True)] / smeared:.3f} (of the smeared, marked)")
    if flagged:
        print(f"  precision {counts[(True, True)] / flagged:.3f} (of the marked, smeared)")
    if "--timeline" in sys.argv[5:]:
        print("  " + "".join(letter for _, letter in timeline) +
              "  (S smeared and marked, s smeared not marked, w whole but marked, . whole)")
    if "--list" in sys.argv[5:]:
        for pts, letter in timeline:
            print(f"  {pts:10.1f} {letter}")


if __name__ == "__main__":
    main()
