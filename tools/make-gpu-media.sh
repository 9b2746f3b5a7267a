#!/usr/bin/env bash
# Makes the media for the GPU benchmark and the NVDEC ingest tests (the GPU machine has no encoders,
# so the clips are made here and carried there; see tools/gpu-check.sh):
#   - CLIPS 1920x1080 30 fps H.264 clips of FRAMES frames each, moving test patterns, x264 at
#     BITRATE kbit/s (High profile, 4:2:0, a key frame every 2 s), named bench-NN-PATTERN.mp4.
#     tools/gpu-bench.py gives each stream one of them in turn, so 80 streams can share 8 files
#     (every stream is decoded separately).
#   - nvdec-h264.mp4 and nvdec-h265.mp4: short (SHORT frames) 1080p30 clips for the ingest tests.
#   - media.json: frames, size and codec of every file (gpu-bench.py checks frame counts with it).
#
#   tools/make-gpu-media.sh [OUTDIR] [--clips N] [--frames N] [--bitrate KBPS] [--short N]
#   defaults: OUTDIR .devmedia, --clips 8 --frames 300 --bitrate 2500 --short 60
#
# Defaults make about 24 MB in all (see docs/benchmarks.md); the device tool carries at most 64 MiB
# (working tree, .devdeps.tgz and this folder together). Files already there are kept (delete the
# folder to remake them). Needs gst-launch-1.0 with x264enc, x265enc, h264parse, h265parse, mp4mux.
set -euo pipefail
out=.devmedia clips=8 frames=300 bitrate=2500 short=60
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clips) clips=$2; shift 2 ;;
    --frames) frames=$2; shift 2 ;;
    --bitrate) bitrate=$2; shift 2 ;;
    --short) short=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "make-gpu-media: unknown option $1" >&2; exit 1 ;;
    *) out=$1; shift ;;
  esac
done
for e in x264enc x265enc h264parse h265parse mp4mux videotestsrc; do
  gst-inspect-1.0 "$e" >/dev/null 2>&1 || { echo "make-gpu-media: GStreamer element $e is missing" >&2; exit 1; }
done
mkdir -p "$out"
caps="video/x-raw,format=I420,width=1920,height=1080,framerate=30/1"
# Patterns that move every frame, ordered by how close x264 comes to the bitrate with them (measured at
# 2500 kbit/s: smpte and checkers-8 reach it, zone-plate/chroma-zone-plate/colors/circular 1.8-2.0 Mbit/s,
# gamut 1.5, spokes 1.2; flat patterns such as ball or gradient need under 0.2 and are left to the end).
patterns=("smpte horizontal-speed=4" "checkers-8 horizontal-speed=1" "zone-plate kt=2 kx=1 ky=1"
          "colors horizontal-speed=5" "circular horizontal-speed=3" "chroma-zone-plate kt=1 kx=2"
          "gamut horizontal-speed=4" "spokes horizontal-speed=2" "smpte horizontal-speed=-3"
          "checkers-4 horizontal-speed=2" "zone-plate kt=3 kx=2 ky=2" "colors horizontal-speed=-5"
          "circular horizontal-speed=-2" "pinwheel horizontal-speed=3" "checkers-2 horizontal-speed=3"
          "ball motion=wavy")
encode() { # PATH FRAMES PATTERN... ENCODER-PIPELINE
  local path=$1 n=$2 pattern=$3 enc=$4
  [[ -s "$path" ]] && return 0
  # shellcheck disable=SC2086  # pattern and enc are element descriptions: word splitting wanted
  gst-launch-1.0 -q videotestsrc num-buffers="$n" pattern=$pattern ! "$caps" ! $enc ! mp4mux ! filesink location="$path.part"
  mv "$path.part" "$path"
}
files=()
for ((i = 0; i < clips; i++)); do
  p=${patterns[i % ${#patterns[@]}]}
  name=$(printf 'bench-%02d-%s.mp4' "$i" "${p%% *}")
  encode "$out/$name" "$frames" "$p" \
    "x264enc bitrate=$bitrate speed-preset=veryfast key-int-max=60 bframes=2 ! video/x-h264,profile=high ! h264parse"
  files+=("$name")
done
encode "$out/nvdec-h264.mp4" "$short" "smpte horizontal-speed=4" \
  "x264enc bitrate=$bitrate speed-preset=veryfast key-int-max=30 ! video/x-h264,profile=high ! h264parse"
encode "$out/nvdec-h265.mp4" "$short" "checkers-8 horizontal-speed=1" \
  "x265enc bitrate=$bitrate speed-preset=ultrafast key-int-max=30 ! video/x-h265,profile=main ! h265parse"

# media.json: what each file holds (frame counts as made, not probed: the GPU machine has no discoverer).
{
  echo '{"width": 1920, "height": 1080, "fps": 30, "bitrate_kbps": '"$bitrate"', "files": {'
  sep=
  for f in "${files[@]}"; do
    printf '%s "%s": {"frames": %d, "codec": "h264", "bytes": %d, "use": "bench"}' "$sep" "$f" "$frames" "$(stat -c %s "$out/$f")"
    sep=$',\n'
  done
  printf '%s "nvdec-h264.mp4": {"frames": %d, "codec": "h264", "bytes": %d, "use": "test"}' "$sep" "$short" "$(stat -c %s "$out/nvdec-h264.mp4")"
  printf ',\n "nvdec-h265.mp4": {"frames": %d, "codec": "h265", "bytes": %d, "use": "test"}' "$short" "$(stat -c %s "$out/nvdec-h265.mp4")"
  echo '}}'
} > "$out/media.json"
echo "make-gpu-media: $clips clips x $frames frames 1080p30 H.264 at $bitrate kbit/s + H.264/H.265 test clips of $short frames in $out:"
du -b "$out"/*.mp4 | awk '{printf "  %8.2f MB  %s\n", $1 / 1e6, $2; t += $1} END {printf "  %8.2f MB  total\n", t / 1e6}'
