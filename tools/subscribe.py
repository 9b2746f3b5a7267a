#!/usr/bin/env python3
"""Print vapipe results as "stream_id seq label score"; stops at the job summary.

Usage: tools/subscribe.py [TOPIC_PREFIX ...]   (default: results/)
Needs pyzmq: Debian's python3-zmq package provides the zmq module.
"""
import json
import sys

import zmq

sub = zmq.Context().socket(zmq.SUB)
sub.connect("tcp://127.0.0.1:5560")
for topic in sys.argv[1:] or ["results/"]:
    sub.setsockopt_string(zmq.SUBSCRIBE, topic)
sub.setsockopt_string(zmq.SUBSCRIBE, "job/summary")
while True:
    topic, payload = sub.recv_multipart()
    if topic == b"job/summary":
        break
    msg = json.loads(payload)
    if msg["schema"] == "vapipe.result":
        print(msg["stream_id"], msg["seq"], msg["label"], msg["score"], flush=True)
