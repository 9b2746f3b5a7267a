"""`vapipe discover`: ONVIF cameras found by a WS-Discovery probe, and their stream URIs, as a
camera answers them (tests/e2e/onvif_camera.py, whose URIs are real RTSP servers' on loopback that ask
for the same user and password): the streams it prints are pasted into a config and opened for real."""
import json
import os
import socket
import struct
import subprocess
import sys
import urllib.parse

from e2e.common import LABELS, MODEL, VAPIPE, E2ETest, free_port, start_rtsp_camera

ONVIF_CAMERA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onvif_camera.py")
PASSWORD = "Adm1n@2024#"  # what URIs reserve: '@' and '#'


def multicast_loops_here():
    """Whether this host delivers its own multicast to 239.255.255.250:3702 (a container without a
    multicast route, or a firewall, does not): the environment's check, in Python alone."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("", 3702))
        listener.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                            struct.pack("4s4s", socket.inet_aton("239.255.255.250"), socket.inet_aton("0.0.0.0")))
        listener.settimeout(1)
        sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        token = os.urandom(8).hex().encode()
        sender.sendto(token, ("239.255.255.250", 3702))
        while True:
            if listener.recv(65536) == token:
                return True
    except OSError:  # no route, no permission, or the timeout
        return False
    finally:
        listener.close()
        sender.close()


class Discover(E2ETest):
    def start_onvif_camera(self, name, streams, clock_offset=0, multicast=False, media_host=None, sizes=(),
                           auth="ws-security"):
        """The camera's (UDP port, process): its discovery answers on UDP_PORT (and, with `multicast`,
        on 239.255.255.250:3702)."""
        args = [sys.executable, ONVIF_CAMERA, "--name", name, "--user", "admin", "--password", PASSWORD,
                "--clock-offset", str(clock_offset)] + [a for token, uri in streams for a in ("--stream", f"{token}={uri}")]
        if multicast:
            args.append("--multicast")
        if media_host:
            args += ["--media-host", media_host]
        args += [a for token, size in sizes for a in ("--size", f"{token}={size}")] + ["--auth", auth]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (proc.poll() is None and proc.terminate(), proc.wait(), proc.stdout.close(),
                                 proc.stderr.close()))
        line = proc.stdout.readline().split()
        if not line or line[0] != "ready":
            return None, proc
        return int(line[1]), proc

    def discover(self, *args, password=PASSWORD):
        creds = []
        if password is not None:
            pw = os.path.join(self.dir, "camera.password")
            with open(pw, "w") as f:
                f.write(password + "\n")  # a file's final newline is not part of it
            creds = ["--user", "admin", "--password-file", pw]
        return subprocess.run([VAPIPE, "discover", "--timeout", "1.5", *creds, *args], capture_output=True, text=True,
                              timeout=60)

    def test_a_camera_found_by_its_probe_gives_streams_that_a_job_opens(self):
        """Two profiles of one camera whose clock is 1.5 h behind (its UsernameToken must carry the
        camera's time: it refuses one more than 5 s off). The printed entries, pasted under `streams:`,
        open with the password from the environment: both give a first frame."""
        main, _ = start_rtsp_camera(self, "ball", width=320, height=240, credentials=f"admin:{PASSWORD}")
        sub, _ = start_rtsp_camera(self, "smpte", width=160, height=120, credentials=f"admin:{PASSWORD}")
        port, _ = self.start_onvif_camera("Lobby camera (east)", [("main", main), ("sub", sub)], clock_offset=-5400,
                                          sizes=[("main", "320x240"), ("sub", "160x120")])
        self.assertIsNotNone(port)
        p = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(f"1 camera answered a WS-Discovery probe to 127.0.0.1:{port} in ", p.stdout)
        self.assertIn("# 'Lobby camera (east)' (VAPIPE-TEST-CAM) at http://127.0.0.1:", p.stdout)
        # (Whole seconds read at two moments: a second may tick between the camera's and this machine's.)
        self.assertRegex(p.stdout, r"its clock is (5399|5400|5401) s behind this machine's")
        self.assertIn("export CAMERA_PASSWORD=... (this one holds characters a URI reserves: percent-escape them "
                      "there, '@' as %40, '#' as %23", p.stdout)
        self.assertIn("- id: lobby-camera-east    # profile 'main' (main stream): H264 320x240, 30 fps\n"
                      f"  uri: \"{main.replace('rtsp://', 'rtsp://admin:${CAMERA_PASSWORD}@')}\"\n", p.stdout)
        self.assertIn("- id: lobby-camera-east-2    # profile 'sub'", p.stdout)
        self.assertNotIn(PASSWORD, p.stdout)
        self.assertEqual(p.stderr, "")

        entries = "".join(line + "\n" for line in p.stdout.splitlines() if line.startswith(("- id:", "  uri:")))
        config = os.path.join(self.dir, "cameras.yaml")
        with open(config, "w") as f:
            f.write(f"job: {{name: e2e, mode: live}}\ninfer: {{model: {MODEL}, labels: {LABELS}}}\n"
                    f"publish: {{endpoint: 'tcp://127.0.0.1:{free_port()}'}}\nstreams:\n" +
                    "".join("  " + line for line in entries.splitlines(True)))
        opened = subprocess.run([VAPIPE, "validate", config, "--open", "--timeout", "20"], capture_output=True,
                                text=True, timeout=120,
                                env={**os.environ, "CAMERA_PASSWORD": urllib.parse.quote(PASSWORD, safe="")})
        self.assertEqual(opened.returncode, 0, opened.stdout + opened.stderr)
        self.assertRegex(opened.stdout, r"\n    lobby-camera-east +ok: +320x240 \w+, first frame after")
        self.assertRegex(opened.stdout, r"\n    lobby-camera-east-2 +ok: +160x120 \w+, first frame after")

        # --open: each stream opened now, with the password itself, as the job will.
        checked = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast", "--open")
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        self.assertIn("; 2 streams, 2 of them opened\n", checked.stdout)
        self.assertRegex(checked.stdout, r"uri: \"rtsp://admin:\$\{CAMERA_PASSWORD\}@127\.0\.0\.1:\d+/test\"\n"
                                         r"  # opened: 320x240 \w+, first frame after [0-9.]+ s\n")
        self.assertRegex(checked.stdout, r"  # opened: 160x120 \w+, first frame after")
        self.assertNotIn(PASSWORD, checked.stdout + checked.stderr)

        # --config: the streams the job has already are said, not listed again, and new ids take none of its.
        # The job's: the main stream written another way (RTP over TCP, credentials from the environment,
        # unset here), and a stream of another camera under the id the sub stream would have got.
        job = os.path.join(self.dir, "job-cameras.yaml")
        with open(job, "w") as f:
            f.write("streams:\n  - {id: lobby-camera-east, uri: '" +
                    main.replace("rtsp://", "rtspt://viewer:${UNSET_PASSWORD}@") + "'}\n"
                    "  - {id: lobby-camera-east-2, uri: 'rtsp://127.0.0.1:1/elsewhere'}\n")
        config = job
        again = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast", "--config", config)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertIn("; 2 streams, 1 already in " + config, again.stdout)
        self.assertIn(f"#   profile 'main' (main stream): H264 320x240, 30 fps: already in {config} as 'lobby-camera-east'",
                      again.stdout)
        self.assertIn("- id: lobby-camera-east-3    # profile 'sub'", again.stdout)

        # The same as JSON, for a script: the camera's URIs as it gave them, and the entries' own.
        j = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast", "--json")
        self.assertEqual(j.returncode, 0, j.stderr)
        cameras = json.loads(j.stdout)["cameras"]
        self.assertEqual(len(cameras), 1)
        self.assertEqual(cameras[0]["name"], "Lobby camera (east)")
        self.assertTrue(cameras[0]["endpoint"].startswith("urn:uuid:"))
        self.assertEqual([(pr["token"], pr["uri"], pr["id"]) for pr in cameras[0]["profiles"]],
                         [("main", main, "lobby-camera-east"), ("sub", sub, "lobby-camera-east-2")])
        self.assertIn("--profiles smallest lists that one alone", p.stdout)
        # One stream a camera: its smallest picture (what the model's 224x224 needs, decoded cheapest).
        smallest = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast", "--profiles", "smallest")
        self.assertEqual(smallest.returncode, 0, smallest.stderr)
        self.assertIn("- id: lobby-camera-east    # profile 'sub' (sub stream): H264 160x120", smallest.stdout)
        self.assertNotIn("profile 'main'", smallest.stdout)
        largest = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast", "--profiles", "largest")
        self.assertIn("- id: lobby-camera-east    # profile 'main'", largest.stdout)
        self.assertNotIn("profile 'sub'", largest.stdout)

    def test_a_camera_that_refuses_or_wants_credentials_says_so_and_none_answering_is_an_error(self):
        main, _ = start_rtsp_camera(self, "ball", width=160, height=120)
        port, _ = self.start_onvif_camera("Gate", [("main", main)])
        wrong = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast", password="admin")
        self.assertEqual(wrong.returncode, 3, wrong.stdout + wrong.stderr)
        self.assertIn("#   no stream URIs: its capabilities: the camera refused the user name and password "
                      "(ter:NotAuthorized: Sender not Authorized)", wrong.stdout)
        anonymous = self.discover("--probe", f"127.0.0.1:{port}", "--no-multicast", password=None)
        self.assertEqual(anonymous.returncode, 3, anonymous.stdout + anonymous.stderr)
        self.assertIn("the camera wants a user name and password (ter:NotAuthorized: Sender not Authorized): give "
                      "--user NAME and --password-file FILE", anonymous.stdout)

        # A camera that names its media service by an address where nothing answers (127.0.0.2: its
        # server listens on 127.0.0.1 alone): asked at the address it was found at.
        moved_port, _ = self.start_onvif_camera("Yard", [("main", main)], media_host="127.0.0.2")
        moved = self.discover("--probe", f"127.0.0.1:{moved_port}", "--no-multicast")
        self.assertEqual(moved.returncode, 0, moved.stdout + moved.stderr)
        self.assertRegex(moved.stdout, r"its media service http://127\.0\.0\.2:(\d+)/onvif/media_service did not "
                                       r"answer: asked at http://127\.0\.0\.1:\1/onvif/media_service")
        self.assertIn("- id: yard    # profile 'main'", moved.stdout)

        # A camera whose web server authenticates (HTTP Digest) instead of the SOAP header: its 401 is
        # answered with the same user and password; a wrong one is still refused.
        digest_port, _ = self.start_onvif_camera("Hall", [("main", main)], auth="http-digest")
        digest = self.discover("--probe", f"127.0.0.1:{digest_port}", "--no-multicast")
        self.assertEqual(digest.returncode, 0, digest.stdout + digest.stderr)
        self.assertIn("- id: hall    # profile 'main'", digest.stdout)
        digest_wrong = self.discover("--probe", f"127.0.0.1:{digest_port}", "--no-multicast", password="admin")
        self.assertEqual(digest_wrong.returncode, 3, digest_wrong.stdout + digest_wrong.stderr)
        self.assertIn("the camera refused the user name and password (HTTP 401)", digest_wrong.stdout)

        # An RTSP server that wants other credentials than the camera's ONVIF service: --open says so.
        other, _ = start_rtsp_camera(self, "ball", width=160, height=120, credentials="viewer:elsewhere")
        other_port, _ = self.start_onvif_camera("Side door", [("main", other)])
        refused = self.discover("--probe", f"127.0.0.1:{other_port}", "--no-multicast", "--open", "--open-timeout", "10")
        self.assertEqual(refused.returncode, 3, refused.stdout + refused.stderr)
        self.assertIn("; 1 stream, 0 of them opened", refused.stdout)
        self.assertIn("  # FAILED to open: ", refused.stdout)

        silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # a port where nothing answers
        silent.bind(("127.0.0.1", 0))
        self.addCleanup(silent.close)
        none = self.discover("--probe", f"127.0.0.1:{silent.getsockname()[1]}", "--no-multicast")
        self.assertEqual(none.returncode, 2, none.stdout + none.stderr)
        self.assertIn("vapipe discover: no camera answered in 1.5 s (cameras on another network do not hear a "
                      "multicast probe: give --probe CAMERA_IP", none.stderr)
        bad = subprocess.run([VAPIPE, "discover", "--user", "admin"], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("give --user and --password-file together", bad.stderr)

    def test_a_multicast_probe_finds_a_camera_of_this_host(self):
        """The probe as cameras hear it on a network: to 239.255.255.250:3702 (this host's own camera
        gets it through the multicast loop)."""
        if not multicast_loops_here():
            self.skipTest("a multicast datagram to 239.255.255.250:3702 does not come back to this host here")
        main, _ = start_rtsp_camera(self, "ball", width=160, height=120)
        port, camera = self.start_onvif_camera("Dock", [("main", main)], multicast=True)
        if port is None:
            self.skipTest("cannot listen on 239.255.255.250:3702 here: " + camera.stderr.read()[-300:])
        p = self.discover()
        if "cannot send the probe" in p.stderr:
            self.skipTest("no multicast route here: " + p.stderr)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # Out of each network of this host that takes multicast, named ("(eth0, eth1)").
        self.assertRegex(p.stdout, r"WS-Discovery probe to 239\.255\.255\.250:3702 \([^)]+\) in ")
        self.assertIn("# 'Dock' (VAPIPE-TEST-CAM)", p.stdout)
        self.assertIn("- id: dock    # profile 'main'", p.stdout)
