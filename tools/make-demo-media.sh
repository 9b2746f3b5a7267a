#!/usr/bin/env bash
# Makes the two small clips the demo ships in configs/media/ (H.264 in MP4 and in Matroska), from
# GStreamer's videotestsrc. Re-run only to change them; they are committed.
set -euo pipefail
out="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/configs/media"
mkdir -p "$out"
gst-launch-1.0 -q videotestsrc pattern=pinwheel num-buffers=90 horizontal-speed=2 \
  ! video/x-raw,width=640,height=360,framerate=30/1 ! x264enc bitrate=400 speed-preset=veryfast key-int-max=30 \
  ! h264parse ! mp4mux ! filesink location="$out/pinwheel-640x360.mp4"
gst-launch-1.0 -q videotestsrc pattern=colors num-buffers=90 horizontal-speed=-3 \
  ! video/x-raw,width=480,height=270,framerate=30/1 ! x264enc bitrate=300 speed-preset=veryfast key-int-max=30 \
  ! h264parse ! matroskamux ! filesink location="$out/colors-480x270.mkv"
ls -l "$out"
