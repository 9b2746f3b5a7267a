#!/usr/bin/env python3
"""What CURVE encryption costs on a ZeroMQ edge: messages/s and MB/s of PUSH -> PULL over loopback TCP,
plain and with CURVE, for message sizes vapipe sends (a result, a 224x224 fp16 and fp32 tensor, a
1080p NV12 frame: what crosses hosts with transport.mode tcp). Both ends in this process, one I/O
thread each, so the figures are one core's worth of encryption plus decryption.

Usage: /usr/bin/python3 tools/curve-bench.py [--seconds S]
"""
import argparse
import threading
import time

import zmq

SIZES = [("result JSON", 600), ("tensor 224x224 fp16", 3 * 224 * 224 * 2), ("tensor 224x224 fp32", 3 * 224 * 224 * 4),
         ("frame 1080p NV12", 1920 * 1080 * 3 // 2)]


def run(size, seconds, curve):
    ctx = zmq.Context(io_threads=1)
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    if curve:
        server_public, server_secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        pull.curve_server = True
        pull.curve_secretkey = server_secret
        push.curve_serverkey, push.curve_publickey, push.curve_secretkey = server_public, client_public, client_secret
    push.sndhwm = pull.rcvhwm = 64
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    push.connect(f"tcp://127.0.0.1:{port}")
    payload = b"\x5a" * size
    stop = threading.Event()

    def sender():
        while not stop.is_set():
            try:
                push.send(payload, zmq.NOBLOCK, copy=False)
            except zmq.Again:
                time.sleep(0.0001)

    t = threading.Thread(target=sender)
    t.start()
    pull.recv()  # the handshake is done: count from here
    received, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        if pull.poll(100):
            pull.recv(copy=False)
            received += 1
    elapsed = time.perf_counter() - start
    stop.set()
    t.join()
    push.close(linger=0)
    pull.close(linger=0)
    ctx.term()
    return received / elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    opts = ap.parse_args()
    print(f"libzmq {zmq.zmq_version()}, CURVE {'yes' if zmq.has('curve') else 'no'}")
    print(f"{'message':<22} {'bytes':>9} {'plain msg/s':>12} {'CURVE msg/s':>12} {'plain MB/s':>11} {'CURVE MB/s':>11} {'CURVE/plain':>12}")
    for name, size in SIZES:
        plain, curve = run(size, opts.seconds, False), run(size, opts.seconds, True)
        print(f"{name:<22} {size:>9} {plain:>12,.0f} {curve:>12,.0f} {plain * size / 1e6:>11,.0f} "
              f"{curve * size / 1e6:>11,.0f} {curve / plain:>11.0%}")


if __name__ == "__main__":
    main()
