"""Bad input: a clear error that names the thing, and nothing else is lost."""
import json
import os
import random
import re
import resource
import signal
import socket
import subprocess
import time
import unittest

from e2e.common import (LABELS, MODEL, VAPIPE, E2ETest, KafkaCluster, MqttBroker, RedisSentinel, RedisServer, Run,
                        Subscriber, WebhookReceiver, events_by_stream, free_port, make_clip, results_by_stream,
                        start_rtsp_camera, write_config)


class BadInput(E2ETest):
    def test_corrupt_and_missing_files_fail_alone_while_other_streams_complete(self):
        good = os.path.join(self.dir, "good.mp4")
        make_clip(good, "smpte", 40, 640, 360)
        corrupt = os.path.join(self.dir, "corrupt.mkv")
        rng = random.Random(7)
        with open(corrupt, "wb") as f:
            f.write(bytes(rng.getrandbits(8) for _ in range(300000)))
        missing = os.path.join(self.dir, "missing.mp4")
        config, endpoint = write_config(self.dir, [
            ("good", good), ("corrupt", corrupt), ("missing", missing),
            ("synthetic", "test://blue?frames=30&width=320&height=240")])
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        code = run.wait()
        self.assertEqual(code, 3, "exit status 3: the job finished but some stream failed\n" + run.stderr[-3000:])
        messages = self.subscriber.wait()
        results, events = results_by_stream(messages), events_by_stream(messages)
        self.assertEqual([r["seq"] for r in results["good"]], list(range(40)))
        self.assertEqual([r["seq"] for r in results["synthetic"]], list(range(30)))
        self.assertNotIn("corrupt", results)
        self.assertNotIn("missing", results)
        self.assertEqual(events["corrupt"][-1]["event"], "error")
        self.assertTrue(events["corrupt"][-1]["message"])
        self.assertEqual(events["missing"][-1]["event"], "error")
        self.assertIn(missing + " does not exist", events["missing"][-1]["message"])
        self.assertEqual(events["good"][-1]["event"], "eos")
        summary = [m["payload"] for m in messages if m["topic"] == "job/summary"][0]
        self.assertEqual(summary["failed_streams"], 2)
        status = {s["stream_id"]: s["status"] for s in summary["streams"]}
        self.assertEqual(status, {"good": "done", "corrupt": "failed", "missing": "failed", "synthetic": "done"})
        self.assertIn("stream 'missing'", run.stderr)

    def test_a_file_that_crashes_the_decoder_is_left_out_and_the_other_files_go_on(self):
        """GStreamer's FFV1 decoder segfaults on 10-bit grey frames (tests/media/ffv1-gray10-64x48.mkv):
        ingest died with it, and the job stopped at start-up (exit 2, every stream pending), the file
        never named. Now the job restarts reading one file at a time, the crash names its file, that
        stream ends with an error saying so, and the others are classified whole (exit 3)."""
        crashing = os.path.join(self.dir, "b-scan.mkv")
        with open(os.path.join(os.path.dirname(__file__), "..", "media", "ffv1-gray10-64x48.mkv"), "rb") as f:
            data = f.read()
        with open(crashing, "wb") as f:
            f.write(data)
        first, last = os.path.join(self.dir, "a-good.mkv"), os.path.join(self.dir, "c-good.mkv")
        make_clip(first, "smpte", 40, 320, 240)
        make_clip(last, "ball", 30, 320, 240)
        config, _ = write_config(self.dir, [("a", first), ("b", crashing), ("c", last)],
                                 publish={"wait_for_subscribers": 0})
        run = Run(config)
        code = run.wait(timeout=180)
        self.assertEqual(code, 3, run.stderr[-4000:])
        lines = [json.loads(line) for line in open(os.path.join(self.dir, "results.jsonl"))]
        results, events = results_by_stream(lines), events_by_stream(lines)
        self.assertEqual([r["seq"] for r in results["a"]], list(range(40)))
        self.assertEqual([r["seq"] for r in results["c"]], list(range(30)))
        self.assertNotIn("b", results)
        self.assertEqual(events["b"][-1]["event"], "error")
        self.assertIn("ingest crashed while reading it (killed by signal 11 (Segmentation fault))",
                      events["b"][-1]["message"])
        self.assertIn("stream 'b' crashed ingest", run.stderr)
        self.assertIn("while reading 'b' (" + crashing + ")", run.stderr)

    def test_a_file_cut_short_is_classified_to_its_cut_and_said_to_be_cut(self):
        """A recording that did not finish, or a copy cut halfway. A Matroska file plays to its cut: it
        used to end 'done' like a whole file, with nothing said. Now its eos event and the summary say it
        is cut short. An MP4 without its index (written last by a recorder) cannot be
        read: an error saying so (it was GStreamer's "no playable streams", or a stream that waited for
        ever)."""
        good = os.path.join(self.dir, "good.mkv")
        make_clip(good, "smpte", 30, 320, 240)
        cut = os.path.join(self.dir, "cut.mkv")
        unfinished = os.path.join(self.dir, "unfinished.mp4")
        for path in (cut, unfinished):
            whole = path + ".whole" + os.path.splitext(path)[1]
            make_clip(whole, "ball", 90, 320, 240)
            with open(whole, "rb") as f:
                data = f.read()
            with open(path, "wb") as f:
                f.write(data[:len(data) // 2])
        config, _ = write_config(self.dir, [("good", good), ("cut", cut), ("unfinished", unfinished)],
                                 publish={"wait_for_subscribers": 0})
        run = Run(config)
        code = run.wait(timeout=120)
        self.assertEqual(code, 3, run.stderr[-3000:])
        lines = [json.loads(line) for line in open(os.path.join(self.dir, "results.jsonl"))]
        results = results_by_stream(lines)
        events = events_by_stream(lines)
        self.assertEqual([r["seq"] for r in results["good"]], list(range(30)))
        self.assertIsNone(events["good"][-1]["warning"])
        frames = len(results["cut"])
        self.assertTrue(20 < frames < 90, frames)
        self.assertEqual([r["seq"] for r in results["cut"]], list(range(frames)))
        end = events["cut"][-1]
        self.assertEqual((end["event"], end["message"], end["frames"]), ("eos", "end of stream", frames))
        self.assertRegex(end["warning"], r"^the file is cut short: it ends \d+ bytes into its Matroska segment of "
                                         r"\d+ bytes \(a recording that did not finish, or a copy cut short\)")
        self.assertNotIn("unfinished", results)
        self.assertEqual(events["unfinished"][-1]["event"], "error")
        self.assertIn("file " + unfinished + ": it is an MP4/QuickTime file without its index (no 'moov' box",
                      events["unfinished"][-1]["message"])
        with open(os.path.join(self.dir, "summary.json")) as f:
            summary = {s["stream_id"]: s for s in json.load(f)["streams"]}
        self.assertEqual((summary["cut"]["status"], summary["cut"]["message"]), ("done", end["warning"]))
        self.assertEqual(summary["good"]["message"], "")
        self.assertIn("  cut (done): the file is cut short: ", run.stdout)
        self.assertIn("  unfinished (failed): file " + unfinished + ": it is an MP4", run.stdout)

    def run_bad_config(self, command, yaml_text):
        """Runs `vapipe COMMAND FILE` on a config that must be refused; returns (path, stderr)."""
        path = os.path.join(self.dir, "bad.yaml")
        with open(path, "w") as f:
            f.write(yaml_text)
        p = subprocess.run([VAPIPE, command, path], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        return path, p.stderr

    def test_validate_open_opens_each_stream_and_says_which_cannot_be_read_and_why(self):
        """`vapipe validate --open`: before a job, each camera and file opened for real until its first
        frame (a config cannot show a wrong port, a camera that is off or a missing file): ok with its
        size, or FAILED with why; exit 1 when one failed. A `source`'s member is its source's frames."""
        camera, _ = start_rtsp_camera(self, "ball", width=320, height=240)
        clip = os.path.join(self.dir, "clip.mp4")
        make_clip(clip, "smpte", 10, 352, 288)
        closed = free_port()
        # Webhooks: each receiver connected to, and nothing sent (a request would be an alert).
        receiver = WebhookReceiver()
        self.addCleanup(receiver.close)
        webhooks = [{"url": f"http://127.0.0.1:{receiver.port}/api/webhook/x", "topics": ["events/"]},
                    {"url": f"http://127.0.0.1:{closed}/hook", "topics": ["events/"]}]
        # MQTT brokers: an MQTT connection to each, its password tried, nothing published.
        broker = MqttBroker(self.dir, user="vapipe", password="right one")
        self.addCleanup(broker.close)
        with open(os.path.join(self.dir, "right.password"), "w") as f:
            f.write("right one\n")
        with open(os.path.join(self.dir, "wrong.password"), "w") as f:
            f.write("wrong one\n")
        # One that takes packets of up to 100 KB (AWS IoT Core's 128 KB) and says so (MQTT 5): pictures of
        # up to pictures_max_kb (1000 by default) would not all be published to it.
        small = MqttBroker(self.dir, max_packet_size=100_000)
        self.addCleanup(small.close)
        mqtt = [{"url": broker.url, "topics": ["events/"], "username": "vapipe", "password_file": "right.password"},
                {"url": broker.url, "topics": ["events/"], "username": "vapipe", "password_file": "wrong.password"},
                {"url": small.url, "topics": ["segments/"], "home_assistant": True, "labels": ["ball"],
                 "pictures": True}]
        # Redis servers: a connection to each (PING), nothing added.
        redis = RedisServer()
        self.addCleanup(redis.close)
        sentinel = RedisSentinel(redis)  # (a master found through Redis Sentinel)
        self.addCleanup(sentinel.close)
        watched = f"redis+sentinel://127.0.0.1:{sentinel.port}/mymaster"
        # Kafka clusters: each asked for its metadata, nothing produced.
        cluster = KafkaCluster(1)
        self.addCleanup(cluster.close)
        config, _ = write_config(self.dir, [
            ("door", camera), ("gate", f"rtsp://127.0.0.1:{closed}/stream1"), ("clip", clip),
            ("gone", os.path.join(self.dir, "gone.mp4")), {"id": "half", "source": "door", "roi": [0, 0, 0.5, 1]}],
            job={"mode": "live"}, publish={"webhooks": webhooks, "mqtt": mqtt, "segments_min_frames": 5,
                                           "segments_pictures_dir": "pictures",
                                           "redis": [{"url": redis.url}, {"url": f"redis://127.0.0.1:{closed}"},
                                                     {"url": watched}],
                                           "kafka": [{"url": cluster.url, "topics": ["events/"]},
                                                     {"url": f"kafka://127.0.0.1:{closed}", "topics": ["events/"]}]})
        p = subprocess.run([VAPIPE, "validate", config, "--open"], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"\n    door +ok: +320x240 \w+, first frame after \d+\.\d+ s\n")
        self.assertRegex(p.stdout, r"\n    clip +ok: +352x288 \w+, first frame after")
        self.assertIn(f"\n    gate                 FAILED: Could not open resource for reading and writing. (element source): "
                      f"cannot connect to 127.0.0.1:{closed}: connection refused", p.stdout)
        self.assertIn("\n    gone                 FAILED: file " + os.path.join(self.dir, "gone.mp4") + " does not exist\n",
                      p.stdout)
        self.assertNotRegex(p.stdout, r"\n    half +(ok|FAILED)")
        self.assertIn("  2 stream(s) could not be opened", p.stdout)
        self.assertIn(f"\n    webhook 0            ok:     connects to http://127.0.0.1:{receiver.port} (nothing was sent)\n",
                      p.stdout)
        self.assertIn(f"\n    webhook 1            FAILED: cannot connect to 127.0.0.1:{closed}: connection refused", p.stdout)
        self.assertIn("  1 webhook receiver(s) could not be reached", p.stdout)
        self.assertEqual(receiver.received, [])
        self.assertIn(f"\n    mqtt 0               ok:     connects to {broker.url} as 'vapipe' (MQTT 5; nothing was "
                      "published)\n", p.stdout)
        self.assertIn(f"\n    mqtt 2               ok:     connects to {small.url} (MQTT 5, takes messages of up to "
                      "100 KB; nothing was published)\n    mqtt 2               WARN:   segment pictures over 100 KB "
                      "will not be published to it, though pictures_max_kb allows 1000 KB (set it to 99 to match the "
                      "broker)\n", p.stdout)
        self.assertIn("\n    mqtt 1               FAILED: the broker refused the connection: not authorised\n", p.stdout)
        self.assertIn("  1 MQTT broker(s) could not be reached", p.stdout)
        self.assertEqual(broker.received(), [])  # not even a status: validate is not the job
        self.assertIn(f"\n    redis 0              ok:     connects to {redis.url} (nothing was added)\n", p.stdout)
        self.assertIn(f"\n    redis 1              FAILED: cannot connect to 127.0.0.1:{closed}: connection refused\n",
                      p.stdout)
        self.assertIn(f"\n    redis 2              ok:     connects to {watched} (its master now at {redis.url[8:]}) "
                      "(nothing was added)\n", p.stdout)
        self.assertIn("  1 Redis server(s) could not be reached", p.stdout)
        self.assertEqual(redis.cli("DBSIZE"), "0")
        self.assertIn(f"\n    kafka 0              ok:     connects to {cluster.url} (nothing was produced)\n", p.stdout)
        self.assertRegex(p.stdout, rf"\n    kafka 1              FAILED: 1/1 brokers are down: 127\.0\.0\.1:{closed}/bootstrap: "
                                   r"Connect to ipv4#127\.0\.0\.1:\d+ failed: Connection refused")
        self.assertIn("  1 Kafka cluster(s) could not be reached", p.stdout)
        self.assertEqual(cluster.records("vapipe.e2e.events"), [])
        self.assertNotIn("right one", p.stdout)
        self.assertEqual(p.stderr, "")
        # --send-test: a `test` event POSTed to each webhook (whatever its topics), and what it answered.
        p = subprocess.run([VAPIPE, "validate", config, "--send-test", "--timeout", "3"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertNotIn("opening each stream", p.stdout)  # without --open: the webhooks only
        self.assertIn(f"\n    webhook 0            ok:     took a test message at http://127.0.0.1:{receiver.port}/...\n",
                      p.stdout)
        # (which cause, found by a connection of its own: httplib keeps no errno)
        self.assertIn(f"\n    webhook 1            FAILED: cannot connect to 127.0.0.1:{closed}: connection refused (the "
                      "host is up but nothing listens at that port: a wrong port, or its server is off)\n", p.stdout)
        self.assertEqual(len(receiver.received), 1)
        test = receiver.received[0]["json"]
        self.assertEqual(test["topic"], "events/door")
        self.assertEqual(test["payload"]["event"], "test")
        self.assertIn("a test message from vapipe validate --send-test", test["payload"]["message"])
        self.assertIn(f"\n    mqtt 0               ok:     {broker.url} took a test message on vapipe/e2e/events/door\n",
                      p.stdout)
        self.assertIn("\n    mqtt 1               FAILED: the broker refused the connection: not authorised\n", p.stdout)
        self.assertEqual([t for t, _ in broker.wait_for(1)], ["vapipe/e2e/events/door"])
        self.assertIn(f"\n    redis 0              ok:     {redis.url} added a test message to the stream "
                      "vapipe:e2e:events/door\n", p.stdout)
        self.assertIn(f"\n    redis 2              ok:     {watched} (its master now at {redis.url[8:]}) added a test "
                      "message to the stream vapipe:e2e:events/door\n", p.stdout)
        self.assertEqual([(t, e["event"]) for t, e in redis.entries("vapipe:e2e:events/door")],
                         [("events/door", "test")] * 2)  # (redis 0's and redis 2's, on one server)
        self.assertIn(f"\n    kafka 0              ok:     {cluster.url} took a test message on vapipe.e2e.events (key "
                      "door)\n", p.stdout)
        self.assertRegex(p.stdout, r"\n    kafka 1              FAILED: 1/1 brokers are down: .*Connection refused")
        sent = cluster.records("vapipe.e2e.events", 1)
        self.assertEqual([(r["key"], r["headers"]["vapipe-topic"], json.loads(r["value"])["event"]) for r in sent],
                         [("door", "events/door", "test")])

    def test_validate_open_waits_as_long_as_told_for_a_server_that_never_answers(self):
        """`vapipe validate --open --timeout 2 --at-once 1`: a camera whose server accepts connections and
        never answers (a hung NVR) is given 2 s, and says that it accepts connections; a bad value is refused."""
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes connections; nothing reads or answers them
        self.addCleanup(silent.close)
        config, _ = write_config(self.dir, [("hung", f"rtsp://127.0.0.1:{silent.getsockname()[1]}/stream1")],
                                 job={"mode": "live"})
        p = subprocess.run([VAPIPE, "validate", config, "--open", "--timeout", "2", "--at-once", "1"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("(at most 2 s each, 1 at once)", p.stdout)
        self.assertIn("\n    hung                 FAILED: no frame within 2 s (its server accepts connections, but no "
                      "picture came)", p.stdout)
        bad = subprocess.run([VAPIPE, "validate", config, "--open", "--timeout", "0"], capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("vapipe validate: --timeout wants a whole number from 1 to 3600, got '0'", bad.stderr)

    def test_unknown_config_key_names_file_line_and_key_and_starts_nothing(self):
        path, err = self.run_bad_config(
            "run", "streams:\n  - id: a\n    uri: test://ball\nbatch:\n  max_batch: 8\ninfer: {model: m.pt, labels: l.txt}\n")
        self.assertIn(f"{path}:5: batch.max_batch: unknown key", err)
        self.assertNotIn("started stage", err)

    def test_command_line_mistakes_are_usage_errors_that_say_what_is_wrong(self):
        """Each refused before anything starts, exit 1, naming the argument; --help after a command is its
        usage (it was taken as a file name, a stage, an unknown argument)."""
        config, _ = write_config(self.dir, [("a", "test://ball?frames=5&width=160&height=120")])
        env = dict(os.environ, VAPIPE_LOG_LEVEL="Info")  # any case: taken
        for command, said in ((["run", config, "--job-id", "a/b"], "--job-id 'a/b' must be 1 to 64 letters"),
                              (["run", config, "--job-id", "x" * 120], "--job-id 'xxx"),
                              (["stage", "batch", "--config", config, "--lane", "abc"], "--lane wants a lane number"),
                              (["stage", "batch", "--config", config, "--lane", "-1"], "--lane wants a lane number"),
                              (["segments", config, "--min-frames", "-1"], "--min-frames wants a whole number from 1"),
                              (["bench", "infer", config, "--batch", "abc"], "--batch wants a whole number from 1"),
                              (["sub", "--count", "-1"], "vapipe sub: --count -1: expected a whole number of messages"),
                              (["sub", "--count", "x"], "vapipe sub: --count x: expected a whole number of messages"),
                              (["sub", "--topic"], "vapipe sub: --topic needs a value\nusage: vapipe sub"),
                              (["sub", "--bogus"], "vapipe sub: unexpected argument '--bogus'")):
            proc = subprocess.run([VAPIPE, *command], capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(proc.returncode, 1, f"{command}: {proc.stderr[-2000:]}")
            self.assertIn(said, proc.stderr, command)
        proc = subprocess.run([VAPIPE, "validate", config], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, VAPIPE_LOG_LEVEL="bogus"))
        self.assertEqual(proc.returncode, 1)
        self.assertIn("VAPIPE_LOG_LEVEL='bogus' is not a log level", proc.stderr)
        for command in ("validate", "stage", "status", "segments", "reload", "run"):
            proc = subprocess.run([VAPIPE, command, "--help"], capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue(proc.stdout.startswith("usage:\n  vapipe " + command + " "), proc.stdout)

    def test_bad_value_names_the_key(self):
        path, err = self.run_bad_config(
            "validate", "streams:\n  - id: a\n    uri: test://ball\npreprocess:\n  dtype: float64\ninfer: {model: m.pt, labels: l.txt}\n")
        self.assertIn(f"{path}:5: preprocess.dtype: expected one of float32 | float16, got 'float64'", err)
        # A scheme no GStreamer source reads (known once GStreamer is asked): at its uri's line, by its key.
        path, err = self.run_bad_config(
            "validate", "streams:\n  - id: a\n    max_fps: 2\n    uri: rstp://10.0.0.5/stream1\n"
                        "infer: {model: m.pt, labels: l.txt}\n")
        self.assertIn(f"{path}:4: streams[0].uri: no GStreamer source here reads rstp:// URIs (did you mean rtsp://?)", err)

    def test_missing_model_is_a_start_up_error_naming_the_stage_and_file(self):
        config, _ = write_config(self.dir, [("a", "test://ball?frames=20")],
                                 infer={"model": os.path.join(self.dir, "nope.pt")},
                                 publish={"wait_for_subscribers": 0})
        # `vapipe validate` says so first (the config may be meant for another machine: said, not refused).
        validate = subprocess.run([VAPIPE, "validate", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(validate.returncode, 0, validate.stderr)
        self.assertIn("MISSING HERE: ", validate.stdout)
        self.assertIn("infer.model: " + os.path.join(self.dir, "nope.pt") + ": no such file (`vapipe run` here fails at "
                      "start)", validate.stdout)
        run = Run(config)
        code = run.wait(timeout=60)
        self.assertEqual(code, 2, run.stderr[-3000:])
        self.assertIn("stage infer", run.stderr)
        self.assertIn(os.path.join(self.dir, "nope.pt") + ": file not found", run.stderr)

    def test_a_model_that_does_not_load_stops_the_job_before_any_frame_leaves_ingest(self):
        """The start-up gate: ingest plays its streams (prerolled meanwhile) only once infer has opened.
        Loading LibTorch takes about a second, in which ingest used to decode and send (4 to 23 frames a
        stream were seen)."""
        model = os.path.join(self.dir, "corrupt.pt")
        with open(model, "w") as f:
            f.write("not a TorchScript archive\n")
        config, _ = write_config(self.dir, [("a", "test://ball?frames=300"), ("b", "test://snow?frames=300")],
                                 infer={"model": model}, publish={"wait_for_subscribers": 0})
        run = Run(config)
        code = run.wait(timeout=60)
        self.assertEqual(code, 2, run.stderr[-3000:])
        self.assertIn("model " + model + " is not a TorchScript model", run.stderr)
        self.assertIn("(during start-up: a restart would fail the same way)", run.stderr)
        self.assertNotRegex(run.stderr, r"stream '[ab]': (stopped|end of stream) after [1-9]")

    def test_a_results_file_that_cannot_be_written_fails_the_job_naming_it(self):
        """A full disk under publish.jsonl_path (/dev/full: every write fails with ENOSPC). The job used
        to end with status 0 and a results file cut short: an archive record that silently lacks
        results. Now publish stops, naming the file, and the job fails, without the restarts
        job.max_restarts allows (3 by default): each would fail the same way (publish exits 5 for it)."""
        config, _ = write_config(self.dir, [("a", "test://ball?frames=300&width=160&height=120")],
                                 publish={"wait_for_subscribers": 0, "jsonl_path": "/dev/full"})
        run = Run(config)
        code = run.wait(timeout=120)
        self.assertEqual(code, 2, run.stderr[-3000:])
        self.assertIn("publish.jsonl_path /dev/full: cannot be written (No space left on device): the results from "
                      "here on would not be recorded, so the job stops", run.stderr)
        self.assertRegex(run.stderr, r"stage publish \(pid \d+\) failed: exit status 5.*\(not restarted: its results "
                                     r"file cannot be written, and a restart would fail the same way\)")
        self.assertNotIn("restarting the job", run.stderr)

    def test_a_live_jobs_results_file_that_refuses_lines_does_not_stop_its_cameras(self):
        """A live job's results disk fills (here publish's file-size limit, set from outside with prlimit:
        the kernel refuses the writes as a full disk does). The cameras' results go on to the bus, the
        file stops at a whole line, and once it takes lines again (the limit lifted: space freed) it
        gets what it missed: in the end it holds every result the bus had, each once, and the job
        stops with status 0."""
        metrics_address = f"127.0.0.1:{free_port()}"
        config, endpoint = write_config(self.dir, [
            ("cam-a", "test://ball?frames=0&live=true&fps=15&width=160&height=120"),
            ("cam-b", "test://smpte?frames=0&live=true&fps=15&width=160&height=120")], job={"mode": "live"},
            publish={"metrics_address": metrics_address})
        results_file = os.path.join(self.dir, "results.jsonl")
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        publish = run.watch_stages()["publish"]

        def count_results(path):
            with open(path) as f:
                return sum('"topic": "results/' in line or '"topic":"results/' in line for line in f)

        def bus_results():
            return count_results(self.subscriber.path)

        def wait_until(what, predicate, timeout=30):
            deadline = time.time() + timeout
            while time.time() < deadline:
                if predicate():
                    return
                time.sleep(0.1)
            self.fail(f"timed out waiting for {what}\n" + (run.stderr or ""))

        wait_until("10 results in the file", lambda: os.path.exists(results_file) and count_results(results_file) >= 10)
        hard = resource.prlimit(publish, resource.RLIMIT_FSIZE)[1]
        full_at = os.path.getsize(results_file) + 300  # room for part of a line, not for the next block
        try:
            resource.prlimit(publish, resource.RLIMIT_FSIZE, (full_at, hard))
        except PermissionError:
            self.skipTest("no permission to set another process's file-size limit")
        time.sleep(1)
        refused_at, bus_then = os.path.getsize(results_file), bus_results()
        wait_until("40 more results on the bus", lambda: bus_results() >= bus_then + 40)
        self.assertEqual(os.path.getsize(results_file), refused_at, "the file grew while its disk was full")
        status = subprocess.run([VAPIPE, "status", metrics_address], capture_output=True, text=True, timeout=30)
        self.assertRegex(status.stdout, r"results file REFUSES lines for [0-9.]+ s: " + re.escape(results_file) +
                         r": cannot be written \(File too large\); \d+ waiting\n")
        with open(results_file) as f:
            self.assertTrue(f.read().endswith("\n"), "the file ends in part of a line")
        resource.prlimit(publish, resource.RLIMIT_FSIZE, (hard, hard))  # space freed
        wait_until("the kept lines in the file", lambda: os.path.getsize(results_file) > full_at + 2000, timeout=20)
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        messages = self.subscriber.wait(timeout=30)
        self.assertRegex(run.stderr, r"publish.jsonl_path " + re.escape(results_file) + r": cannot be written \(File too "
                         r"large\): results go on to the bus, and the file's lines are kept for it")
        self.assertRegex(run.stderr, r"publish.jsonl_path " + re.escape(results_file) + r" takes lines again after .*: "
                         r"none was lost")
        with open(results_file) as f:
            recorded = [json.loads(line) for line in f]  # every line whole
        bus, kept = results_by_stream(messages), results_by_stream(recorded)
        for sid in ("cam-a", "cam-b"):
            self.assertGreater(len(bus[sid]), 40)
            self.assertEqual([r["seq"] for r in kept[sid]], [r["seq"] for r in bus[sid]], sid)
        summary = [m["payload"] for m in recorded if m["topic"] == "job/summary"][0]
        self.assertEqual(summary["results_file_lines_lost"], 0)

    def test_sub_takes_a_streams_topic_whole(self):
        """`vapipe sub --topic results/cam1` prints cam1's results, not cam10's (ZeroMQ subscribes by
        prefix); `events/cam*` every stream whose id starts so, as a sink's topics."""
        import zmq
        bus = zmq.Context.instance().socket(zmq.PUB)
        port = bus.bind_to_random_port("tcp://127.0.0.1")
        self.addCleanup(bus.close, 0)
        sub = subprocess.Popen([VAPIPE, "sub", "--endpoint", f"tcp://127.0.0.1:{port}", "--topic", "results/cam1",
                                "--topic", "events/cam*", "--with-topic", "--count", "6", "--timeout", "30"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(sub.kill)
        sent = ["results/cam10", "results/cam1", "results/cam1b", "events/cam10", "events/door", "results/"]
        # Until it has printed its 6 (a subscriber joins a bus some time after it connects).
        while sub.poll() is None:
            for topic in sent:
                bus.send_multipart([topic.encode(), json.dumps({"seq": 1}).encode()])
            time.sleep(0.05)
        out, err = sub.communicate(timeout=30)
        self.assertEqual(sub.returncode, 0, err)
        printed = {json.loads(line)["topic"] for line in out.splitlines()}
        self.assertEqual(printed, {"results/cam1", "events/cam10"}, out)

    def test_status_of_the_jobs_bus_port_says_it_is_the_bus(self):
        """`vapipe status` given the result bus's address (publish.endpoint) instead of metrics_address:
        said as such (it said only "no answer ... (Read)")."""
        import zmq
        bus = zmq.Context.instance().socket(zmq.PUB)
        port = bus.bind_to_random_port("tcp://127.0.0.1")
        try:
            status = subprocess.run([VAPIPE, "status", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
        finally:
            bus.close(linger=0)
        self.assertEqual(status.returncode, 2, status.stderr)
        self.assertIn(f"127.0.0.1:{port} is a ZeroMQ socket (the job's result bus, publish.endpoint?), not a vapipe "
                      "job's /healthz", status.stderr)

    def test_status_of_a_server_that_is_not_vapipes_says_so_naming_its_url(self):
        """`vapipe status` at an address where another program, or another version of vapipe, answers
        /healthz: an error naming the URL, or a report with what it could read; once "unexpected error"
        from an exception thrown by a field of another type."""
        import http.server
        import threading
        bodies = {"/a": b'["not", "vapipe"]', "/b": b'{"status": "ok", "streams": {"cam": {"state": 3, "results": "x"}},'
                  b' "stream_states": {"running": "one"}, "progress": {"ratio": "half"}}'}
        served = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                served.append(self.path)
                body = bodies[self.server.body]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        address = f"127.0.0.1:{server.server_address[1]}"
        server.body = "/a"
        status = subprocess.run([VAPIPE, "status", address], capture_output=True, text=True, timeout=30)
        self.assertEqual(status.returncode, 2, status.stdout)
        self.assertEqual(status.stderr, f"vapipe status: http://{address}/healthz: not a vapipe job's /healthz "
                                        "(a JSON array, not an object)\n")
        server.body = "/b"
        status = subprocess.run([VAPIPE, "status", address], capture_output=True, text=True, timeout=30)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertRegex(status.stdout, r"job '' \(\), up 0.0 s: 1 streams\n")
        self.assertRegex(status.stdout, r"\n  cam +x +- ")
        self.assertEqual(served, ["/healthz", "/healthz"])

    def test_labels_that_do_not_match_the_model_are_a_start_up_error(self):
        labels = os.path.join(self.dir, "three.txt")
        with open(labels, "w") as f:
            f.write("a\nb\nc\n")
        config, _ = write_config(self.dir, [("a", "test://ball?frames=20")], infer={"labels": labels},
                                 publish={"wait_for_subscribers": 0})
        run = Run(config)
        code = run.wait(timeout=60)
        self.assertEqual(code, 2, run.stderr[-3000:])
        self.assertIn("but labels file " + labels + " has 3 labels", run.stderr)

    def test_a_label_the_config_names_that_the_labels_file_lacks_is_refused_naming_its_line(self):
        """publish.segments_min_score_by_label names labels by hand: a typo ('pinweel') would never
        match and its frames would silently fall back to segments_min_score. `vapipe validate` refuses
        it (exit 1), and `vapipe run` stops at start-up (infer's check, exit 2), naming the line."""
        yaml_text = ("streams:\n  - id: a\n    uri: test://ball?frames=20&width=160&height=120\n"
                     f"infer: {{model: '{MODEL}', labels: '{LABELS}'}}\n"
                     "publish:\n  wait_for_subscribers: 0\n  segments_min_frames: 3\n"
                     "  segments_min_score_by_label:\n    ball: 0.4\n    pinweel: 0.3\n")
        path, err = self.run_bad_config("validate", yaml_text)
        expected = (f"{path}:10: publish.segments_min_score_by_label: 'pinweel' is not a label of {LABELS} "
                    "(its 12 labels: smpte, snow, black, white, red, green, blue, ball, ...)")
        self.assertIn(expected, err)
        run = Run(path)
        code = run.wait(timeout=60)
        self.assertEqual(code, 2, run.stderr[-3000:])
        self.assertIn("infer failed to start: " + expected, run.stderr)
        with open(path, "w") as f:
            f.write(yaml_text.replace("pinweel", "pinwheel"))
        p = subprocess.run([VAPIPE, "validate", path], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("segments on segments/<id>: the top-1 label, begun after 3 frames in a row with it (labels' own "
                      "minimums: ball 0.4, pinwheel 0.3)", p.stdout)

    def test_gpu_settings_the_machine_cannot_honour_are_refused_before_any_stage_starts(self):
        """On a machine without a GPU (this one; skipped where there is one): NVDEC asked for, or a
        GPU listed that does not exist, stops `vapipe run` with exit 1 and a message naming the key."""
        if os.environ.get("VAPIPE_FAKE_GPU_COUNT") or os.path.exists("/dev/nvidia0"):
            self.skipTest("this machine has a GPU")
        for sections, expected in (({"ingest": {"decoder": "nvdec"}}, "ingest.decoder: nvdec needs a GPU"),
                                   ({"gpus": [1]}, "gpus: GPU 1 does not exist; this machine has no usable GPU")):
            config, _ = write_config(self.dir, [("a", "test://ball?frames=5")], publish={"wait_for_subscribers": 0},
                                     **sections)
            run = Run(config)
            code = run.wait(timeout=60)
            self.assertEqual(code, 1, run.stderr[-2000:])
            self.assertIn(expected, run.stderr)
            self.assertIn(config, run.stderr)
            self.assertNotIn("started stage", run.stderr)


if __name__ == "__main__":
    unittest.main()
