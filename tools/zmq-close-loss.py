"""Does this machine's libzmq lose what a closed PUSH socket had already sent? The reason ingest keeps a
finished stream's socket open (SenderPool, pipeline/transport.h) instead of closing it.

A PUSH socket sends small messages to a PULL socket with a small receive high-water mark that is not
reading yet, then closes (with a linger that would wait for everything); the receiver then reads
what arrives. Over ipc:// with Debian 12's libzmq 4.3.4, 3 or 4 of 40 messages arrive in most runs
(libzmq issue #4660): the sender had handed every message to the kernel, so its linger has nothing to
wait for, and what the receiver's connection held beyond its high-water mark goes when the connection
closes. Our edges send small descriptors over ipc:// with a high-water mark of a few messages.

Usage: /usr/bin/python3 tools/zmq-close-loss.py [--runs 10] [--messages 40]
Prints one line per case; exits 0 either way (it measures libzmq, it does not test vapipe).
"""
import argparse
import os
import tempfile
import threading
import time

import zmq


def received_after_close(endpoint, rcvhwm, messages, size, close_sender):
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, rcvhwm)
    pull.bind(endpoint)
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.SNDHWM, rcvhwm)
    push.setsockopt(zmq.LINGER, -1)  # wait for ever for what is unsent: the loss is not linger's
    push.connect(endpoint)
    got = []

    def read_later():
        time.sleep(0.3)  # the receiver is busy: everything sent meanwhile waits
        while pull.poll(1000):
            got.append(pull.recv())
            time.sleep(0.001)

    reader = threading.Thread(target=read_later)
    reader.start()
    for _ in range(messages):
        push.send(b"x" * size)
    if close_sender:
        push.close()
    reader.join()
    pull.close()
    if not close_sender:
        push.close()
    ctx.term()
    return len(got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--messages", type=int, default=40)
    args = ap.parse_args()
    print(f"libzmq {zmq.zmq_version()}, pyzmq {zmq.__version__}: {args.runs} runs a case")
    with tempfile.TemporaryDirectory(prefix="vapipe-zmq-") as tmp:
        n = args.messages
        cases = [  # (label, endpoint, receive HWM, messages, message bytes, close the sender?)
            ("ipc, HWM 2, 100 B, sender closed", f"ipc://{tmp}/a", 2, n, 100, True),
            ("ipc, HWM 2, 100 B, sender kept open", f"ipc://{tmp}/b", 2, n, 100, False),
            ("ipc, HWM 1000, 100 B, sender closed", f"ipc://{tmp}/c", 1000, n, 100, True),
            ("ipc, HWM 2, 100 KB, sender closed", f"ipc://{tmp}/d", 2, n, 100_000, True),
            ("tcp, HWM 2, 100 B, sender closed", "tcp://127.0.0.1:0", 2, n, 100, True),
            # vapipe's edges: kEdgeHighWaterMark (pipeline/job_layout.h), descriptors of a few hundred bytes
            ("ipc, HWM 64, 200 B, sender closed", f"ipc://{tmp}/e", 64, 10 * n, 200, True),
        ]
        for label, endpoint, hwm, messages, size, close in cases:
            counts = []
            for run in range(args.runs):
                ep = endpoint if not endpoint.endswith(":0") else f"tcp://127.0.0.1:{27100 + run}"
                if ep.startswith("ipc://") and os.path.exists(ep[6:]):
                    os.unlink(ep[6:])
                counts.append(received_after_close(ep, hwm, messages, size, close))
            lossy = sum(c < messages for c in counts)
            print(f"{label}: {lossy} of {args.runs} runs lost messages (received: min {min(counts)}, "
                  f"max {max(counts)} of {messages})")


if __name__ == "__main__":
    main()
