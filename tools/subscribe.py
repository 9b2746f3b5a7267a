#!/usr/bin/env python3
"""Print vapipe results as "stream_id seq label score", segments as "stream_id began|ended label
first_seq..last_seq" (their pictures as "stream_id picture label best|first|next seq path", their clips as
"stream_id clip label first_seq part path-or-why"), and stream events as
"stream_id event message"; stops at the job summary.

Usage: tools/subscribe.py [--endpoint E] [--server-key FILE --key FILE] [TOPIC_PREFIX ...]
  (default topic: results/; others: segments/, events/, or one stream's, results/cam1, a prefix that
  also matches results/cam10: compare stream_id for one stream exactly;
  --server-key/--key: a bus with CURVE, key files from `vapipe keygen`)
Needs pyzmq: Debian's python3-zmq package provides the zmq module.
"""
import argparse
import json

import zmq


def read_key(path):
    """The key line of a `vapipe keygen` file (comment lines start with "# ")."""
    with open(path) as f:
        return next(line.split()[0] for line in f if line.strip() and not line.startswith("# ")).encode()


args = argparse.ArgumentParser()
args.add_argument("--endpoint", default="tcp://127.0.0.1:5560")
args.add_argument("--server-key", help="the bus's public key file (publish.curve_secret_key's pair)")
args.add_argument("--key", help="this subscriber's secret key file (default: a fresh pair)")
args.add_argument("topics", nargs="*", default=["results/"])
opts = args.parse_args()

sub = zmq.Context().socket(zmq.SUB)
if opts.server_key:
    public, secret = zmq.curve_keypair() if not opts.key else (None, read_key(opts.key))
    sub.curve_serverkey = read_key(opts.server_key)
    sub.curve_secretkey = secret
    sub.curve_publickey = zmq.curve_public(secret)
sub.connect(opts.endpoint)
for topic in opts.topics:
    sub.setsockopt_string(zmq.SUBSCRIBE, topic)
sub.setsockopt_string(zmq.SUBSCRIBE, "job/summary")
while True:
    topic, payload = sub.recv_multipart()
    if topic == b"job/summary":
        break
    msg = json.loads(payload)
    if msg["schema"] == "vapipe.result":
        print(msg["stream_id"], msg["seq"], msg["label"], msg["score"], flush=True)
    elif msg["schema"] == "vapipe.segment" and msg["event"] == "picture":  # publish.segments_pictures_dir
        print(msg["stream_id"], "picture", msg["label"], msg.get("frame", "next"), msg["seq"], msg["picture"] or msg["error"],
              flush=True)
    elif msg["schema"] == "vapipe.segment" and msg["event"] == "clip":  # publish.segments_clips
        print(msg["stream_id"], "clip", msg["label"], msg["start_seq"], msg["part"], msg["clip"] or msg["error"], flush=True)
    elif msg["schema"] == "vapipe.segment":  # publish.segments_min_frames: a label began or ended
        print(msg["stream_id"], msg["event"], msg["label"], f'{msg["start_seq"]}..{msg["end_seq"]}', flush=True)
    elif msg["schema"] == "vapipe.event":  # started, eos, error, reconnecting, resumed
        print(msg["stream_id"], msg["event"], msg["message"], flush=True)
