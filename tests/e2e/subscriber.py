"""A result-bus subscriber in its own process: writes every [topic, payload] as a JSON line to a file
until the job summary arrives. Usage: subscriber.py ENDPOINT OUTPUT [SERVER_PUBLIC_KEY_FILE OWN_SECRET_KEY_FILE]
(the key files as `vapipe keygen` writes them: a bus with CURVE)."""
import json
import sys

import zmq


def read_key(path):
    """The one key line of a `vapipe keygen` file (comments start with '# ')."""
    with open(path) as f:
        return next(line.split()[0] for line in f if line.strip() and not line.startswith("# ")).encode()


endpoint, output = sys.argv[1], sys.argv[2]
sock = zmq.Context().socket(zmq.SUB)
sock.setsockopt(zmq.RCVHWM, 0)
if len(sys.argv) > 4:
    sock.curve_serverkey = read_key(sys.argv[3])
    secret = read_key(sys.argv[4])
    sock.curve_secretkey = secret
    sock.curve_publickey = zmq.curve_public(secret)
sock.connect(endpoint)
sock.setsockopt_string(zmq.SUBSCRIBE, "")
with open(output, "w") as out:
    while True:
        topic, payload = sock.recv_multipart()
        out.write(json.dumps({"topic": topic.decode(), "payload": json.loads(payload)}) + "\n")
        out.flush()
        if topic == b"job/summary":
            break
