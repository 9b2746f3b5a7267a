#!/usr/bin/env bash
# The GPU benchmark (tools/gpu-bench.py): NVDEC alone, ResNet-50 fp16 alone, the whole pipeline and a
# per-frame loop, in one run, on the 1080p clips of tools/make-gpu-media.sh. On the GPU machine
# tools/gpu-check.sh runs it after building; this wrapper is for a machine where vapipe is built already.
#   tools/gpu-bench.sh [--cpu] [gpu-bench.py options]        e.g. --streams 32,80 --budget-s 300
# Defaults: VAPIPE_BIN (else $VAPIPE_BUILD_DIR/cli/vapipe, else build/cli/vapipe), --media .devmedia
# (made here with tools/make-gpu-media.sh if missing), --model: a random-weight ResNet-50 made once
# into $VAPIPE_BUILD_DIR/models (a python3 with torch: $PYTHON, python3 or /usr/bin/python3).
# --cpu checks the script logic without a GPU (CPU decoder and devices; the shipped pattern CNN unless
# --model is given) on small clips made into build/gpu-bench-cpu-media.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VAPIPE_BUILD_DIR:-$root/build}"
vapipe="${VAPIPE_BIN:-$build/cli/vapipe}"
[[ -x "$vapipe" ]] || { echo "gpu-bench: no vapipe at $vapipe (build it: tools/build.sh, or set VAPIPE_BIN)" >&2; exit 1; }
cpu=0 have_media=0 have_model=0
for a in "$@"; do
  case "$a" in --cpu) cpu=1 ;; --media|--media=*) have_media=1 ;; --model|--model=*) have_model=1 ;; esac
done
torch_python() {
  local p
  for p in "${PYTHON:-}" python3 /usr/bin/python3; do
    [[ -n "$p" ]] && "$p" -c 'import torch' >/dev/null 2>&1 && { echo "$p"; return 0; }
  done
  echo "gpu-bench: no python3 with torch found (set PYTHON)" >&2
  return 1
}
extra=()
if [[ $have_media == 0 ]]; then
  if [[ $cpu == 1 ]]; then
    media="$build/gpu-bench-cpu-media"
    [[ -f "$media/media.json" ]] || "$root/tools/make-gpu-media.sh" "$media" --clips 2 --frames 60 --short 10
  else
    media="$root/.devmedia"
    [[ -f "$media/media.json" ]] || "$root/tools/make-gpu-media.sh" "$media"
  fi
  extra+=(--media "$media")
fi
if [[ $have_model == 0 && $cpu == 0 ]]; then
  model="$build/models/resnet50_random.pt"
  [[ -f "$model" ]] || "$(torch_python)" "$root/tools/make_resnet50.py" "$model" --check-fp16
  extra+=(--model "$model")
fi
py=$(command -v python3 || echo /usr/bin/python3)
exec env PYTHONUNBUFFERED=1 "$py" "$root/tools/gpu-bench.py" --vapipe "$vapipe" "${extra[@]}" "$@"
