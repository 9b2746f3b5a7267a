"""A result-bus subscriber in its own process: writes every [topic, payload] as a JSON line to a file
until the job summary arrives. Usage: subscriber.py ENDPOINT OUTPUT"""
import json
import sys

import zmq

endpoint, output = sys.argv[1], sys.argv[2]
sock = zmq.Context().socket(zmq.SUB)
sock.setsockopt(zmq.RCVHWM, 0)
sock.connect(endpoint)
sock.setsockopt_string(zmq.SUBSCRIBE, "")
with open(output, "w") as out:
    while True:
        topic, payload = sock.recv_multipart()
        out.write(json.dumps({"topic": topic.decode(), "payload": json.loads(payload)}) + "\n")
        out.flush()
        if topic == b"job/summary":
            break
