"""Helpers for the end-to-end tests: clips made with GStreamer at test time, job configs, a real
`vapipe run` process tree, and a subscriber in a separate process."""
import json
import os
import pwd
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

VAPIPE = os.environ.get("VAPIPE_BIN", "build/cli/vapipe")
SOURCE_DIR = os.environ.get("VAPIPE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
MODEL = os.environ.get("VAPIPE_E2E_MODEL", os.path.join(SOURCE_DIR, "models", "pattern_cnn.pt"))
LABELS = os.environ.get("VAPIPE_E2E_LABELS", os.path.join(SOURCE_DIR, "models", "pattern_cnn.labels.txt"))
SUBSCRIBER = os.path.join(os.path.dirname(__file__), "subscriber.py")
RTSP_SERVER = os.environ.get("VAPIPE_RTSP_SERVER", "build/tests/vapipe_rtsp_test_server")
KAFKA_CLUSTER = os.environ.get("VAPIPE_KAFKA_CLUSTER", os.path.join(os.path.dirname(RTSP_SERVER), "vapipe_kafka_test_cluster"))
STAGES = ["ingest", "preprocess", "batch", "infer", "publish"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_clip(path, pattern, frames, width, height, extra=""):
    """Encodes `frames` frames of a videotestsrc pattern as H.264 in MP4 or Matroska (by extension)."""
    mux = "mp4mux" if path.endswith(".mp4") else "matroskamux"
    cmd = (f"gst-launch-1.0 -q videotestsrc pattern={pattern} num-buffers={frames} {extra} "
           f"! video/x-raw,width={width},height={height},framerate=30/1 "
           f"! x264enc bitrate=1500 speed-preset=veryfast key-int-max=30 ! h264parse ! {mux} "
           f"! filesink location={path}")
    subprocess.run(cmd, shell=True, check=True)


def start_rtsp_camera(test, pattern, port=None, width=640, height=360, x264_options=None, credentials=None):
    """A real RTSP server on loopback (tests/fakes/rtsp_test_server: a videotestsrc pattern as H.264 at
    30 fps, a key frame every 15 frames, or `x264_options` such as "intra-refresh=true", or B-frames:
    "key-int-max=15 bframes=2 ! video/x-h264,profile=main"), stopped when
    `test` ends; with `credentials` ("user:password") clients must give them. Returns (uri, process)."""
    port = port or free_port()
    args = [RTSP_SERVER, str(port), pattern, str(width), str(height)]
    if x264_options or credentials:
        args.append(x264_options or "key-int-max=15")
    if credentials:
        args.append(credentials)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    uri = proc.stdout.readline().strip()
    test.assertTrue(uri.startswith("rtsp://"), f"RTSP test server did not start on port {port}")
    test.addCleanup(lambda: (proc.poll() is None and proc.terminate(), proc.wait(), proc.stdout.close()))
    return uri, proc


def stream_entry(stream):
    """(id, uri), (id, uri, {more keys: roi, max_fps, ...}), or a config entry as it is (a glob)."""
    if isinstance(stream, dict):
        return stream
    sid, uri, *more = stream
    return {"id": sid, "uri": uri, **(more[0] if more else {})}


def write_config(directory, streams, **sections):
    """A job config; `streams` as stream_entry takes them. Keyword arguments add sections (dicts)."""
    port = sections.pop("port", None) or free_port()
    cfg = {
        "job": {"name": "e2e", "price_per_gpu_hour": 2.5, "summary_path": os.path.join(directory, "summary.json"),
                "drain_timeout_s": 10},
        "streams": [stream_entry(st) for st in streams],
        "batch": {"max_batch_size": 8, "max_delay_ms": 5},
        "infer": {"model": MODEL, "labels": LABELS},
        "publish": {"endpoint": f"tcp://127.0.0.1:{port}", "wait_for_subscribers": 1, "wait_timeout_s": 20,
                    "jsonl_path": os.path.join(directory, "results.jsonl")},
    }
    for key, value in sections.items():
        if isinstance(value, dict):
            cfg.setdefault(key, {}).update(value)
        else:
            cfg[key] = value
    path = os.path.join(directory, "job.yaml")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)  # JSON is YAML
    return path, cfg["publish"]["endpoint"]


def jpeg_size(path):
    """(width, height) from a JPEG's start-of-frame marker."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:2] == b"\xff\xd8", path
    i = 2
    while i + 9 < len(data):
        marker, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
        i += 2 + length
    raise AssertionError(f"{path}: no start of frame")


def mp4_layout(path):
    """An MP4's top-level boxes in file order, and its duration in seconds (its movie header's)."""
    with open(path, "rb") as f:
        data = f.read()
    boxes, duration_s, i = [], None, 0
    while i + 8 <= len(data):
        size, kind = int.from_bytes(data[i:i + 4], "big"), data[i + 4:i + 8].decode("latin-1")
        header = 8
        if size == 1:
            size, header = int.from_bytes(data[i + 8:i + 16], "big"), 16
        elif size == 0:
            size = len(data) - i
        boxes.append(kind)
        if kind == "moov":
            j = i + header
            while j + 8 <= i + size:
                inner, inner_kind = int.from_bytes(data[j:j + 4], "big"), data[j + 4:j + 8]
                if inner_kind == b"mvhd":
                    version = data[j + 8]
                    if version == 1:
                        timescale = int.from_bytes(data[j + 28:j + 32], "big")
                        duration = int.from_bytes(data[j + 32:j + 40], "big")
                    else:
                        timescale = int.from_bytes(data[j + 20:j + 24], "big")
                        duration = int.from_bytes(data[j + 24:j + 28], "big")
                    duration_s = duration / timescale
                j += max(inner, 8)
        i += max(size, 8)
    return boxes, duration_s


def mp4_sample_times(path):
    """The first track's samples of an MP4, in file (decoding) order: (decoding time, presentation
    time) in seconds, from its sample table (mdhd's timescale, stts, ctts), as a player places them."""
    with open(path, "rb") as f:
        data = f.read()

    def boxes(start, end):
        i = start
        while i + 8 <= end:
            size, kind = int.from_bytes(data[i:i + 4], "big"), data[i + 4:i + 8].decode("latin-1")
            header = 8
            if size == 1:
                size, header = int.from_bytes(data[i + 8:i + 16], "big"), 16
            elif size == 0:
                size = end - i
            yield kind, i + header, i + size
            i += max(size, 8)

    def child(path_kinds, start=0, end=len(data)):
        for kind, body, box_end in boxes(start, end):
            if kind == path_kinds[0]:
                return (body, box_end) if len(path_kinds) == 1 else child(path_kinds[1:], body, box_end)
        raise AssertionError(f"{path}: no {'/'.join(path_kinds)} box")

    mdia = child(["moov", "trak", "mdia"])
    mdhd, _ = child(["mdhd"], *mdia)
    timescale = int.from_bytes(data[mdhd + (20 if data[mdhd] == 1 else 12):][:4], "big")
    stbl = child(["minf", "stbl"], *mdia)
    stts, _ = child(["stts"], *stbl)
    decoding, t = [], 0
    for e in range(int.from_bytes(data[stts + 4:stts + 8], "big")):
        count, delta = (int.from_bytes(data[stts + 8 + 8 * e + k:][:4], "big") for k in (0, 4))
        for _ in range(count):
            decoding.append(t)
            t += delta
    offsets = [0] * len(decoding)
    try:
        ctts, _ = child(["ctts"], *stbl)
    except AssertionError:
        ctts = None  # no composition offsets: each sample shown at its decoding time
    if ctts is not None:
        signed = data[ctts] == 1
        n = 0
        for e in range(int.from_bytes(data[ctts + 4:ctts + 8], "big")):
            count = int.from_bytes(data[ctts + 8 + 8 * e:][:4], "big")
            offset = int.from_bytes(data[ctts + 12 + 8 * e:][:4], "big", signed=signed)
            for _ in range(count):
                offsets[n] = offset
                n += 1
    return [(d / timescale, (d + o) / timescale) for d, o in zip(decoding, offsets)]


class WebhookReceiver:
    """An HTTP server on loopback, as a webhook's receiver (Home Assistant, n8n, ntfy) is, in a thread of
    the test: records each POST's path, headers and body (JSON, text/plain, or as it came); answers 200."""

    def __init__(self):
        import http.server
        import threading
        received = self.received = []
        # Cleared: requests wait unanswered until it is set again (a receiver that stalls).
        answering = self.answering = threading.Event()
        answering.set()
        # Set: requests are answered 503 and not recorded (a receiver that is down).
        refusing = self.refusing = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as vapipe's client uses it

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                answering.wait()
                if refusing.is_set():
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                kind = self.headers.get("Content-Type", "")
                text = kind.startswith("text/plain")
                received.append({"at": time.time(), "path": self.path, "topic": self.headers.get("X-Vapipe-Topic"),
                                 "authorization": self.headers.get("Authorization"),
                                 "json": json.loads(body) if kind == "application/json" else None,
                                 "text": body.decode() if text else None,
                                 # an attached picture (attach_pictures): the body as it came, and ntfy's headers
                                 "content_type": kind, "body": body, "message": self.headers.get("X-Message"),
                                 "filename": self.headers.get("X-Filename"),
                                 "key": self.headers.get("Idempotency-Key")})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class MqttBroker:
    """A real MQTT broker (Mosquitto) on a loopback port of its own, and a subscriber of everything on it
    (mosquitto_sub), as Home Assistant or Node-RED would subscribe: received() is [(topic, payload)]."""

    def __init__(self, directory, user=None, password=None, max_packet_size=None):
        """With a user: anonymous clients are refused, and so is a wrong password. With max_packet_size:
        the broker takes no larger packet, and says so to an MQTT 5 client (AWS IoT Core's 128 KB)."""
        self.port = free_port()
        conf = os.path.join(directory, f"mosquitto-{self.port}.conf")
        with open(conf, "w") as f:
            # Run as root, Mosquitto drops to its own user before it reads the password file, which this
            # test's private folder keeps from it: it stays the user it is.
            f.write(f"listener {self.port} 127.0.0.1\npersistence false\nuser {pwd.getpwuid(os.getuid()).pw_name}\n")
            if max_packet_size:
                f.write(f"max_packet_size {max_packet_size}\n")
            if user:
                passwords = os.path.join(directory, f"mosquitto-{self.port}.passwords")
                subprocess.run(["mosquitto_passwd", "-b", "-c", passwords, user, password], check=True,
                               capture_output=True)
                f.write(f"allow_anonymous false\npassword_file {passwords}\n")
            else:
                f.write("allow_anonymous true\n")
        self.broker = subprocess.Popen(["mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.02)
        self.out = os.path.join(directory, f"mqtt-received-{self.port}.txt")
        login = ["-u", user, "-P", password] if user else []
        with open(self.out, "w") as out:  # (the child keeps its own copy of the descriptor)
            self.sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(self.port), "-t", "#", "-q",
                                         "1", "-v", *login], stdout=out, stderr=subprocess.DEVNULL)
        time.sleep(0.3)  # subscribed before the job starts publishing

    @property
    def url(self):
        return f"mqtt://127.0.0.1:{self.port}"

    def received(self):
        with open(self.out, errors="replace") as f:  # (a picture's JPEG bytes among the lines)
            return [tuple(line.rstrip("\n").split(" ", 1)) for line in f if line.strip()]

    def wait_for(self, n, timeout=10):
        """received() once it holds n messages, or after `timeout` s."""
        deadline = time.time() + timeout
        while len(self.received()) < n and time.time() < deadline:
            time.sleep(0.05)
        return self.received()

    def close(self):
        for proc in (self.sub, self.broker):
            proc.terminate()
            proc.wait(timeout=10)


class RedisServer:
    """A real Redis server (redis-server) on a loopback port of its own, keeping nothing on disk; entries()
    reads a stream with redis-cli, as a consumer of its own would (XRANGE)."""

    def __init__(self):
        self.port = free_port()
        # A folder of its own: a server loads a dump.rdb it finds in its folder (another test's).
        self.dir = tempfile.mkdtemp(prefix="vapipe-redis-")
        self.server = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                        "--appendonly", "no", "--logfile", "/dev/null", "--dir", self.dir],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while self.cli("PING") != "PONG":
            if time.time() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def cli(self, *command):
        p = subprocess.run(["redis-cli", "-p", str(self.port), *command], capture_output=True, text=True)
        return p.stdout.strip()

    def entries(self, key):
        """[(topic, payload as JSON)] of the stream `key`, in order."""
        lines = self.cli("XRANGE", key, "-", "+").split("\n")
        return [(lines[i + 2], json.loads(lines[i + 4])) for i in range(0, len(lines) - 4, 5)]

    def close(self):
        self.server.terminate()
        self.server.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class KafkaCluster:
    """A Kafka cluster of librdkafka's mock brokers on loopback ports of their own
    (tests/fakes/kafka_test_cluster_main.cpp); records() reads a topic back as a consumer of its own would."""

    def __init__(self, brokers=3):
        self.process = subprocess.Popen([KAFKA_CLUSTER, str(brokers)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)
        self.bootstrap = self.process.stdout.readline().strip()
        if not self.bootstrap:
            raise RuntimeError(f"{KAFKA_CLUSTER} did not start")

    @property
    def url(self):
        return f"kafka://{self.bootstrap}"

    def _ask(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        lines = []
        while (line := self.process.stdout.readline().rstrip("\n")) != ".":
            if not line and self.process.poll() is not None:
                raise RuntimeError("the Kafka test cluster ended")
            lines.append(line)
        return lines

    def records(self, topic, at_least=0):
        """[{partition, offset, key, value, headers}] of `topic`, partition after partition, in offset order."""
        return [json.loads(line) for line in self._ask(f"read {topic} {at_least}")]

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


class RedisSentinel:
    """A real Redis Sentinel (redis-server --sentinel) on a loopback port of its own, watching `master` (a
    RedisServer) as "mymaster"."""

    def __init__(self, master):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="vapipe-sentinel-")
        conf = os.path.join(self.dir, "sentinel.conf")  # (a sentinel rewrites its file)
        with open(conf, "w") as f:
            f.write(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile /dev/null\n"
                    f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n")
        self.server = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while subprocess.run(["redis-cli", "-p", str(self.port), "PING"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            if time.time() > deadline:
                raise RuntimeError("redis-server --sentinel did not start")
            time.sleep(0.02)

    def close(self):
        self.server.terminate()
        self.server.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Subscriber:
    """A separate process subscribed to the bus, writing every [topic, payload] as a JSON line."""

    def __init__(self, endpoint, directory, curve_keys=()):
        """curve_keys: (bus public key file, own secret key file) for a bus with CURVE."""
        self.path = os.path.join(directory, "subscribed.jsonl")
        self.proc = subprocess.Popen([sys.executable, SUBSCRIBER, endpoint, self.path, *curve_keys])
        time.sleep(0.3)  # connect before the job starts publishing

    def wait(self, timeout=120):
        self.proc.wait(timeout=timeout)
        with open(self.path) as f:
            return [json.loads(line) for line in f]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def children_of(pid):
    """(pid, argv) of the live children of `pid`, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid != pid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode() for a in f.read().split(b"\0") if a]
            out.append((int(entry), argv))
        except (OSError, ValueError):
            continue
    return out


def pids_cgroup(test, limit):
    """A pids cgroup of its own with pids.max `limit` (v1's pids mount or v2's root; removed after the
    test), as a container's --pids-limit makes; the test is skipped where one cannot be made (not
    root, no writable pids controller)."""
    base = next((b for b in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
                 if os.path.exists(os.path.join(b, "cgroup.procs")) and os.access(b, os.W_OK)), None)
    if base == "/sys/fs/cgroup":
        try:
            with open(os.path.join(base, "cgroup.subtree_control")) as f:
                base = base if "pids" in f.read() else None
        except OSError:
            base = None
    if base is None:
        test.skipTest("no writable pids cgroup controller here")
    group = os.path.join(base, f"vapipe-e2e-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.mkdir(group)
        with open(os.path.join(group, "pids.max"), "w") as f:
            f.write(str(limit))
    except OSError as e:
        test.skipTest(f"cannot make a pids cgroup: {e}")

    def remove():
        deadline = time.time() + 10
        while os.path.isdir(group) and time.time() < deadline:
            try:
                os.rmdir(group)  # once every process in it has gone
            except OSError:
                time.sleep(0.1)
    test.addCleanup(remove)
    return group


def join_cgroup(group):
    """Moves the calling process into `group` (a preexec_fn: the child, before it runs the program)."""
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


_RUNS = []  # every Run a test started: E2ETest.tearDown ends those still running


class Run:
    """`vapipe run CONFIG` as a real process tree."""

    def __init__(self, config, env=None, open_files=None, cgroup=None, args=()):
        """open_files: (soft, hard) RLIMIT_NOFILE for the job, as a shell's `ulimit -n` would set it;
        cgroup: a cgroup folder (pids_cgroup) the job starts in, as a container's processes do; args:
        more of `vapipe run`'s arguments (--resume)."""

        def limit():
            if open_files:
                resource.setrlimit(resource.RLIMIT_NOFILE, open_files)
            if cgroup:
                join_cgroup(cgroup)
        # Files, not pipes: read only at the end, a job's log past a pipe's 64 KB would block it.
        self._out = tempfile.TemporaryFile("w+")
        self._err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([VAPIPE, "run", config, *args], stdout=self._out, stderr=self._err,
                                     text=True, env={**os.environ, **(env or {})}, preexec_fn=limit)
        self.stage_pids = {}
        self.stdout = self.stderr = None
        _RUNS.append(self)

    def end_if_running(self):
        """After a test, pass or fail: a job still running (an assertion failed before its stop, or a
        live job the test never stopped) is stopped as an operator would, SIGTERM, then killed after
        30 s; its stages get SIGTERM when it dies (PR_SET_PDEATHSIG). Returns whether it was running."""
        if self.proc.poll() is not None:
            self._close_output()
            return False
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._close_output()
        return True

    def _close_output(self):
        for f in (self._out, self._err):
            if not f.closed:
                f.close()

    def watch_stages(self, timeout=30):
        """Records the stage processes the supervisor started (by their `vapipe stage NAME` argv)."""
        deadline = time.time() + timeout
        while time.time() < deadline and len(self.stage_pids) < len(STAGES) and self.proc.poll() is None:
            for pid, argv in children_of(self.proc.pid):
                if len(argv) >= 3 and argv[1] == "stage":
                    self.stage_pids[argv[2]] = pid
            time.sleep(0.02)
        return self.stage_pids

    def watch_lanes(self, expected, timeout=30):
        """{(stage, lane): pid} of the stage processes, until `expected` of them were seen."""
        seen = {}
        deadline = time.time() + timeout
        while time.time() < deadline and len(seen) < expected and self.proc.poll() is None:
            for pid, argv in children_of(self.proc.pid):
                if len(argv) >= 3 and argv[1] == "stage" and "--lane" in argv:
                    seen[(argv[2], int(argv[argv.index("--lane") + 1]))] = pid
            time.sleep(0.02)
        self.stage_pids = {f"{name}[{lane}]": pid for (name, lane), pid in seen.items()}
        return seen

    def wait(self, timeout=300):
        """Its exit status, once it has ended (TimeoutExpired after `timeout`); its output is then in
        self.stdout and self.stderr."""
        self.proc.wait(timeout=timeout)
        if self.stdout is None:  # read once, then the files go (strict UTF-8: a raw byte in the log fails)
            for f in (self._out, self._err):
                f.seek(0)
            self.stdout, self.stderr = self._out.read(), self._err.read()
            self._out.close()
            self._err.close()
        return self.proc.returncode

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stderr_so_far(self):
        """Its log up to now, while it runs."""
        return os.pread(self._err.fileno(), 1 << 24, 0).decode("utf-8", "replace")

    def job_id(self):
        """The job id `vapipe run` chose (its log's "job 'NAME' (ID): ..."), once it has ended."""
        found = re.search(r"job '[^']*' \(([^)]+)\):", self.stderr or "")
        return found.group(1) if found else str(self.proc.pid)

    def leftovers(self):
        """What the job left on the host: shared memory pools, its run folder, its lock file."""
        job = self.job_id()
        return [n for n in os.listdir("/dev/shm") if n.startswith(f"vapipe-{job}-")] + \
            [n for n in os.listdir("/tmp") if n in (f"vapipe-{job}", f"vapipe-{job}.lock")]


def payloads_by_stream(messages, topic_prefix):
    """{stream id: [payload, ...]} of the messages whose topic starts with `topic_prefix`, in order."""
    streams = {}
    for m in messages:
        if m["topic"].startswith(topic_prefix):
            streams.setdefault(m["payload"]["stream_id"], []).append(m["payload"])
    return streams


def results_by_stream(messages):
    return payloads_by_stream(messages, "results/")


def events_by_stream(messages):
    return payloads_by_stream(messages, "events/")


class E2ETest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="vapipe-e2e-")
        self.dir = self.tmp.name
        self.subscriber = None

    def tearDown(self):
        self.end_runs()
        if self.subscriber:
            self.subscriber.kill()
        self.tmp.cleanup()

    def end_runs(self):
        """Stops the jobs the test started that still run (it failed before it stopped them), so that
        none goes on into the next test, holding a port, a core or a camera."""
        left_running = [run for run in _RUNS if run.end_if_running()]
        _RUNS.clear()
        if left_running:
            print(f"\n{self.id()}: {len(left_running)} `vapipe run` job(s) still running after the test: stopped",
                  file=sys.stderr)

    def assert_every_frame_named(self, results, sid, frames, pattern, share, what=None):
        """Stream `sid` has one result for each of frames 0..frames-1, in order, and at least `share` of
        them name `pattern`."""
        what = what or sid
        got = results.get(sid, [])
        self.assertEqual([r["seq"] for r in got], list(range(frames)), what)
        correct = sum(r["label"] == pattern for r in got)
        self.assertGreaterEqual(correct / len(got), share, f"{what}: {correct}/{len(got)} named '{pattern}'")

    def assert_no_leftovers(self, run):
        for name, pid in run.stage_pids.items():
            self.assertFalse(os.path.exists(f"/proc/{pid}") and _alive(pid), f"stage {name} (pid {pid}) still running")
        self.assertEqual(run.leftovers(), [], "shared memory, run folder or lock left behind")


def live_test_uri(pattern):
    """A small endless live test source (15 fps, 160x120)."""
    return f"test://{pattern}?frames=0&live=true&fps=15&width=160&height=120"


class SubscribedTest(E2ETest):
    """A test that reads what its `self.subscriber` has received so far, while the job runs."""

    def messages(self):
        try:
            with open(self.subscriber.path) as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []

    def wait_for(self, what, predicate, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate(self.messages()):
                return
            time.sleep(0.1)
        self.fail(f"timed out waiting for {what}")

    def count(self, sid):
        return len(results_by_stream(self.messages()).get(sid, []))

    def stop_and_collect(self, run):
        """SIGINT to the job, which must exit 0; then everything the subscriber got, as
        (messages, results by stream, events by stream)."""
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        msgs = self.subscriber.wait(timeout=30)
        return msgs, results_by_stream(msgs), events_by_stream(msgs)


def has_event(messages, sid, event):
    """Whether stream `sid` has published an `event` (started, resumed, eos ...) among `messages`."""
    return any(e["event"] == event for e in events_by_stream(messages).get(sid, []))


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
