#!/usr/bin/env bash
# The throughput benchmark (issue: archive pipeline end to end). Builds vapipe, makes eight 720p
# H.264 clips of 300 frames and a ResNet-18 TorchScript model with random weights, then measures, in
# one run: each stage alone and the whole five-process pipeline, for the shipped CNN and ResNet-18,
# and a per-frame loop. Prints a Markdown table (for docs/benchmarks.md) and writes JSON next to it.
#   tools/bench.sh [--clips N] [--frames N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VAPIPE_SETUP_TRAINING=1 "$root/tools/setup.sh"   # python3-torch makes the ResNet-18
"$root/tools/build.sh"
exec /usr/bin/python3 "$root/tools/bench.py" --vapipe "${VAPIPE_BUILD_DIR:-$root/build}/cli/vapipe" "$@"
