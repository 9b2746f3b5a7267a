#!/usr/bin/python3
"""After RTP packet loss, wait for the next key frame or decode on? What ingest does (decode on, with
libav's output-corrupt off) against rtph264depay's wait-for-keyframe, on a real RTSP server on
loopback (gst-rtsp-server): videotestsrc (live, 30 fps, 320x240, a key frame every 60 frames) ->
x264enc -> rtph264pay -> identity drop-probability=P (the loss, made by the sender: no netem here) ->
rtspsrc (UDP) -> rtph264depay -> avdec_h264 output-corrupt=false. A still picture (smpte) is sent, so
any frame that differs from the picture is damage: prints, for each loss rate and mode, the frames
decoded and how many differ from the median picture by more than 6 in mean luma (the threshold the
late-joiner test uses; smears were 71).
    tools/loss-keyframe-bench.py [--seconds 8] [--losses 0,0.005,0.02]
"""
import argparse
import threading
import time

import numpy as np
import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def serve(port, loss):
    server = GstRtspServer.RTSPServer()
    server.set_service(str(port))
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        "( videotestsrc is-live=true pattern=smpte ! video/x-raw,width=320,height=240,framerate=30/1 ! "
        "x264enc tune=zerolatency speed-preset=ultrafast key-int-max=60 ! rtph264pay config-interval=1 ! "
        f"identity name=pay0 drop-probability={loss} )")
    server.get_mount_points().add_factory("/test", factory)
    return server.attach(None)


def measure(port, seconds, wait_for_keyframe):
    pipeline = Gst.parse_launch(
        f"rtspsrc location=rtsp://127.0.0.1:{port}/test latency=200 protocols=udp ! "
        f"rtph264depay wait-for-keyframe={'true' if wait_for_keyframe else 'false'} ! h264parse ! "
        "avdec_h264 output-corrupt=false ! video/x-raw,format=I420 ! appsink name=out sync=false")
    out = pipeline.get_by_name("out")
    pipeline.set_state(Gst.State.PLAYING)
    lumas, start = [], time.time()
    while time.time() - start < seconds:
        sample = out.emit("try-pull-sample", Gst.SECOND)
        if sample is None:
            continue
        buffer = sample.get_buffer()
        ok, info = buffer.map(Gst.MapFlags.READ)
        lumas.append(np.frombuffer(info.data, dtype=np.uint8)[:320 * 240].astype(float).copy())
        buffer.unmap(info)
    pipeline.set_state(Gst.State.NULL)
    if not lumas:
        return 0, 0, 0.0
    picture = np.median(np.stack(lumas[::5]), axis=0)
    diffs = [abs(y - picture).mean() for y in lumas]
    return len(lumas), sum(d > 6 for d in diffs), max(diffs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--losses", default="0,0.005,0.02")
    args = parser.parse_args()
    Gst.init(None)
    loop = GLib.MainLoop()
    threading.Thread(target=loop.run, daemon=True).start()
    print("| packets lost | after a loss | frames decoded | damaged (mean luma off by > 6) | largest difference |")
    print("|---|---|---|---|---|")
    port = 8650
    for loss in (float(x) for x in args.losses.split(",")):
        for wait in (False, True):
            port += 1
            source = serve(port, loss)
            frames, damaged, worst = measure(port, args.seconds, wait)
            GLib.source_remove(source)
            mode = "wait for a key frame (depayloader)" if wait else "decode on (ingest)"
            print(f"| {loss:.1%} | {mode} | {frames} | {damaged} | {worst:.1f} |", flush=True)


if __name__ == "__main__":
    main()
