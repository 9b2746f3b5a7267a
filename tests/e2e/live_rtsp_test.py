"""Live cameras: two real RTSP servers on loopback, a live job classifying both, then Ctrl-C."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import unittest
import urllib.request

from e2e.common import (VAPIPE, E2ETest, MqttBroker, Run, Subscriber, WebhookReceiver, events_by_stream, free_port,
                        jpeg_size, mp4_layout, mp4_sample_times, results_by_stream, start_rtsp_camera, write_config)


class LiveRtsp(E2ETest):
    def start_camera(self, pattern, port=None):
        uri, _ = start_rtsp_camera(self, pattern, port)
        return uri

    def start_camera_process(self, pattern, port=None):
        return start_rtsp_camera(self, pattern, port)

    def wait_for_results(self, counts_at_least, timeout=60):
        """Waits until each stream id in `counts_at_least` has that many results; returns the counts."""
        deadline = time.time() + timeout
        while True:
            with open(self.subscriber.path) as f:
                lines = f.readlines()
            counts = {sid: sum(f'"results/{sid}"' in line for line in lines) for sid in counts_at_least}
            if all(counts[sid] >= n for sid, n in counts_at_least.items()) or time.time() > deadline:
                return counts
            time.sleep(0.2)

    def test_two_rtsp_cameras_are_classified_live_and_stop_cleanly(self):
        """Also: the yard camera sends B-frames, which RTP gives with their presentation times only, in
        decoding order; its segment's clip (publish.segments_clips) shows them in their order."""
        yard, _ = start_rtsp_camera(self, "pinwheel", x264_options="key-int-max=15 bframes=2 ! video/x-h264,profile=main")
        cams = {"door": ("smpte", self.start_camera("smpte")), "yard": ("pinwheel", yard)}
        # yard over TCP (rtspt://: RTP interleaved in the RTSP connection, as behind NAT), door as
        # GStreamer chooses (UDP first); both with a short jitter buffer (ingest.rtsp_latency_ms).
        cams["yard"] = ("pinwheel", "rtspt://" + cams["yard"][1][len("rtsp://"):])
        # gate: the door camera once more, key frames only (the server sends one every 15 frames, 0.5 s),
        # with a jitter buffer of its own.
        config, endpoint = write_config(self.dir, [(sid, uri) for sid, (_, uri) in cams.items()] +
                                        [("gate", cams["door"][1], {"keyframes_only": True, "rtsp_latency_ms": 400})],
                                        ingest={"rtsp_latency_ms": 150},
                                        publish={"segments_pictures_dir": os.path.join(self.dir, "pictures"),
                                                 "segments_clips": True, "segments_min_frames": 5})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.assertEqual(len(run.watch_stages()), 5)
        self.wait_for_results({"door": 30, "yard": 100, "gate": 6})
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertIn("live mode", run.stderr)
        self.assertIn("stream 'door': RTSP over udp, udp-mcast, tcp in that order (rtspt:// for TCP only), with a 150 ms "
                      "jitter buffer", run.stderr)
        self.assertIn("stream 'yard': RTSP over TCP only (rtspt://), with a 150 ms jitter buffer", run.stderr)
        self.assertIn("stream 'gate': key frames only (ingest.keyframes_only): avdec_h264 decodes no other frame",
                      run.stderr)
        self.assertIn("with a 400 ms jitter buffer (the stream's rtsp_latency_ms)", run.stderr)
        # Two connections to one camera: said at start, as `vapipe validate` says it.
        self.assertIn(f"streams 'door' and 'gate' read the same source {cams['door'][1]}: each opens its own "
                      "connection to it", run.stderr)
        messages = self.subscriber.wait(timeout=30)
        results, events = results_by_stream(messages), events_by_stream(messages)
        gate = results.get("gate", [])
        self.assertGreaterEqual(len(gate), 6)
        self.assertEqual([r["seq"] for r in gate], list(range(len(gate))))
        self.assertTrue(all(r["label"] == "smpte" for r in gate), [r["label"] for r in gate])
        # Key frames, not every frame (which would make every gap 33 ms). The mean gap, above 150 ms
        # rather than near the encoder's 500: the shared stream carries an extra key frame where a client
        # joins it, and the encoder counts its interval afresh from there, so the first gaps may be of
        # any length (seen: [391, 28, 453], [62, 398, 457], [33, 229, 500]; the median of 3 failed).
        gaps = [b["pts_ms"] - a["pts_ms"] for a, b in zip(gate, gate[1:])]
        self.assertGreater(sum(gaps) / len(gaps), 150, f"key frames 0.5 s apart, not every frame: {gaps}")
        for sid, (pattern, uri) in cams.items():
            got = results.get(sid, [])
            self.assertGreaterEqual(len(got), 30, f"camera {sid}")
            seqs = [r["seq"] for r in got]
            self.assertEqual(seqs, sorted(set(seqs)), f"camera {sid}: results out of order or twice")
            correct = sum(r["label"] == pattern for r in got)
            self.assertGreaterEqual(correct / len(got), 0.95, f"camera {sid}: {correct}/{len(got)} named '{pattern}': {[r['label'] for r in got]}")
            self.assertEqual([e["event"] for e in events[sid]], ["started", "eos"])
            self.assertEqual(events[sid][-1]["message"], "stopped")
            self.assertEqual(events[sid][0]["uri"], uri)
            self.assertLess(sum(r["latency_ms"]["total"] for r in got) / len(got), 2000)
            # The camera's clock, once its first RTCP sender report came (the server's clock is ours).
            clocked = [r for r in got if r["camera_unix_ms"] is not None]
            self.assertTrue(all("camera_unix_ms" in r for r in got))
            self.assertTrue(all(abs(r["capture_unix_ms"] - r["camera_unix_ms"]) < 10000 for r in clocked))
        # The yard's clip, ended by the job's end: every sample shown once it is decoded, B-frames after
        # the frames decoded before them (composition offsets). Past its first second (while the
        # jitter buffer learns the camera's clock, times come disordered, some untimed), each frame at
        # a time of its own, a frame or so after the one shown before, but for its last few (the
        # B-frames shown before its last P-frame may not have come). duration_s: to the end of its last
        # frame shown (the movie header's is to its last decoding time's).
        clip = [m["payload"] for m in messages if m["topic"] == "segments/yard" and m["payload"]["event"] == "clip"][0]
        self.assertIsNone(clip["error"], clip)
        samples = mp4_sample_times(clip["clip"])
        self.assertGreater(len(samples), 60, clip)
        self.assertTrue(all(shown >= decoded for decoded, shown in samples), samples[:30])
        self.assertGreater(sum(shown > decoded for decoded, shown in samples), len(samples) // 4, samples[:30])
        shown = sorted(s for _, s in samples)
        self.assertAlmostEqual(clip["duration_s"], shown[-1] + 1 / 30, delta=0.02, msg=samples[-10:])
        settled = [s for s in shown[:-3] if s > shown[0] + 1.0]
        self.assertGreater(len(settled), 20)
        self.assertEqual([(a, b) for a, b in zip(settled, settled[1:]) if not 0.01 < b - a < 0.1], [], settled)
        decoded = subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={clip['clip']}", "!", "qtdemux", "!",
                                  "h264parse", "!", "avdec_h264", "!", "fakesink"], capture_output=True, text=True,
                                 timeout=60)
        self.assertEqual(decoded.returncode, 0, decoded.stderr)
        self.assert_no_leftovers(run)

    def test_a_lane_of_cameras_needs_more_open_files_than_a_shell_allows_and_raises_its_limit(self):
        """A shell's soft limit of open files is 1,024 and GStreamer holds some 20 per camera: here 10
        cameras under a soft limit of 128 (hard 8192), which would crash the lane at its start (GStreamer
        aborts when it cannot open a socket) and fail the job after its restarts. vapipe raises its soft
        limit to the hard one: every camera is classified, and Ctrl-C ends the job cleanly."""
        uri, _ = start_rtsp_camera(self, "ball", width=160, height=120)
        ids = [f"cam{n}" for n in range(10)]
        config, endpoint = write_config(self.dir, [(sid, uri) for sid in ids])
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config, open_files=(128, 8192))
        counts = self.wait_for_results({sid: 10 for sid in ids}, timeout=90)
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertTrue(all(n >= 10 for n in counts.values()), counts)
        self.assertNotIn("killed by signal", run.stderr)
        self.assertNotIn("open files", run.stderr)  # no shortfall to warn of
        events = events_by_stream(self.subscriber.wait(timeout=30))
        for sid in ids:
            self.assertEqual([e["event"] for e in events[sid]], ["started", "eos"], sid)

    def test_a_camera_that_refuses_the_credentials_says_so_on_each_of_its_streams(self):
        """A camera that wants a password, given the wrong one, with a second region (`source`): each of the
        two streams publishes `reconnecting` with what the camera said and what it means, attempt after
        attempt, without the password; the other camera goes on; Ctrl-C ends both."""
        uri, _ = start_rtsp_camera(self, "ball", credentials="viewer:right")
        locked = uri.replace("rtsp://", "rtsp://viewer:badpass@")
        door = self.start_camera("smpte")
        config, endpoint = write_config(self.dir, [("locked", locked), {"id": "locked-gate", "source": "locked"},
                                                   ("door", door)],
                                        ingest={"reconnect_delay_s": 0.3, "reconnect_max_delay_s": 0.5})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.wait_for_results({"door": 20})
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(self.subscriber.path) as f:
                events = events_by_stream(json.loads(line) for line in f if line.endswith("\n"))
            if all(sum(e["event"] == "reconnecting" for e in events.get(sid, [])) >= 2 for sid in ("locked", "locked-gate")):
                break
            time.sleep(0.2)
        run.signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=60), 0, run.stderr[-3000:])
        messages = self.subscriber.wait(timeout=30)
        events = events_by_stream(messages)
        for sid in ("locked", "locked-gate"):
            kinds = [e["event"] for e in events.get(sid, [])]
            self.assertGreaterEqual(kinds.count("reconnecting"), 2, f"{sid}: {kinds}")
            self.assertEqual(kinds[-1], "eos", sid)
            self.assertNotIn("started", kinds, sid)
            reconnecting = [e for e in events[sid] if e["event"] == "reconnecting"]
            self.assertEqual([e["attempt"] for e in reconnecting], list(range(1, len(reconnecting) + 1)), sid)
            self.assertIn("Unauthorized (element source): the camera refused the user name and password in the "
                          "stream's uri", reconnecting[0]["message"])
        self.assertNotIn("badpass", json.dumps(messages) + run.stderr)
        self.assertGreaterEqual(len(results_by_stream(messages).get("door", [])), 20)
        self.assertNotIn("locked", results_by_stream(messages))

    def test_a_camera_that_answers_later_than_the_stall_timeout_is_connected(self):
        """An NVR waking a channel answers DESCRIBE after some seconds: the stall clock starts at its
        answer. Before, a camera answering after 4 s with stall_timeout_s 2 was torn down at 2 s, at every
        attempt, for ever ("its server takes the connection but sends no stream")."""
        camera, _ = self.start_camera_process("pinwheel")
        camera_port = int(camera.split(":")[2].split("/")[0])
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        self.addCleanup(listener.close)

        def pump(src, dst, hold_describe):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    if hold_describe and b"DESCRIBE" in data:
                        time.sleep(4)
                    dst.sendall(data)
            except OSError:
                pass
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        def proxy():
            while True:
                try:
                    client, _ = listener.accept()
                except OSError:
                    return
                server = socket.create_connection(("127.0.0.1", camera_port))
                threading.Thread(target=pump, args=(client, server, True), daemon=True).start()
                threading.Thread(target=pump, args=(server, client, False), daemon=True).start()

        threading.Thread(target=proxy, daemon=True).start()
        slow = camera.replace(f":{camera_port}/", f":{listener.getsockname()[1]}/").replace("rtsp://", "rtspt://")
        config, endpoint = write_config(self.dir, [("slow", slow)],
                                        ingest={"reconnect_delay_s": 0.5, "reconnect_max_delay_s": 1, "stall_timeout_s": 2})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        counts = self.wait_for_results({"slow": 20}, timeout=40)
        self.assertGreaterEqual(counts["slow"], 20, run.stderr_so_far()[-4000:])
        run.signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=60), 0, run.stderr[-3000:])
        self.assertNotIn("sends no stream", run.stderr)

    def test_a_camera_that_goes_away_and_comes_back_is_reconnected(self):
        """The yard camera's server dies and comes back on the same port a few seconds later: its
        stream reports reconnecting, then resumed, and its results go on, numbered on; the door camera
        does not notice. Its segments have pictures (publish.segments_pictures_dir), of the whole camera
        and of its top half (door-top, a region of the same decoding), which a real MQTT broker gets
        too, for Home Assistant's cameras, and a webhook as ntfy takes an attachment; and clips
        (publish.segments_clips), the yard's cut by its reconnection, the door's by the job's end."""
        door = self.start_camera("smpte")
        port = free_port()
        yard, yard_proc = self.start_camera_process("pinwheel", port)
        metrics_port = free_port()
        pictures = os.path.join(self.dir, "pictures")
        broker = MqttBroker(self.dir)
        self.addCleanup(broker.close)
        ntfy = WebhookReceiver()
        self.addCleanup(ntfy.close)
        config, endpoint = write_config(self.dir, [("door", door), ("yard", yard),
                                                   {"id": "door-top", "source": "door", "roi": [0, 0, 1, 0.5]}],
                                        ingest={"reconnect_delay_s": 0.5, "reconnect_max_delay_s": 1, "stall_timeout_s": 2},
                                        publish={"metrics_address": f"127.0.0.1:{metrics_port}", "segments_min_frames": 5,
                                                 "segments_pictures_dir": pictures,
                                                 "segments_clips": True, "segments_clip_pre_s": 2,
                                                 "mqtt": [{"url": broker.url, "topics": ["events/"], "home_assistant": True,
                                                           "labels": ["smpte", "pinwheel"]}],
                                                 "webhooks": [{"url": f"http://127.0.0.1:{ntfy.port}/door-alerts",
                                                               "topics": ["segments/door*"], "format": "text",
                                                               "attach_pictures": True, "attach_clips": True}]})
        self.subscriber = Subscriber(endpoint, self.dir)
        started_s = time.time()
        run = Run(config)
        before = self.wait_for_results({"door": 20, "yard": 20})
        self.assertGreaterEqual(before["yard"], 20, run.stderr_so_far()[-6000:])
        yard_proc.kill()
        yard_proc.wait()
        time.sleep(3)  # down for longer than the stall timeout: at least one attempt fails
        self.start_camera_process("pinwheel", port)
        after = self.wait_for_results({"yard": before["yard"] + 40}, timeout=60)
        # What an operator's Prometheus sees meanwhile (the snapshot is at most a second old).
        time.sleep(1.2)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=10).read())
        status = subprocess.run([VAPIPE, "status", f"127.0.0.1:{metrics_port}"], capture_output=True, text=True,
                                timeout=30)
        served_pictures = {}  # the first picture of each door stream, fetched over HTTP while the job runs
        served_clip = None  # the yard's first clip (cut by its reconnection): its first 1000 bytes, by a range
        with open(self.subscriber.path) as f:
            for line in f:
                m = json.loads(line)
                if (m["topic"] == "segments/yard" and m["payload"]["event"] == "clip" and served_clip is None
                        and m["payload"]["clip_url_path"]):
                    asked = urllib.request.Request(f"http://127.0.0.1:{metrics_port}{m['payload']['clip_url_path']}",
                                                   headers={"Range": "bytes=0-999"})
                    with urllib.request.urlopen(asked, timeout=10) as answer:
                        served_clip = (answer.status, answer.headers["Content-Type"], answer.read())
                if m["topic"] in ("segments/door", "segments/door-top") and m["payload"]["event"] == "picture":
                    sid = m["topic"].split("/", 1)[1]
                    if sid not in served_pictures and m["payload"]["picture_url_path"]:
                        served_pictures[sid] = urllib.request.urlopen(
                            f"http://127.0.0.1:{metrics_port}{m['payload']['picture_url_path']}", timeout=10).read()
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        # The ntfy webhook (format text) attaches pictures and clips up to ntfy.sh's 15 MB, said at start.
        self.assertRegex(run.stderr, r"publish\.webhooks\[0\] \(http://127\.0\.0\.1:\d+\) receives the messages on "
                                     r"segments/door\* \(.*\); with their pictures and clips attached, up to 15 MB "
                                     r"\(the format's receiver's\)")
        self.assertGreaterEqual(after["yard"], before["yard"] + 40, run.stderr[-3000:])
        messages = self.subscriber.wait(timeout=30)
        results, events = results_by_stream(messages), events_by_stream(messages)
        kinds = [e["event"] for e in events["yard"]]
        self.assertEqual(kinds[0], "started")
        self.assertIn("reconnecting", kinds)
        self.assertEqual(kinds[-2:], ["resumed", "eos"], kinds)
        self.assertEqual(kinds.count("resumed"), 1, kinds)
        reconnecting = [e for e in events["yard"] if e["event"] == "reconnecting"]
        self.assertEqual([e["attempt"] for e in reconnecting], list(range(1, len(reconnecting) + 1)))
        self.assertGreaterEqual(len(reconnecting), 2, "the camera was down for 3 s: the first attempt fails")
        self.assertEqual(events["door"][0]["event"], "started")
        self.assertEqual([e["event"] for e in events["door"]], ["started", "eos"])
        for sid, pattern in (("door", "smpte"), ("yard", "pinwheel")):
            seqs = [r["seq"] for r in results[sid]]
            self.assertEqual(seqs, sorted(set(seqs)), f"camera {sid}: results out of order or twice")
            correct = sum(r["label"] == pattern for r in results[sid])
            self.assertGreaterEqual(correct / len(seqs), 0.95, f"camera {sid}: {correct}/{len(seqs)} named '{pattern}'")
        with open(os.path.join(self.dir, "summary.json")) as f:
            summary = json.load(f)
        by_id = {s["stream_id"]: s for s in summary["streams"]}
        self.assertEqual(by_id["yard"]["reconnects"], 1)
        self.assertEqual(by_id["door"]["reconnects"], 0)
        self.assertEqual(by_id["yard"]["status"], "stopped")
        self.assertIn('vapipe_reconnects_total{stream="yard"} 1\n', metrics)
        self.assertIn('vapipe_reconnects_total{stream="door"} 0\n', metrics)
        self.assertIn('vapipe_stream_state{stream="yard",state="running"} 1\n', metrics)
        scraped = int(re.search(r'^vapipe_results_total\{stream="yard"\} (\d+)$', metrics, re.M).group(1))
        self.assertGreaterEqual(scraped, before["yard"] + 30)
        self.assertEqual(health["status"], "ok")
        self.assertEqual(health["streams"]["yard"]["state"], "running")
        # The door camera's segment is open: when it began, for alerts (the yard's, across its reconnection,
        # is not asserted: a few frames misnamed after it may end one).
        since = float(re.search(r'^vapipe_segment_open_since_seconds\{stream="door",label="smpte"\} (\S+)$', metrics,
                                re.M).group(1))
        self.assertGreater(since, started_s)
        self.assertLess(since, time.time())
        self.assertEqual([g["label"] for g in health["streams"]["door"]["segments"]], ["smpte"])
        self.assertGreater(health["streams"]["door"]["segments"][0]["for_s"], 0)
        self.assertIsInstance(health["streams"]["yard"]["segments"], list)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertRegex(status.stdout, r"progress  segments\n")
        self.assertRegex(status.stdout, r"\n  door +running .*  smpte for [0-9][^,\n]* s\n")
        self.assertEqual(health["streams"]["yard"]["reconnects"], 1)
        # Each door segment's picture: a JPEG of the segment's best frame (of those it began with; the
        # bars score the same on each, so its first), decoded again from the compressed frames ingest
        # kept, the camera's 640x360 or its top half, under pictures/<stream>/<day>/, said after its
        # began message.
        for sid, size in (("door", (640, 360)), ("door-top", (640, 180))):
            said = [m["payload"] for m in messages if m["topic"] == f"segments/{sid}"]
            began = [g for g in said if g["event"] == "began"]
            taken = [g for g in said if g["event"] == "picture"]
            self.assertGreaterEqual(len(began), 1, sid)
            self.assertEqual([(g["label"], g["start_seq"]) for g in taken],
                             [(g["label"], g["start_seq"]) for g in began], f"{sid}: a picture per segment")
            self.assertLess(said.index(began[0]), said.index(taken[0]))
            first = taken[0]
            self.assertIsNone(first["error"], first)
            self.assertEqual((first["frame"], first["seq"]), ("best", began[0]["best_seq"]),
                             (first, [line for line in run.stderr.splitlines() if "picture" in line][-6:]))
            self.assertTrue(first["picture"].startswith(os.path.join(pictures, sid) + "/"), first["picture"])
            self.assertTrue(first["picture"].endswith(f"_{first['label']}.jpg"), first["picture"])
            self.assertEqual(jpeg_size(first["picture"]), size, sid)
            # Served by publish's metrics server too, for a subscriber on another host.
            self.assertEqual(first["picture_url_path"], "/pictures/" + os.path.relpath(first["picture"], pictures))
            # The open segment in /healthz says where its picture is (a dashboard shows it).
            self.assertEqual([g["picture_url_path"] for g in health["streams"][sid]["segments"]],
                             [first["picture_url_path"]], sid)
            with open(first["picture"], "rb") as f:
                self.assertEqual(served_pictures[sid], f.read(), sid)
        self.assertRegex(metrics, r'\nvapipe_segment_pictures_total\{stream="door",outcome="written"\} [1-9]')
        # Each segment's clip: an MP4 beside its picture, of the camera's own H.264 (its index first, for a
        # player that plays it as it downloads). The door's segment went on to the job's end, which ends
        # its clip; the door-top's is of the same camera, whole. The yard's first ended with its
        # connection, and was served by publish while the job ran.
        for sid in ("door", "door-top", "yard"):
            said = [m["payload"] for m in messages if m["topic"] == f"segments/{sid}"]
            clips = [g for g in said if g["event"] == "clip"]
            pictures_of = {(g["label"], g["start_seq"]): g["picture"] for g in said if g["event"] == "picture"}
            self.assertGreaterEqual(len(clips), 1, (sid, [line for line in run.stderr.splitlines() if "clip" in line]))
            first = clips[0]
            self.assertIsNone(first["error"], first)
            self.assertEqual(first["clip"], pictures_of[(first["label"], first["start_seq"])][:-4] + ".mp4")
            boxes, duration_s = mp4_layout(first["clip"])
            self.assertEqual(boxes[:3], ["ftyp", "moov", "mdat"], sid)
            # The yard's ran from its first frames until it went away, after 20 or so results.
            self.assertGreater(duration_s, 0.2 if sid == "yard" else 1.0, first)
            self.assertFalse(os.path.exists(first["clip"] + ".part"))
            # Its samples placed as a player shows them (test_a_camera_with_b_frames_... checks more).
            self.assertEqual(mp4_sample_times(first["clip"])[0][0], 0.0, sid)
            decoded = subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={first['clip']}", "!", "qtdemux",
                                      "!", "h264parse", "!", "avdec_h264", "!", "fakesink"],
                                     capture_output=True, text=True, timeout=60)
            self.assertEqual(decoded.returncode, 0, decoded.stderr)
            if sid == "yard":
                self.assertIn("started over", first["cut_short"])
            else:
                self.assertEqual(first["cut_short"], "the stream ended")
        self.assertIsNotNone(served_clip, "the yard's clip was said while the job ran")
        with open([m["payload"]["clip"] for m in messages if m["topic"] == "segments/yard"
                   and m["payload"]["event"] == "clip"][0], "rb") as f:
            self.assertEqual(served_clip, (206, "video/mp4", f.read(1000)))
        self.assertRegex(metrics, r'\nvapipe_segment_clips_total\{stream="yard",outcome="written"\} [1-9]')
        # MQTT (home_assistant, so pictures by default): each door stream's camera entity, announced
        # beside its sensors, and the JPEG of its latest smpte segment, retained, as the file's bytes.
        announced = {topic: payload for topic, *payload in broker.received()
                     if topic.startswith("homeassistant/camera/vapipe_e2e_door")}
        for sid in ("door", "door-top"):
            device = f"vapipe_e2e_{sid.replace('-', '_')}_[0-9a-f]{{8}}"
            camera = [json.loads(p[0]) for t, p in announced.items()
                      if re.fullmatch(f"homeassistant/camera/{device}/smpte/config", t)]
            self.assertEqual([c["topic"] for c in camera], [f"vapipe/e2e/picture/{sid}/smpte"], announced.keys())
            latest = [m["payload"]["picture"] for m in messages if m["topic"] == f"segments/{sid}"
                      and m["payload"]["event"] == "picture" and m["payload"]["label"] == "smpte"
                      and m["payload"]["picture"]][-1]
            kept = subprocess.run(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(broker.port), "-t",
                                   f"vapipe/e2e/picture/{sid}/smpte", "-C", "1", "-N", "-W", "10"],
                                  capture_output=True, timeout=30)
            self.assertEqual(kept.returncode, 0, kept.stderr)
            with open(latest, "rb") as f:
                self.assertEqual(kept.stdout, f.read(), sid)
        # The webhook (format text, attach_pictures): each door picture's JPEG as the body, its line in
        # X-Message, as ntfy makes a notification with the picture of it; the rest as lines.
        posted = [r for r in ntfy.received if r["content_type"] == "image/jpeg"]
        door_pictures = [m["payload"] for m in messages if m["topic"].startswith("segments/door")  # door-top's too
                         and m["payload"]["event"] == "picture" and m["payload"]["picture"]]
        self.assertEqual(len(posted), len(door_pictures))
        for post, said in zip(posted, door_pictures):
            with open(said["picture"], "rb") as f:
                self.assertEqual(post["body"], f.read())
            self.assertEqual(post["topic"], f"segments/{said['stream_id']}")
            self.assertRegex(post["message"], rf"^{said['stream_id']}: smpte at \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d$")
            self.assertEqual(post["filename"], f"{said['stream_id']}_" + os.path.basename(said["picture"]))
        self.assertTrue(any(r["text"] and r["text"].startswith("door: smpte began at ") for r in ntfy.received))
        # attach_clips: each door clip's MP4 as the body, "door: smpte, 8.2 s" in X-Message.
        posted = [r for r in ntfy.received if r["content_type"] == "video/mp4"]
        door_clips = [m["payload"] for m in messages if m["topic"].startswith("segments/door")
                      and m["payload"]["event"] == "clip" and m["payload"]["clip"]]
        self.assertEqual(len(posted), len(door_clips))
        for post, said in zip(posted, door_clips):
            with open(said["clip"], "rb") as f:
                self.assertEqual(post["body"], f.read())
            self.assertRegex(post["message"], rf"^{said['stream_id']}: smpte, [0-9.]+ s$")
            self.assertEqual(post["filename"], f"{said['stream_id']}_" + os.path.basename(said["clip"]))
        # Read back from the results file, a camera's segment has the picture its job took.
        listed = subprocess.run([VAPIPE, "segments", os.path.join(self.dir, "results.jsonl"), "--stream", "door",
                                 "--min-frames", "5", "--frames", os.path.join(self.dir, "frames"), "--json"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        door_segments = [json.loads(line) for line in listed.stdout.splitlines()]
        door_pictures = [m["payload"]["picture"] for m in messages
                         if m["topic"] == "segments/door" and m["payload"]["event"] == "picture"]
        self.assertEqual(door_segments[0]["picture"], door_pictures[0])
        self.assert_no_leftovers(run)


    def test_a_segment_held_across_a_cameras_outage_goes_on_in_a_next_clip(self):
        """publish.segments_reconnect_grace_s with clips: the camera's server dies mid-segment and comes
        back within the grace. One segment runs across the outage (its ended counts the reconnection),
        and its clip comes in two parts: the first, cut when the camera's decoder started over, says it
        continues (said once the camera is back: publish asks ingest to go on); the second, of the new
        connection's frames, ends with the job. Each part is an MP4 that decodes."""
        port = free_port()
        uri, proc = self.start_camera_process("pinwheel", port)
        pictures = os.path.join(self.dir, "pictures")
        config, endpoint = write_config(self.dir, [("yard", uri)],
                                        ingest={"reconnect_delay_s": 0.5, "reconnect_max_delay_s": 1, "stall_timeout_s": 2},
                                        publish={"segments_min_frames": 15, "segments_pictures_dir": pictures,
                                                 "segments_clips": True, "segments_clip_pre_s": 1,
                                                 "segments_reconnect_grace_s": 30})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        before = self.wait_for_results({"yard": 40})
        self.assertGreaterEqual(before["yard"], 40, run.stderr_so_far()[-6000:])
        proc.kill()
        proc.wait()
        time.sleep(2)
        self.start_camera_process("pinwheel", port)
        after = self.wait_for_results({"yard": before["yard"] + 60}, timeout=60)
        self.assertGreaterEqual(after["yard"], before["yard"] + 60, run.stderr_so_far()[-6000:])
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        messages = self.subscriber.wait(timeout=30)
        said = [m["payload"] for m in messages if m["topic"] == "segments/yard"]
        segments = [(g["event"], g["label"], g["start_seq"]) for g in said if g["event"] in ("began", "ended")]
        self.assertEqual(segments, [("began", "pinwheel", 0), ("ended", "pinwheel", 0)], said)
        ended = [g for g in said if g["event"] == "ended"][0]
        self.assertEqual(ended["reconnections"], 1, ended)
        # `vapipe segments` over what the bus sent says the same segment, reconnection counted.
        cli = subprocess.run([VAPIPE, "segments", self.subscriber.path, "--json", "--min-frames", "15",
                              "--reconnect-grace", "30"], capture_output=True, text=True, timeout=30)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        listed = [json.loads(line) for line in cli.stdout.splitlines()]
        self.assertEqual([(g["label"], g["start_seq"], g["reconnections"]) for g in listed],
                         [("pinwheel", 0, 1)], cli.stdout)
        clips = [g for g in said if g["event"] == "clip"]
        self.assertEqual([(c["part"], c["continues"], c["error"]) for c in clips], [(1, True, None), (2, False, None)],
                         (clips, [line for line in run.stderr.splitlines() if "clip" in line]))
        self.assertIn("started over", clips[0]["cut_short"])
        self.assertEqual(clips[1]["cut_short"], "the stream ended")
        self.assertEqual(clips[1]["clip"], clips[0]["clip"][:-4] + ".2.mp4")
        # The first part is said once the camera is back (its segment went on), not at the loss.
        order = [(m["topic"], m["payload"].get("event"), m["payload"].get("part")) for m in messages]
        self.assertLess(order.index(("events/yard", "resumed", None)), order.index(("segments/yard", "clip", 1)))
        for clip in clips:
            self.assertGreater(clip["duration_s"], 0.5, clip)
            self.assertEqual(mp4_layout(clip["clip"])[0][:3], ["ftyp", "moov", "mdat"])
            decoded = subprocess.run(["gst-launch-1.0", "-q", "filesrc", f"location={clip['clip']}", "!", "qtdemux",
                                      "!", "h264parse", "!", "avdec_h264", "!", "fakesink"],
                                     capture_output=True, text=True, timeout=60)
            self.assertEqual(decoded.returncode, 0, decoded.stderr)
        self.assert_no_leftovers(run)


if __name__ == "__main__":
    unittest.main()
