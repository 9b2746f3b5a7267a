#!/usr/bin/python3
"""What ingest.rtsp_latency_ms does when RTP packets are lost: the jitter buffer of GStreamer's
rtspsrc (an rtpjitterbuffer) waits up to that long for a missing packet before the frames behind it
go on. This VM cannot drop packets on loopback (no netem), so the loss is made by the sender:
videotestsrc (live, 30 fps) -> x264enc -> rtph264pay -> identity drop-probability=P -> udpsink, and
udpsrc -> rtpjitterbuffer latency=L -> rtph264depay -> avdec_h264 -> fakesink (no clock sync, as
ingest's appsink). Prints, for each loss rate and latency, the frames decoded and the gaps between
consecutive decoded frames (wall clock): median, 99th percentile and the longest, i.e. how long a
camera's frames were held back.
    tools/jitterbuffer-loss-bench.py [--seconds 15] [--latencies 2000,200] [--losses 0,0.005,0.02]
"""
import argparse
import statistics
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402


def run(seconds, latency_ms, loss, port):
    send = Gst.parse_launch(
        "videotestsrc is-live=true pattern=ball ! video/x-raw,width=640,height=360,framerate=30/1 ! "
        "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=30 bitrate=1500 ! "
        "rtph264pay pt=96 config-interval=1 mtu=1200 ! "
        f"identity drop-probability={loss} ! udpsink host=127.0.0.1 port={port} sync=false")
    recv = Gst.parse_launch(
        f'udpsrc port={port} caps="application/x-rtp,media=video,encoding-name=H264,clock-rate=90000,payload=96" ! '
        f"rtpjitterbuffer latency={latency_ms} do-lost=true ! rtph264depay ! avdec_h264 ! fakesink name=sink sync=false")
    arrivals = []
    sink_pad = recv.get_by_name("sink").get_static_pad("sink")
    sink_pad.add_probe(Gst.PadProbeType.BUFFER, lambda pad, info: (arrivals.append(time.monotonic()), Gst.PadProbeReturn.OK)[1])
    recv.set_state(Gst.State.PLAYING)
    send.set_state(Gst.State.PLAYING)
    loop = GLib.MainLoop()
    GLib.timeout_add(int(seconds * 1000), loop.quit)
    loop.run()
    send.set_state(Gst.State.NULL)
    recv.set_state(Gst.State.NULL)
    arrivals = arrivals[30:]  # the first second: start-up
    gaps = sorted(b - a for a, b in zip(arrivals, arrivals[1:]))
    if not gaps:
        return len(arrivals), None, None, None
    p99 = gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))]
    return len(arrivals), statistics.median(gaps), p99, gaps[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--latencies", default="2000,200")
    ap.add_argument("--losses", default="0,0.005,0.02")
    ap.add_argument("--port", type=int, default=47000)
    args = ap.parse_args()
    Gst.init(None)
    print(f"Measured {time.strftime('%Y-%m-%d')}, {args.seconds:.0f} s each, 640x360 H.264 at 30 fps over loopback "
          f"UDP, command `tools/jitterbuffer-loss-bench.py --seconds {args.seconds:g} --latencies {args.latencies} "
          f"--losses {args.losses}`.\n")
    print("| packets lost | jitter buffer (ms) | frames decoded | median gap (ms) | 99th pct gap (ms) | longest gap (ms) |")
    print("|---|---|---|---|---|---|")
    port = args.port
    for loss in [float(x) for x in args.losses.split(",")]:
        for latency in [int(x) for x in args.latencies.split(",")]:
            port += 2  # a fresh port: no packet of the last run arrives late into this one
            frames, median, p99, longest = run(args.seconds, latency, loss, port)
            fmt = lambda s: "-" if s is None else f"{1000 * s:.0f}"  # noqa: E731
            print(f"| {100 * loss:g}% | {latency} | {frames} | {fmt(median)} | {fmt(p99)} | {fmt(longest)} |", flush=True)


if __name__ == "__main__":
    main()
