"""The README's Python subscriber and tools/subscribe.py, run as a user runs them, against a real
ZeroMQ PUB socket sending one message of each kind the schema has (docs/result-schema.md): neither
may stop on a message it does not expect (a segment's clip had no end_seq, and both crashed on it)."""
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import zmq

SOURCE_DIR = os.environ.get("VAPIPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

MESSAGES = [
    ("events/gate", {"schema": "vapipe.event", "stream_id": "gate", "event": "started", "uri": "rtsp://***@cam/1",
                     "message": "", "frames": 0, "dropped": 0}),
    ("results/gate", {"schema": "vapipe.result", "stream_id": "gate", "seq": 0, "label": "truck", "score": 0.9}),
    ("segments/gate", {"schema": "vapipe.segment", "stream_id": "gate", "event": "began", "label": "truck",
                       "start_seq": 0, "end_seq": 4}),
    ("segments/gate", {"schema": "vapipe.segment", "stream_id": "gate", "event": "picture", "label": "truck",
                       "start_seq": 0, "seq": 2, "frame": "best", "picture": "/p/gate/a.jpg", "error": None}),
    ("segments/gate", {"schema": "vapipe.segment", "stream_id": "gate", "event": "ended", "label": "truck",
                       "start_seq": 0, "end_seq": 40}),
    ("segments/gate", {"schema": "vapipe.segment", "stream_id": "gate", "event": "clip", "label": "truck",
                       "start_seq": 0, "part": 1, "continues": False, "clip": "/p/gate/a.mp4", "error": None}),
    ("segments/gate", {"schema": "vapipe.segment", "stream_id": "gate", "event": "clip", "label": "truck",
                       "start_seq": 50, "part": None, "continues": False, "clip": None, "error": "no key frame"}),
    ("events/gate", {"schema": "vapipe.event", "stream_id": "gate", "event": "eos", "uri": "rtsp://***@cam/1",
                     "message": "end of stream", "frames": 1, "dropped": 0}),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readme_subscriber():
    """The Python block under "In Python (`tools/subscribe.py`" in README.md."""
    with open(os.path.join(SOURCE_DIR, "README.md")) as f:
        text = f.read()
    found = re.search(r"In Python \(`tools/subscribe\.py`.*?```python\n(.*?)```", text, re.S)
    assert found, "the README's Python subscriber"
    return found.group(1)


class SubscriberExamples(unittest.TestCase):
    def feed(self, command):
        """Runs `command` (which subscribes to every topic on the port it is given) while a PUB socket
        sends MESSAGES then the job summary; returns its output. It must end by itself, with 0."""
        port = free_port()
        pub = zmq.Context.instance().socket(zmq.PUB)
        pub.bind(f"tcp://127.0.0.1:{port}")
        proc = subprocess.Popen(command(port), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # ZeroMQ drops what is sent before the subscription arrives: a first result again and again
            # until one is printed, then the rest.
            deadline = time.time() + 30
            while time.time() < deadline and proc.poll() is None:
                pub.send_multipart([b"results/warmup", json.dumps(
                    {"schema": "vapipe.result", "stream_id": "warmup", "seq": 0, "label": "x", "score": 1}).encode()])
                if select.select([proc.stdout], [], [], 0.1)[0]:
                    proc.stdout.readline()
                    break
            for topic, payload in MESSAGES:
                pub.send_multipart([topic.encode(), json.dumps(payload).encode()])
            time.sleep(0.2)
            pub.send_multipart([b"job/summary", json.dumps({"schema": "vapipe.summary"}).encode()])
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            pub.close(linger=0)
        self.assertEqual(proc.returncode, 0, err)
        return out

    def test_the_readmes_subscriber_prints_every_kind_of_message(self):
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "subscriber.py")
            with open(script, "w") as f:
                f.write(readme_subscriber())
            out = self.feed(lambda port: [sys.executable, "-c",
                                          open(script).read().replace("tcp://127.0.0.1:5560", f"tcp://127.0.0.1:{port}"),
                                          "results/", "segments/", "events/"])
        self.assertIn("gate 0 truck 0.9", out)
        self.assertIn("gate ended truck 0 40", out)
        self.assertIn("gate picture truck 0 /p/gate/a.jpg", out)
        self.assertIn("gate clip truck 0 /p/gate/a.mp4", out)
        self.assertIn("gate clip truck 50 no key frame", out)

    def test_tools_subscribe_prints_every_kind_of_message(self):
        out = self.feed(lambda port: [sys.executable, os.path.join(SOURCE_DIR, "tools", "subscribe.py"), "--endpoint",
                                      f"tcp://127.0.0.1:{port}", "results/", "segments/", "events/"])
        self.assertIn("gate 0 truck 0.9", out)
        self.assertIn("gate ended truck 0..40", out)
        self.assertIn("gate clip truck 0 1 /p/gate/a.mp4", out)
        self.assertIn("gate clip truck 50 None no key frame", out)
        self.assertIn("gate eos end of stream", out)


if __name__ == "__main__":
    unittest.main()
