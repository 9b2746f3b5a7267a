"""A live job changes its streams without a restart: the config file is edited and `vapipe run` gets
SIGHUP. Removed streams end, added ones start (on the lane with the fewest streams), the others go on
without a gap; a reload that is wrong changes nothing and says why."""
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import time
import subprocess
import urllib.error
import urllib.request

from e2e.common import (
    LABELS, MODEL, SOURCE_DIR, VAPIPE, MqttBroker, Run, WebhookReceiver, SubscribedTest, Subscriber, events_by_stream, free_port, has_event, live_test_uri, results_by_stream,
    start_rtsp_camera, stream_entry,
    write_config)

live = live_test_uri


class LiveReload(SubscribedTest):
    def rewrite(self, path, streams=None, text=None, **changes):
        """The config again, with other streams, or other sections, or this text."""
        if text is None:
            with open(path) as f:
                cfg = json.load(f)
            if streams is not None:
                cfg["streams"] = [stream_entry(st) for st in streams]
            for key, value in changes.items():
                cfg[key] = value
            text = json.dumps(cfg, indent=1)
        with open(path, "w") as f:
            f.write(text)

    def results_of(self, sid):
        return lambda msgs: len(results_by_stream(msgs).get(sid, [])) >= 10

    def test_streams_are_added_and_removed_on_sighup_and_the_others_go_on(self):
        metrics = f"127.0.0.1:{free_port()}"
        token = "e2e-token-" + "0123456789abcdef"
        with open(os.path.join(self.dir, "metrics.token"), "w") as f:
            f.write(token + "\n")
        auth = {"Authorization": f"Bearer {token}"}
        # Over HTTPS (publish.metrics_tls_*), with the test certificate for 127.0.0.1 that the clients trust.
        cert, key = (os.path.join(SOURCE_DIR, "tests", "media", "tls", f"metrics-test.{x}") for x in ("crt", "key"))
        tls = ssl.create_default_context(cafile=cert)
        # Mutual TLS (publish.metrics_tls_client_ca_file): clients show a certificate that CA file signed.
        client_cert, client_key = (os.path.join(SOURCE_DIR, "tests", "media", "tls", f"metrics-test-renewed.{x}")
                                   for x in ("crt", "key"))
        tls.load_cert_chain(client_cert, client_key)
        client_args = ["--cert", client_cert, "--key", client_key]
        config, endpoint = write_config(self.dir, [("a", live("ball")), ("b", live("smpte"))],
                                        job={"mode": "live"}, lanes_per_device=2,
                                        publish={"metrics_address": metrics, "metrics_token_file": "metrics.token",
                                                 "metrics_tls_cert_file": cert, "metrics_tls_key_file": key,
                                                 "metrics_tls_client_ca_file": client_cert})
        validate = subprocess.run([VAPIPE, "validate", config], capture_output=True, text=True)
        self.assertIn("metrics on https://" + metrics + "/metrics (bearer token from " +
                      os.path.join(self.dir, "metrics.token") + ") (TLS certificate " + cert +
                      "; clients need a certificate signed by a CA in " + client_cert + ")", validate.stdout)
        self.assertNotIn(token, validate.stdout + validate.stderr)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.wait_for("results of a and b", lambda m: self.results_of("a")(m) and self.results_of("b")(m))

        # b goes (its lane 1 is then empty), c comes (onto lane 1, the emptier). Asked over HTTP, as a
        # config-reloading sidecar would (the same as SIGHUP).
        self.rewrite(config, streams=[("a", live("ball")), ("c", live("pinwheel"))])
        # Without the bearer token (publish.metrics_token_file): refused, nothing reloaded.
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(f"https://{metrics}/-/reload", method="POST"), timeout=10,
                                   context=tls)
        self.assertEqual(refused.exception.code, 401)
        # Plain HTTP gets no answer from a TLS endpoint: the token never crosses the network in clear.
        with self.assertRaises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(urllib.request.Request(f"http://{metrics}/-/reload", method="POST", headers=auth),
                                   timeout=10)
        # Answered once done (200, as config-reloading sidecars expect), with what it changed.
        request = urllib.request.Request(f"https://{metrics}/-/reload", method="POST", headers=auth)
        with urllib.request.urlopen(request, timeout=70, context=tls) as answer:
            self.assertEqual(answer.status, 200)
            self.assertIn("the job reloaded: added 'c' (lane 1); removed 'b'", answer.read().decode())
        self.wait_for("b's end", lambda m: any(e["event"] == "eos" for e in events_by_stream(m).get("b", [])))
        self.wait_for("results of c", self.results_of("c"))

        # Wrong reloads change nothing: a YAML error, another section changed, a removed stream back.
        with open(config) as f:
            good = f.read()
        self.rewrite(config, text=good[:-3])  # the closing brace cut off
        run.signal(signal.SIGHUP)
        time.sleep(0.5)
        self.rewrite(config, text=good)
        # A camera's uri changed to a scheme nothing here reads (a typo): refused as `vapipe validate`
        # refuses it (it was taken, "reloaded", and the stream retried the typo for ever).
        self.rewrite(config, streams=[("a", live("ball")), ("c", "rtsx://127.0.0.1:8554/cam")])
        request = urllib.request.Request(f"https://{metrics}/-/reload", method="POST", headers=auth)
        with self.assertRaises(urllib.error.HTTPError) as typo:
            urllib.request.urlopen(request, timeout=70, context=tls)
        self.assertEqual(typo.exception.code, 422)
        self.assertIn("no GStreamer source here reads rtsx:// URIs (did you mean rtsp://?)", typo.exception.read().decode())
        self.rewrite(config, text=good)
        self.rewrite(config, batch={"max_batch_size": 4, "max_delay_ms": 5})
        # Asked first, `vapipe validate --reload` says the job would refuse it, and why.
        asked = subprocess.run([VAPIPE, "validate", config, "--reload"], capture_output=True, text=True, timeout=60)
        self.assertEqual(asked.returncode, 1, asked.stdout + asked.stderr)
        self.assertIn("would be refused, and change nothing: ", asked.stdout)
        self.assertIn("`batch` changed; only `streams`, `log` and some of `publish`, `ingest` and `infer` can change while the "
                      "job runs", asked.stdout)
        # Over HTTP, the refusal is its answer: 422, and why.
        request = urllib.request.Request(f"https://{metrics}/-/reload", method="POST", headers=auth)
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=70, context=tls)
        self.assertEqual(refused.exception.code, 422)
        self.assertIn("the job refused the reload, and changed nothing: ", refused.exception.read().decode())
        self.rewrite(config, text=good)
        before = len(results_by_stream(self.messages()).get("c", []))
        self.wait_for("c to go on", lambda m: len(results_by_stream(m).get("c", [])) >= before + 10)

        # /metrics: b is removed; every stage process of both lanes reports its times and totals; the last
        # reload was refused (as Prometheus says its own: an alert on the 0), after one taken and one more refused.
        deadline = time.time() + 10
        while True:
            text = urllib.request.urlopen(urllib.request.Request(f"https://{metrics}/metrics", headers=auth),
                                          timeout=10, context=tls).read().decode()
            if 'vapipe_config_reloads_total{result="refused"} 2' in text or time.time() > deadline:
                break
            time.sleep(0.2)
        self.assertIn("vapipe_config_last_reload_successful 0\n", text)
        self.assertIn('vapipe_config_reloads_total{result="taken"} 1\n', text)
        self.assertIn('vapipe_config_reloads_total{result="refused"} 3\n', text)
        self.assertIn('vapipe_stream_state{stream="b",state="removed"} 1', text)
        self.assertIn('vapipe_stream_state{stream="c",state="running"} 1', text)
        for stage in ["preprocess", "batch", "infer"]:
            for lane in ["0", "1"]:
                self.assertRegex(text, rf'vapipe_stage_busy_seconds_total{{stage="{stage}",lane="{lane}"}} [0-9.e-]+\n')
        self.assertIn('vapipe_ingest_streams_started_total{lane="1"} 2', text)  # b, then c
        # `vapipe status`: the same, as a table for an operator; without the token, only that it is up.
        status = subprocess.run([VAPIPE, "status", "https://" + metrics, "--ca-file", cert, *client_args,
                                 "--token-file", os.path.join(self.dir, "metrics.token")],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertRegex(status.stdout, r"job 'e2e' \(live\), up .*: 3 streams \(2 running, 1 removed\)")
        self.assertRegex(status.stdout, r"\n  b +removed +\d+ ")
        self.assertRegex(status.stdout, r"\n  c +running +\d+ ")
        self.assertRegex(status.stdout, r"last reload REFUSED .* ago, nothing changed: .*`batch` changed")
        public = subprocess.run([VAPIPE, "status", metrics, "--ca-file", cert, *client_args], capture_output=True,
                                text=True, timeout=30)
        self.assertEqual(public.returncode, 0, public.stderr)
        no_client_cert = subprocess.run([VAPIPE, "status", metrics, "--ca-file", cert], capture_output=True, text=True,
                                        timeout=30)
        self.assertEqual(no_client_cert.returncode, 2, no_client_cert.stdout)
        self.assertIn("--cert and --key?", no_client_cert.stderr)
        untrusted = subprocess.run([VAPIPE, "status", "https://" + metrics, *client_args], capture_output=True,
                                   text=True, timeout=30)
        self.assertEqual(untrusted.returncode, 2, untrusted.stdout)  # the system's CAs do not know the test certificate
        self.assertIn("no answer from https://" + metrics + "/healthz", untrusted.stderr)
        self.assertIn("job is ok (its streams need the metrics token", public.stdout)
        self.assertNotIn(" c ", public.stdout)
        batches = {m.group(1): float(m.group(2)) for m in re.finditer(r'vapipe_infer_batches_total{lane="(\d)"} (\S+)', text)}
        frames = {m.group(1): float(m.group(2)) for m in re.finditer(r'vapipe_infer_frames_total{lane="(\d)"} (\S+)', text)}
        self.assertGreater(batches.get("1", 0), 0, text)  # lane 1 went on with c after b
        self.assertGreaterEqual(frames["0"], batches["0"])

        # Lane 0 crashes: it restarts with its streams from the table, a only (round-robin over the
        # table's streams would have given it c as well, which runs on lane 1); lane 1 goes on untouched.
        lanes = run.watch_lanes(9)
        os.kill(lanes[("infer", 0)], signal.SIGKILL)
        self.wait_for("a resumed", lambda m: has_event(m, "a", "resumed"),
                      timeout=60)
        before = len(results_by_stream(self.messages()).get("a", []))
        self.wait_for("a to go on after its lane's restart",
                      lambda m: len(results_by_stream(m).get("a", [])) >= before + 10)

        msgs, results, events = self.stop_and_collect(run)
        for sid in ["b", "c"]:
            seqs = [r["seq"] for r in results[sid]]
            # Every frame once, in order; a frame missing is one the live queue dropped and counted
            # (lane 0's restart loads the 2 cores).
            self.assertEqual(seqs, sorted(set(seqs)), f"stream {sid}")
            self.assertEqual(len(seqs) + events[sid][-1]["dropped"], seqs[-1] + 1, f"stream {sid}")
            self.assertEqual([e["event"] for e in events[sid]], ["started", "eos"], f"stream {sid}")
        a_seqs = [r["seq"] for r in results["a"]]
        self.assertEqual(a_seqs, sorted(set(a_seqs)), "stream a: forward only over its lane's restart")
        self.assertEqual([e["event"] for e in events["a"]], ["started", "reconnecting", "resumed", "eos"])
        self.assertNotIn("started stage ingest[1] again", run.stderr)
        self.assertEqual(events["b"][-1]["message"], "removed from the config")
        self.assertEqual(events["b"][-1]["frames"], len(results["b"]))
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"]
        self.assertEqual(len(summary), 1)
        self.assertEqual({s["stream_id"]: s["status"] for s in summary[0]["streams"]},
                         {"a": "stopped", "b": "removed", "c": "stopped"})
        err = run.stderr
        self.assertIn("reload (SIGHUP): " + config + ": added 'c' (lane 1); removed 'b'; 2 streams now", err)
        self.assertIn("YAML syntax error", err)
        self.assertIn("`batch` changed; only `streams`, `log` and some of `publish`, `ingest` and `infer` can change while the "
                      "job runs", err)
        self.assertEqual(err.count("the job goes on with its streams unchanged"), 3)


    def test_publishs_outputs_and_segments_settings_change_on_sighup_while_the_bus_goes_on(self):
        """A reload swaps a webhook for another, changes the MQTT broker's topics and segments_min_frames,
        and adds a stream: the running publish takes it (no restart). The new webhook gets the next
        messages and the old one none; the broker's new client connects once the old one has gone (its
        retained status ends `online`, not the old client's `offline`); a's results go on without a gap
        on the bus. A change of the bus's address is refused and changes nothing."""
        first, second = WebhookReceiver(), WebhookReceiver()
        self.addCleanup(first.close)
        self.addCleanup(second.close)
        broker = MqttBroker(self.dir)
        self.addCleanup(broker.close)
        publish = {"segments_min_frames": 1000000,
                   "webhooks": [{"url": f"http://127.0.0.1:{first.port}/hook", "topics": ["events/"]}],
                   "mqtt": [{"url": broker.url, "topics": ["events/"]}]}
        config, endpoint = write_config(self.dir, [("a", live("ball"))], job={"mode": "live"}, publish=publish)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        publish_pid = run.watch_stages()["publish"]
        self.wait_for("results of a", self.results_of("a"))
        deadline = time.time() + 30
        while time.time() < deadline and not any(r["topic"] == "events/a" for r in first.received):
            time.sleep(0.1)
        self.assertTrue(any(r["topic"] == "events/a" for r in first.received), first.received)

        with open(config) as f:
            publish = json.load(f)["publish"]  # (with the bus's endpoint write_config chose)
        publish = dict(publish, segments_min_frames=5,
                       webhooks=[{"url": f"http://127.0.0.1:{second.port}/hook", "topics": ["events/"]}],
                       mqtt=[{"url": broker.url, "topics": ["events/", "segments/"]}])
        self.rewrite(config, streams=[("a", live("ball")), ("b", live("smpte"))], publish=publish,
                     log={"level": "debug"})
        asked = subprocess.run([VAPIPE, "validate", config, "--reload"], capture_output=True, text=True, timeout=60)
        self.assertEqual(asked.returncode, 0, asked.stdout + asked.stderr)
        self.assertIn("would: added 'b'; removed none; publish.webhooks added [0], removed [0]; publish.mqtt added "
                      "[0], removed [0]; publish.segments_min_frames changed; log.level debug; 2 streams then",
                      asked.stdout)
        before = self.count("a")
        run.signal(signal.SIGHUP)
        self.wait_for("results of b", self.results_of("b"))
        deadline = time.time() + 30
        while time.time() < deadline and not any(r["topic"] == "events/b" for r in second.received):
            time.sleep(0.1)
        self.assertTrue(any(r["topic"] == "events/b" for r in second.received), second.received)
        self.assertFalse(any(r["topic"] == "events/b" for r in first.received), first.received)
        # segments_min_frames 5 now: the test pattern's label is the same on each frame, so a segment began.
        self.wait_for("a segment of a", lambda m: any(x["topic"] == "segments/a" for x in m))
        deadline = time.time() + 30
        while time.time() < deadline and not any(t.endswith("/segments/a") for t, _ in broker.received()):
            time.sleep(0.1)
        self.assertTrue(any(t.endswith("/segments/a") for t, _ in broker.received()), broker.received()[-5:])
        statuses = [p for t, p in broker.received() if t == "vapipe/e2e/status"]
        self.assertEqual(statuses[-3:], ["online", "offline", "online"], statuses)

        # The bus's address cannot change while the job runs: refused, the outputs stay as they are.
        # `vapipe reload` sends SIGHUP and waits for the job's answer.
        self.rewrite(config, publish=dict(publish, endpoint=f"tcp://127.0.0.1:{free_port()}", webhooks=[]))
        refused = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 1, refused.stdout + refused.stderr)
        self.assertRegex(refused.stdout, r"the job running with .*job.yaml \(vapipe run, pid \d+\) refused the reload, "
                                         r"and changed nothing: .*job.yaml:\d+: `publish.endpoint` changed")
        b_events = len([r for r in second.received if r["topic"] == "events/b"])
        # b goes (its eos reaches `second`), and the log level is info again.
        self.rewrite(config, streams=[("a", live("ball"))], publish=publish, log={"level": "info"})
        taken = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(taken.returncode, 0, taken.stdout + taken.stderr)
        self.assertRegex(taken.stdout, r"\(vapipe run, pid \d+\) reloaded: added none; removed 'b'; log.level info\n")
        self.wait_for("b's end", lambda m: any(e["event"] == "eos" for e in events_by_stream(m).get("b", [])))
        deadline = time.time() + 30
        while time.time() < deadline and len([r for r in second.received if r["topic"] == "events/b"]) <= b_events:
            time.sleep(0.1)
        self.assertGreater(len([r for r in second.received if r["topic"] == "events/b"]), b_events)
        time.sleep(1.5)  # (each stage looks at the copy for its log level once a second)
        os.kill(publish_pid, 0)  # the same publish process: taken without a restart
        msgs, results, events = self.stop_and_collect(run)
        seqs = [r["seq"] for r in results["a"]]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))), "a: no gap, no repeat")
        self.assertGreater(len(seqs), before)
        self.assertEqual([e["event"] for e in events["a"]], ["started", "eos"])
        self.assertIn("publish: reload taken: publish.webhooks added [0], removed [0]; publish.mqtt added [0], "
                      "removed [0]; publish.segments_min_frames changed", run.stderr)
        self.assertIn("`publish.endpoint` changed; of `publish`, a running job takes only webhooks, mqtt, redis",
                      run.stderr)
        self.assertNotIn("gave up", run.stderr)
        self.assertNotIn("publish: restarted", run.stderr)
        after = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(after.returncode, 1)  # the job has ended: nothing to reload
        self.assertIn("vapipe reload: no job started with " + config, after.stderr)
        # log.level: every process took debug, then info again, without a restart.
        self.assertIn("log.level debug in every process of the job from now on", run.stderr)
        for stage in ["ingest", "preprocess", "batch", "infer", "publish"]:
            self.assertRegex(run.stderr, rf"\[{stage} \d+\] log level debug from now on \(a reload changed log.level\)")
            self.assertRegex(run.stderr, rf"\[{stage} \d+\] log level info from now on")

    def test_a_cameras_new_address_and_password_reach_it_in_place_under_its_id(self):
        """A camera is replaced (a new address, and a password its old one did not need): the config's
        uri changes under the same id, and a reload connects `front` to it at once. Its results number on
        without a gap or a frame twice, its region stream `front-left` follows it, its new password is
        never shown, and `back` is not touched. A restarted lane then connects to the new camera too."""
        old_uri, _ = start_rtsp_camera(self, "smpte", width=320, height=240)
        back_uri, _ = start_rtsp_camera(self, "pinwheel", width=320, height=240)
        new_uri, _ = start_rtsp_camera(self, "ball", width=320, height=240, credentials="operator:s3cret-Pw")
        with_password = new_uri.replace("rtsp://", "rtsp://operator:s3cret-Pw@")
        streams = [("front", old_uri), ("back", back_uri), {"id": "front-left", "source": "front", "roi": [0, 0, 0.5, 1]}]
        config, endpoint = write_config(self.dir, streams, job={"mode": "live"}, publish={"segments_min_frames": 5})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        stages = run.watch_stages()
        self.wait_for("results of every stream", lambda m: all(self.results_of(s)(m) for s in ["front", "back", "front-left"]))
        streams[0] = ("front", with_password)
        streams[2] = {"id": "front-left", "source": "front", "roi": [0.5, 0, 0.5, 1]}
        self.rewrite(config, streams=streams)
        # Asked first, `vapipe validate --reload` finds the job by its config file and says what the
        # reload will do (without the new password).
        asked = subprocess.run([VAPIPE, "validate", config, "--reload"], capture_output=True, text=True, timeout=60)
        self.assertEqual(asked.returncode, 0, asked.stdout + asked.stderr)
        self.assertRegex(asked.stdout, r"a reload of the job running with it \(vapipe run, pid \d+\) would: added none; "
                                       r"removed none; changed 'front' \(uri; connects again\), 'front-left' \(roi\); 3 streams then")
        self.assertNotIn("s3cret-Pw", asked.stdout + asked.stderr)
        run.signal(signal.SIGHUP)
        self.wait_for("front and front-left resumed",
                      lambda m: has_event(m, "front", "resumed") and has_event(m, "front-left", "resumed"))
        after_reload = self.count("front")
        self.wait_for("front's results from the new camera",
                      lambda m: len(results_by_stream(m).get("front", [])) >= after_reload + 30, timeout=60)
        # Its lane crashes: it starts again with the reloaded table, so with the new camera.
        os.kill(stages["infer"], signal.SIGKILL)
        self.wait_for("front resumed after its lane's restart",
                      lambda m: sum(e["event"] == "resumed" for e in events_by_stream(m).get("front", [])) >= 2,
                      timeout=60)
        after_restart = self.count("front")
        self.wait_for("front's results after the restart",
                      lambda m: len(results_by_stream(m).get("front", [])) >= after_restart + 10, timeout=60)
        msgs, results, events = self.stop_and_collect(run)

        front = [e for e in events["front"]]
        self.assertEqual([e["event"] for e in front],
                         ["started", "changed", "reconnecting", "resumed", "reconnecting", "resumed", "eos"])
        # The changed event says what changed and what the stream's frames are from then on.
        changed = front[1]
        self.assertEqual(changed["message"], "a reload changed its uri")
        self.assertEqual(changed["uri"], new_uri.replace("rtsp://", "rtsp://***@"))
        self.assertEqual(changed["roi"], [0, 0, 1, 1])
        self.assertIsNone(changed["turn"])
        reload_event = front[2]
        self.assertEqual(reload_event["message"], "a reload changed its uri")
        self.assertEqual(reload_event["attempt"], 1)
        self.assertEqual(reload_event["uri"], new_uri.replace("rtsp://", "rtsp://***@"))
        self.assertEqual(front[4]["attempt"], 0)  # the lane's restart
        # Its segment of the old camera ends before the change is said, and the new camera's begins after.
        said = [(m["topic"], m["payload"]) for m in msgs if m["topic"] in ("segments/front", "events/front")]
        changed_at = next(i for i, (t, p) in enumerate(said) if t == "events/front" and p["event"] == "changed")
        segments = [(i, p["event"], p["label"]) for i, (t, p) in enumerate(said) if t == "segments/front"]
        self.assertIn("smpte", [label for i, e, label in segments if e == "began" and i < changed_at])
        self.assertEqual([(e, label) for i, e, label in segments if i < changed_at][-1], ("ended", "smpte"))
        self.assertEqual([(e, label) for i, e, label in segments if i > changed_at][0], ("began", "ball"))
        # Every frame once, in order, numbered on to the new camera's first; each frame's label says which
        # camera it is (the pattern each server sends).
        seqs = [r["seq"] for r in results["front"]]
        self.assertEqual(seqs, sorted(set(seqs)))
        order = [(m["topic"], m["payload"]) for m in msgs if m["topic"] in ("results/front", "events/front")]
        reload_at = next(i for i, (t, p) in enumerate(order) if t == "events/front" and p["event"] == "reconnecting")
        resumed_at = next(i for i, (t, p) in enumerate(order) if t == "events/front" and p["event"] == "resumed")
        before = [p for t, p in order[:reload_at] if t == "results/front"]
        after = [p for t, p in order[resumed_at:] if t == "results/front"]
        # A gap is only a frame the live queue dropped and counted (the 2 cores are busy).
        self.assertEqual(after[0]["seq"], before[-1]["seq"] + 1 + front[3]["dropped"] - reload_event["dropped"],
                         "numbered on across the reload")
        self.assertGreaterEqual(sum(r["label"] == "smpte" for r in before) / len(before), 0.9)
        self.assertGreaterEqual(sum(r["label"] == "ball" for r in after) / len(after), 0.9)
        # The region stream follows its source, and says its new region (before the frames cut so); back
        # is untouched.
        left_events = events["front-left"]
        self.assertEqual([e["event"] for e in left_events][:5], ["started", "changed", "changed", "reconnecting", "resumed"])
        self.assertEqual(left_events[0]["roi"], [0, 0, 0.5, 1])
        self.assertEqual([(e["message"], e["roi"]) for e in left_events[1:3]],
                         [("a reload changed its roi", [0.5, 0, 0.5, 1]), ("a reload changed its uri", [0.5, 0, 0.5, 1])])
        self.assertEqual(left_events[2]["uri"], new_uri.replace("rtsp://", "rtsp://***@"))
        left = [r["seq"] for r in results["front-left"]]
        self.assertEqual(left, sorted(set(left)))
        self.assertEqual([e["event"] for e in events["back"]], ["started", "reconnecting", "resumed", "eos"])
        self.assertEqual(events["back"][1]["attempt"], 0)  # the lane's restart alone: the reload left it alone
        back = [r["seq"] for r in results["back"]]
        self.assertEqual(back, sorted(set(back)))
        err = run.stderr
        self.assertIn("reload (SIGHUP): " + config + ": added none; removed none; changed 'front' (uri; connects again), "
                      "'front-left' (roi); 3 streams now", err)
        self.assertIn("stream 'front': a reload changed its uri: it connects again with them", err)
        self.assertIn("stream 'front-left': its roi changed (reload) to [0.5, 0, 0.5, 1]", err)
        self.assertNotIn("s3cret-Pw", err)
        self.assertNotIn("s3cret-Pw", json.dumps(msgs))
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"][0]
        self.assertEqual({s["stream_id"]: s["status"] for s in summary["streams"]},
                         {"front": "stopped", "back": "stopped", "front-left": "stopped"})

    def test_ingests_sampling_and_reconnection_change_on_sighup_for_the_streams_that_take_them(self):
        """The job's ingest.max_fps and reconnect_attempts change with a reload. `gate`, which sets no
        max_fps of its own, is classified 5 times a second from then on, with no new connection, numbering on;
        `door` sets its own max_fps, and is turned upside down by the same reload (remounted), with no new
        connection either; `yard`, a camera that is down and was retried for ever,
        gives up under the new count, with no new connection of its own. An ingest setting that needs a
        restart is refused, naming it."""
        gate_uri, _ = start_rtsp_camera(self, "smpte", width=320, height=240)
        door_uri, _ = start_rtsp_camera(self, "ball", width=320, height=240)
        yard_uri = f"rtsp://127.0.0.1:{free_port()}/yard"  # nothing listens there
        streams = [("gate", gate_uri), ("door", door_uri, {"max_fps": 0}), ("yard", yard_uri, {"max_fps": 0})]
        ingest = {"reconnect_delay_s": 0.2, "reconnect_max_delay_s": 0.5}
        config, endpoint = write_config(self.dir, streams, job={"mode": "live"}, ingest=ingest)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.wait_for("results of gate and door", lambda m: all(self.results_of(s)(m) for s in ["gate", "door"]), timeout=60)
        attempts = lambda m: [e for e in events_by_stream(m).get("yard", []) if e["event"] == "reconnecting"]
        self.wait_for("yard retrying", lambda m: len(attempts(m)) >= 3)

        self.rewrite(config, ingest=dict(ingest, decoder="cpu"))
        refused = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 1, refused.stdout + refused.stderr)
        self.assertRegex(refused.stdout, r"refused the reload, and changed nothing: .*job.yaml:\d+: `ingest.decoder` "
                                         r"changed; of `ingest`, a running job takes only max_fps, keyframes_only")

        remounted = [streams[0], ("door", door_uri, {"max_fps": 0, "rotate": 180}), streams[2]]
        self.rewrite(config, remounted, ingest=dict(ingest, max_fps=5, reconnect_attempts=2))
        asked = subprocess.run([VAPIPE, "validate", config, "--reload"], capture_output=True, text=True, timeout=60)
        self.assertEqual(asked.returncode, 0, asked.stdout + asked.stderr)
        self.assertIn("would: added none; removed none; changed 'gate' (max_fps (ingest.max_fps)), 'door' (rotate or "
                      "mirror); ingest.max_fps, ingest.reconnect_attempts changed; 3 streams then", asked.stdout)
        tried_before = len(attempts(self.messages()))
        taken = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(taken.returncode, 0, taken.stdout + taken.stderr)
        self.assertIn("reloaded: added none; removed none; changed 'gate' (max_fps (ingest.max_fps)), 'door' (rotate "
                      "or mirror); ingest.max_fps, ingest.reconnect_attempts changed", taken.stdout)
        self.wait_for("gate changed", lambda m: has_event(m, "gate", "changed"))
        self.wait_for("yard to give up", lambda m: has_event(m, "yard", "error"))
        changed_at = self.count("gate")
        self.wait_for("gate's sampled results", lambda m: len(results_by_stream(m).get("gate", [])) >= changed_at + 10,
                      timeout=60)
        run.signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=60), 3, run.stderr[-3000:])  # yard failed
        msgs = self.subscriber.wait(timeout=30)
        results, events = results_by_stream(msgs), events_by_stream(msgs)

        gate = events["gate"]
        self.assertEqual([e["event"] for e in gate], ["started", "changed", "eos"])
        self.assertEqual(gate[1]["message"], "a reload changed its max_fps (ingest.max_fps)")
        order = [(m["topic"], m["payload"]) for m in msgs if m["topic"] in ("results/gate", "events/gate")]
        changed = next(i for i, (t, p) in enumerate(order) if t == "events/gate" and p["event"] == "changed")
        before = [p for t, p in order[:changed] if t == "results/gate"]
        after = [p for t, p in order[changed:] if t == "results/gate"]
        # Every frame before (30 a second, but those the busy 2 cores' live queue dropped), 5 a second after.
        gaps_before = [b["pts_ms"] - a["pts_ms"] for a, b in zip(before, before[1:])]
        self.assertLess(sorted(gaps_before)[len(gaps_before) // 2], 100, gaps_before[:20])
        # One frame per 0.2 s period of the camera's timestamps, the first at or after its start: the
        # first kept is the first of the period after the last one kept at 30 a second. (A period's
        # first frame may come up to a frame later than its start: the camera's timestamps drift
        # against 33.3 ms, so two kept frames are 0.2 s apart, less at most one frame.)
        slots = [r["pts_ms"] // 200 for r in after]
        self.assertEqual(slots, sorted(set(slots)), slots)
        self.assertEqual(slots[0], before[-1]["pts_ms"] // 200 + 1, (before[-1], after[0]))
        gaps_after = [b["pts_ms"] - a["pts_ms"] for a, b in zip(after, after[1:])]
        self.assertGreaterEqual(min(gaps_after), 200 - 34, gaps_after)
        self.assertLess(sorted(gaps_after)[len(gaps_after) // 2], 240, gaps_after)
        seqs = [r["seq"] for r in results["gate"]]
        self.assertEqual(seqs, sorted(set(seqs)))
        # Numbered on across the reload: every number is a result, or a frame the live queue dropped.
        self.assertEqual(len(seqs) + gate[-1]["dropped"], seqs[-1] + 1, "numbered on across the reload")
        # door: its own max_fps, every frame still; turned upside down from its changed event on, its
        # connection going on.
        self.assertEqual([e["event"] for e in events["door"]], ["started", "changed", "eos"])
        self.assertEqual(events["door"][1]["message"], "a reload changed its rotate or mirror")
        self.assertEqual(events["door"][1]["turn"], "rotate-180")
        door = [r["seq"] for r in results["door"]]
        self.assertEqual(door, sorted(set(door)))
        self.assertEqual(len(door) + events["door"][-1]["dropped"], door[-1] + 1, "door numbered on across the reload")
        # yard: the new count, its attempts so far counted, without a new connection of its own.
        yard = events["yard"]
        self.assertNotIn("changed", [e["event"] for e in yard])
        self.assertEqual(yard[-1]["event"], "error")
        self.assertIn("gave up after 2 reconnection attempts", yard[-1]["message"])
        self.assertGreaterEqual(tried_before, 3)
        err = run.stderr
        self.assertIn("ingest.max_fps, ingest.reconnect_attempts changed (every stream takes it within a second; "
                      "those that sample or buffer with it take it as they go)", err)
        self.assertRegex(err, r"ingest lane 0: a reload changed ingest.max_fps, ingest.reconnect_attempts: the lane's "
                              r"streams take it now")
        self.assertIn("stream 'gate': a reload changed its max_fps (ingest.max_fps): taken without a new connection "
                      "(at most 5 frames/s, a 200 ms jitter buffer)", err)
        self.assertNotIn("stream 'gate': a reload changed its max_fps (ingest.max_fps): it connects again", err)
        self.assertIn("stream 'door': a reload changed its rotate or mirror: taken without a new connection (every "
                      "frame, a 200 ms jitter buffer, its frames read rotate-180)", err)
        self.assertNotIn("ingest lane 0: restarted", err)

    def test_a_new_model_classifies_from_a_batch_on_while_the_streams_go_on(self):
        """A reload names another model file and its labels: infer loads it (LibTorch) beside the running
        one and classifies every batch with it once it is ready. Every frame has one result, numbered on
        across the change, the results of the old model first, then only the new one's; no stage restarts.
        A file that is not TorchScript is said, and the running model goes on, until the file is fixed
        under the same path; a model file that is not there, and a change of infer.device, are refused,
        naming them. A labels file replaced under the same path is taken by a reload of the same config."""
        v2 = os.path.join(self.dir, "pattern_cnn_v2.pt")
        shutil.copyfile(MODEL, v2)
        with open(LABELS) as f:
            labels = [line.strip() for line in f if line.strip()]
        labels_v2 = os.path.join(self.dir, "labels-v2.txt")
        with open(labels_v2, "w") as f:
            f.write("".join(f"{label.upper()}\n" for label in labels))
        broken = os.path.join(self.dir, "broken.pt")
        with open(broken, "w") as f:
            f.write("not a model\n")
        metrics = f"127.0.0.1:{free_port()}"
        config, endpoint = write_config(self.dir, [("a", live("ball"))], job={"mode": "live"},
                                        publish={"metrics_address": metrics})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.wait_for("results of a", self.results_of("a"), timeout=60)

        def models():  # /healthz's, once infer's stats say the model
            deadline = time.time() + 10
            while True:
                with urllib.request.urlopen(f"http://{metrics}/healthz", timeout=10) as answer:
                    found = json.load(answer).get("models", [])
                if found or time.time() > deadline:
                    return found
                time.sleep(0.2)

        self.rewrite(config, infer={"model": MODEL, "labels": LABELS, "device": "cpu"})
        refused = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 1, refused.stdout + refused.stderr)
        self.assertRegex(refused.stdout, r"refused the reload, and changed nothing: .*job.yaml:\d+: `infer.device` "
                                         r"changed; of `infer`, a running job takes only model, labels")

        nope = os.path.join(self.dir, "nope.pt")
        self.rewrite(config, infer={"model": nope, "labels": LABELS})
        refused = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 1, refused.stdout + refused.stderr)
        self.assertRegex(refused.stdout, r"refused the reload, and changed nothing: .*job.yaml:\d+: infer.model: " +
                         re.escape(nope) + r": file not found \(the running model goes on\)")

        self.rewrite(config, infer={"model": broken, "labels": LABELS})
        taken = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        # Taken, but the model could not be used: `vapipe reload` waits for infer's word, and says it.
        self.assertEqual(taken.returncode, 1, taken.stdout + taken.stderr)
        self.assertIn("infer.model changed", taken.stdout)
        self.assertRegex(taken.stdout, r"\n  lane 0: the new model COULD NOT BE USED, and 'pattern_cnn' \(" +
                         re.escape(MODEL) + r"\) goes on classifying: model .*broken.pt is not a TorchScript model")
        deadline = time.time() + 30
        while "goes on classifying" not in run.stderr_so_far() and time.time() < deadline:
            time.sleep(0.1)
        self.assertRegex(run.stderr_so_far(), r"infer: reload: model .*broken.pt is not a TorchScript model .*; model "
                                              r".*pattern_cnn.pt \('pattern_cnn'\) goes on classifying")

        time.sleep(1.5)  # (infer's stats, written once a second)
        failed = models()
        self.assertEqual(len(failed), 1, failed)
        self.assertEqual(failed[0]["model"], "pattern_cnn")
        self.assertEqual(failed[0]["model_reload_failures"], 1)
        self.assertIn("is not a TorchScript model", failed[0]["last_reload_error"])
        status = subprocess.run([VAPIPE, "status", metrics], capture_output=True, text=True, timeout=60)
        self.assertRegex(status.stdout, re.escape("model (lane 0): 'pattern_cnn' (" + MODEL + ", written ") +
                         r"[0-9T:Z-]+\); reloads: 0 taken, 1 could not be used\n  the last ")
        self.assertIn("reloads: 0 taken, 1 could not be used\n  the last "
                      "reload's model COULD NOT BE USED (this one goes on): model " + broken, status.stdout)

        # Fixed under the same path (the config, unchanged, makes no reload): infer tries it again.
        shutil.copyfile(MODEL, broken + ".tmp")
        os.rename(broken + ".tmp", broken)
        by = lambda name: (lambda m: [r for r in results_by_stream(m).get("a", []) if r["model"] == name])
        self.wait_for("results of the fixed model", lambda m: len(by("broken")(m)) >= 5, timeout=60)

        self.rewrite(config, infer={"model": v2, "labels": labels_v2})
        taken = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(taken.returncode, 0, taken.stdout + taken.stderr)
        self.assertIn("infer.labels, infer.model changed", taken.stdout)
        self.assertIn(f"\n  lane 0: model 'pattern_cnn_v2' ({v2}) classifies from now on\n", taken.stdout)
        by_v2 = lambda m: [r for r in results_by_stream(m).get("a", []) if r["model"] == "pattern_cnn_v2"]
        self.wait_for("results of the new model", lambda m: len(by_v2(m)) >= 10, timeout=60)
        time.sleep(1.5)
        now = models()
        self.assertEqual((now[0]["model"], now[0]["model_file"], now[0]["model_reloads"], now[0]["last_reload_error"]),
                         ("pattern_cnn_v2", v2, 2, None), now)
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        self.assertIn(f'vapipe_infer_model_info{{lane="0",model="pattern_cnn_v2",file="{v2}"}} 1', text)
        self.assertIn('vapipe_infer_model_reloads_total{lane="0"} 2', text)
        self.assertRegex(now[0]["model_file_modified"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

        # The labels file replaced under the same path: the config is unchanged, and a reload has infer
        # load the model again with it (the results' model name stays).
        relabelled = [f"{label}-v3" for label in labels]
        with open(labels_v2 + ".tmp", "w") as f:
            f.write("".join(f"{label}\n" for label in relabelled))
        os.rename(labels_v2 + ".tmp", labels_v2)
        asked = subprocess.run([VAPIPE, "validate", config, "--reload"], capture_output=True, text=True, timeout=60)
        self.assertEqual(asked.returncode, 0, asked.stdout + asked.stderr)
        self.assertIn("would change no stream, and: infer.labels's file " + labels_v2 + " was replaced", asked.stdout)
        taken = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(taken.returncode, 0, taken.stdout + taken.stderr)
        self.assertIn("infer.labels's file " + labels_v2 + " was replaced", taken.stdout)
        self.assertIn(f"\n  lane 0: model 'pattern_cnn_v2' ({v2}) classifies from now on\n", taken.stdout)
        by_v3 = lambda m: [r for r in results_by_stream(m).get("a", []) if r["label"] in relabelled]
        self.wait_for("results with the replaced labels", lambda m: len(by_v3(m)) >= 10, timeout=60)
        time.sleep(1.5)
        self.assertEqual(models()[0]["model_reloads"], 3)
        msgs, results, events = self.stop_and_collect(run)

        a = results["a"]
        models = [r["model"] for r in a]
        runs = [name for i, name in enumerate(models) if i == 0 or models[i - 1] != name]
        self.assertEqual(runs, ["pattern_cnn", "broken", "pattern_cnn_v2"], "each model's results in one run")
        self.assertIn(a[0]["label"], labels)
        self.assertIn(a[-1]["label"], relabelled)
        upper = [r for r in a if r["label"] in [label.upper() for label in labels]]
        self.assertTrue(upper and upper[0]["seq"] < by_v3(msgs)[0]["seq"], "the v2 labels, then the replaced ones")
        after_v3 = [r for r in a if r["seq"] > by_v3(msgs)[0]["seq"]]
        self.assertTrue(all(r["label"] in relabelled for r in after_v3))
        self.assertEqual(a[-1]["top_k"][0]["label"], a[-1]["label"])
        seqs = [r["seq"] for r in a]
        self.assertEqual(seqs, sorted(set(seqs)))
        self.assertEqual(len(seqs) + events["a"][-1]["dropped"], seqs[-1] + 1, "numbered on across the model change")
        self.assertEqual([e["event"] for e in events["a"]], ["started", "eos"])
        err = run.stderr
        self.assertIn("(each lane's infer loads it beside the model it runs and classifies with it once it is ready; "
                      "the streams go on)", err)
        self.assertRegex(err, r"infer: model .*pattern_cnn_v2.pt \(\d+ classes, 'pattern_cnn_v2'\) classifies from now "
                              r"on, in place of 'broken' \(loaded and warmed up in [0-9.]+ s while it classified\)")
        self.assertIn("broken.pt changed since its model could not be used: trying it again", err)
        self.assertIn("labels-v2.txt was replaced under the same path since its model was loaded", err)
        self.assertNotIn("restarted", err)

    def test_a_camera_that_gave_up_tries_again_at_each_reload_and_comes_back_with_a_new_uri(self):
        """A camera that gave up (ingest.reconnect_attempts) is tried again by a reload, under its id: by
        one that changes nothing (it gives up again: nothing listens there yet), then by one that gives it
        a new uri, where a camera answers: it is back, `started` saying why, classified, and the job ends
        with no stream failed. The other stream goes on untouched."""
        gone = f"rtsp://127.0.0.1:{free_port()}/gone"  # nothing listens there
        new_uri, _ = start_rtsp_camera(self, "ball", width=160, height=120)
        config, endpoint = write_config(self.dir, [("a", live("smpte")), ("dead", gone)], job={"mode": "live"},
                                        ingest={"reconnect_attempts": 1, "reconnect_delay_s": 0.2,
                                                "reconnect_max_delay_s": 0.2})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        errors = lambda m: [e for e in events_by_stream(m).get("dead", []) if e["event"] == "error"]
        self.wait_for("dead to give up", lambda m: len(errors(m)) == 1)
        self.wait_for("results of a", self.results_of("a"))
        asked = subprocess.run([VAPIPE, "validate", config, "--reload"], capture_output=True, text=True, timeout=60)
        self.assertEqual(asked.returncode, 0, asked.stdout + asked.stderr)
        self.assertIn("would change no stream: its streams are these (a camera that has ended, given up or failed, "
                      "would start again)", asked.stdout)
        run.signal(signal.SIGHUP)  # the same config
        self.wait_for("dead to give up again", lambda m: len(errors(m)) == 2)
        self.rewrite(config, streams=[("a", live("smpte")), ("dead", new_uri)])
        run.signal(signal.SIGHUP)
        self.wait_for("results of dead", self.results_of("dead"), timeout=60)
        msgs, results, events = self.stop_and_collect(run)  # exit 0: no stream failed in the end
        kinds = [e["event"] for e in events["dead"]]
        self.assertEqual(kinds.count("error"), 2, kinds)
        self.assertEqual(kinds[-2:], ["started", "eos"], kinds)
        self.assertIn("gave up after 1 reconnection attempts", errors(msgs)[0]["message"])
        self.assertEqual(events["dead"][-2]["message"], "started again by a reload, after it had failed")
        seqs = [r["seq"] for r in results["dead"]]
        self.assertEqual(seqs[0], 0)  # it had sent no frame before
        self.assertEqual(seqs, sorted(set(seqs)))
        self.assertEqual([e["event"] for e in events["a"]], ["started", "eos"])
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"][0]
        self.assertEqual({s["stream_id"]: (s["status"], s["comebacks"]) for s in summary["streams"]},
                         {"a": ("stopped", 0), "dead": ("stopped", 2)})
        self.assertEqual(summary["failed_streams"], 0)
        self.assertIn("the streams are unchanged (cameras that have ended start again)", run.stderr)
        self.assertIn("changed 'dead' (uri; connects again)", run.stderr)
        self.assertIn("stream 'dead' starts again (started again by a reload, after it had failed)", run.stderr)

    def test_a_lane_whose_cameras_all_gave_up_starts_again_at_a_reload(self):
        """`dead`, alone on lane 1, gives up (nothing listens at its address yet): lane 1 finishes. Its
        camera then answers, and a reload that changes nothing starts lane 1 again for it: it is
        classified, and the job ends with no stream failed."""
        port = free_port()
        dead = f"rtsp://127.0.0.1:{port}/test"
        config, endpoint = write_config(self.dir, [("a", live("ball")), ("dead", dead)], job={"mode": "live"},
                                        lanes_per_device=2,
                                        ingest={"reconnect_attempts": 1, "reconnect_delay_s": 0.2,
                                                "reconnect_max_delay_s": 0.2})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.wait_for("dead to give up", lambda m: has_event(m, "dead", "error"))
        deadline = time.time() + 30  # until lane 1's ingest has finished (it may be gone before its pid is seen)
        while not re.search(r"stage ingest\[1\] \(pid \d+\) finished", run.stderr_so_far()) and time.time() < deadline:
            time.sleep(0.1)
        uri, _ = start_rtsp_camera(self, "smpte", port=port, width=160, height=120)
        self.assertEqual(uri, dead)
        run.signal(signal.SIGHUP)
        self.wait_for("results of dead", self.results_of("dead"), timeout=60)
        msgs, results, events = self.stop_and_collect(run)
        kinds = [e["event"] for e in events["dead"]]
        self.assertIn("error", kinds)
        # It never had a frame: it starts (its lane's new ingest numbers it from 0).
        self.assertEqual(kinds[kinds.index("error") + 1:], ["started", "eos"], kinds)
        seqs = [r["seq"] for r in results["dead"]]
        self.assertEqual(seqs[0], 0)
        self.assertEqual(seqs, sorted(set(seqs)))
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"][0]
        self.assertEqual(summary["failed_streams"], 0)
        self.assertEqual({s["stream_id"]: s["status"] for s in summary["streams"]}, {"a": "stopped", "dead": "stopped"})
        self.assertIn("lane 1 (ingest, preprocess, batch and infer; streams 'dead') had finished (all of its streams "
                      "had ended): it starts again for the streams a reload added to it, listed again or tries again",
                      run.stderr)

    def test_a_camera_removed_and_listed_again_comes_back_under_its_id_numbering_on(self):
        """b's region stream b-left is removed by a reload and listed again while b runs: it rejoins b.
        Then b and b-left are removed together and listed again (b now another camera): both come back.
        Each time, under their ids, `started` saying so, numbering on from their last frame, b-left with
        its new region; a goes on untouched."""
        streams = [("a", live("ball")), ("b", live("smpte")), {"id": "b-left", "source": "b", "roi": [0, 0, 0.5, 1]}]
        config, endpoint = write_config(self.dir, streams, job={"mode": "live"})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lives = {"b": [], "b-left": []}  # results each had when it ended

        def reload(with_streams, ended, back):
            """SIGHUP with `with_streams`; waits for the `ended` streams' eos, or for `back` to have 10 more results."""
            counts = {sid: self.count(sid) for sid in back}
            eos = {sid: sum(e["event"] == "eos" for e in events_by_stream(self.messages()).get(sid, [])) for sid in ended}
            self.rewrite(config, streams=with_streams)
            run.signal(signal.SIGHUP)
            self.wait_for(f"{ended} to end", lambda m: all(
                sum(e["event"] == "eos" for e in events_by_stream(m).get(sid, [])) > eos[sid] for sid in ended))
            for sid in ended:
                lives[sid].append(self.count(sid))
            self.wait_for(f"{back} to go on", lambda m: all(
                len(results_by_stream(m).get(sid, [])) >= counts[sid] + 10 for sid in back), timeout=60)

        self.wait_for("results of b and b-left", lambda m: self.results_of("b")(m) and self.results_of("b-left")(m))
        reload(streams[:2], ["b-left"], ["b"])
        reload(streams, [], ["b-left"])
        reload(streams[:1], ["b", "b-left"], ["a"])
        reload([streams[0], ("b", live("pinwheel")), {"id": "b-left", "source": "b", "roi": [0, 0, 0.25, 1]}],
               [], ["b", "b-left"])
        msgs, results, events = self.stop_and_collect(run)
        self.assertEqual([e["event"] for e in events["b"]], ["started", "eos", "started", "eos"])
        self.assertEqual([e["event"] for e in events["b-left"]], ["started", "eos", "started", "eos", "started", "eos"])
        for sid in ["b", "b-left"]:
            ends = [e for e in events[sid] if e["event"] == "eos"]
            self.assertEqual([e["message"] for e in ends[:-1]], ["removed from the config"] * len(lives[sid]), sid)
            starts = [e for e in events[sid] if e["event"] == "started"]
            self.assertEqual([e["message"] for e in starts[1:]], ["back: a reload listed it again"] * len(lives[sid]), sid)
            seqs = [r["seq"] for r in results[sid]]
            self.assertEqual(seqs, sorted(set(seqs)), sid)
            for n in lives[sid]:
                self.assertEqual(seqs[n], seqs[n - 1] + 1, f"{sid}: numbered on after result {n}, no gap")
            self.assertEqual(ends[-1]["frames"], len(results[sid]) - lives[sid][-1], f"{sid}: its last life's frames")
        self.assertEqual(events["b-left"][-2].get("roi"), [0, 0, 0.25, 1])
        self.assertEqual([e["event"] for e in events["a"]], ["started", "eos"])
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"][0]
        self.assertEqual({s["stream_id"]: (s["status"], s["comebacks"]) for s in summary["streams"]},
                         {"a": ("stopped", 0), "b": ("stopped", 1), "b-left": ("stopped", 2)})
        self.assertIn("added none; removed none; back 'b-left'", run.stderr)
        self.assertIn("added none; removed none; back 'b', 'b-left'", run.stderr)

    def test_a_lane_whose_preprocess_finished_while_its_ingest_goes_on_starts_again(self):
        """The race a comeback can meet: a lane's stages finish (every stream of the lane had ended) just
        as a reload starts one of its streams again, whose frames then have nowhere to go. Forced here by
        stopping the lane's preprocess alone (SIGTERM: it drains for job.drain_timeout_s and exits 0)
        while its ingest goes on: `vapipe run` restarts the lane 10 s later, and the stream goes on,
        numbered forward. Then publish alone (every stream had ended for it): it starts again too."""
        config, endpoint = write_config(self.dir, [("a", live("ball"))], job={"mode": "live", "drain_timeout_s": 1})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        stages = run.watch_stages()
        self.wait_for("results of a", self.results_of("a"))
        os.kill(stages["preprocess"], signal.SIGTERM)
        self.wait_for("a resumed", lambda m: has_event(m, "a", "resumed"), timeout=60)
        before = self.count("a")
        self.wait_for("a to go on", lambda m: len(results_by_stream(m).get("a", [])) >= before + 10)
        # Publish likewise: it starts again, and a's results go on (in the results file: the subscriber
        # ends at the job summary the first publish wrote as it finished).
        jsonl = os.path.join(self.dir, "results.jsonl")

        def recorded(kind):
            with open(jsonl) as f:
                lines = [json.loads(line) for line in f if line.strip()]
            return [l["payload"] for l in lines if l["topic"] == f"{kind}/a"]

        os.kill(stages["publish"], signal.SIGTERM)
        deadline = time.time() + 60
        while time.time() < deadline and "publish: it finished (every stream had ended)" not in run.stderr_so_far():
            time.sleep(0.2)
        before = len(recorded("results"))
        deadline = time.time() + 60
        while time.time() < deadline and len(recorded("results")) < before + 10:
            time.sleep(0.2)
        run.signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=60), 0, run.stderr[-3000:])
        kinds = [e["event"] for e in recorded("events")]
        self.assertEqual(kinds[:3], ["started", "reconnecting", "resumed"])
        self.assertEqual(kinds[-1], "eos")
        seqs = [r["seq"] for r in recorded("results")]
        self.assertGreaterEqual(len(seqs), before + 10, "a's results went on after publish started again")
        self.assertEqual(seqs, sorted(set(seqs)))
        self.assertIn("the lane (ingest, preprocess, batch and infer; streams 'a'): its stages finished (every stream "
                      "had ended) while its ingest went on with a stream started again: it starts again", run.stderr)
        self.assertIn("publish: it finished (every stream had ended) while an ingest went on with a stream started "
                      "again: it starts again", run.stderr)

    def test_a_lane_restarted_after_a_crash_runs_the_streams_of_the_reloaded_table(self):
        """A stage crashes after a reload: its lane starts again with the job's current streams (a and c
        resume, b, removed, neither starts nor ends again), and numbering goes on forward. The config file
        is half saved when it crashes (an editor's save under way): the lane's stages start with the
        config the job runs on (vapipe run's copy), not with the file as it is then."""
        config, endpoint = write_config(self.dir, [("a", live("ball")), ("b", live("smpte"))], job={"mode": "live"})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        stages = run.watch_stages()
        self.wait_for("results of a and b", lambda m: self.results_of("a")(m) and self.results_of("b")(m))
        self.rewrite(config, streams=[("a", live("ball")), ("c", live("pinwheel"))])
        run.signal(signal.SIGHUP)
        self.wait_for("results of c", self.results_of("c"))
        with open(config) as f:
            saved = f.read()
        self.rewrite(config, text=saved[:len(saved) // 2])
        os.kill(stages["infer"], signal.SIGKILL)
        resumed = lambda m, sid: has_event(m, sid, "resumed")
        self.wait_for("a and c resumed", lambda m: resumed(m, "a") and resumed(m, "c"), timeout=60)
        after = len(results_by_stream(self.messages()).get("c", []))
        self.wait_for("results of c after the restart",
                      lambda m: len(results_by_stream(m).get("c", [])) >= after + 5)
        msgs, results, events = self.stop_and_collect(run)
        for sid in ["a", "c"]:
            self.assertEqual([e["event"] for e in events[sid]], ["started", "reconnecting", "resumed", "eos"], sid)
            seqs = [r["seq"] for r in results[sid]]
            self.assertEqual(seqs, sorted(set(seqs)), f"stream {sid}: forward only")
        self.assertEqual([e["event"] for e in events["b"]], ["started", "eos"])
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"]
        self.assertEqual(len(summary), 1)
        self.assertEqual({s["stream_id"]: (s["status"], s["restarts"]) for s in summary[0]["streams"]},
                         {"a": ("stopped", 1), "b": ("removed", 0), "c": ("stopped", 1)})
        self.assertIn("restarting the lane (ingest, preprocess, batch and infer; streams 'a', 'c') in 1 s", run.stderr)
        self.assertNotIn("YAML", run.stderr)  # no stage read the half-saved file

    def test_a_lane_whose_streams_were_all_removed_starts_again_for_a_stream_added_later(self):
        """b, alone on lane 1, is removed: lane 1's ingest finishes. A later reload adds c, which goes to
        lane 1 (the emptier): the lane starts again for it, c is classified, and the job stops at once
        (it used to never start c, and the stop waited out the drain timeout for c's end)."""
        config, endpoint = write_config(self.dir, [("a", live("ball")), ("b", live("smpte"))], job={"mode": "live"},
                                        lanes_per_device=2)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lanes = run.watch_lanes(9)  # publish too
        self.wait_for("results of a and b", lambda m: self.results_of("a")(m) and self.results_of("b")(m))
        self.rewrite(config, streams=[("a", live("ball"))])
        run.signal(signal.SIGHUP)
        self.wait_for("b's end", lambda m: has_event(m, "b", "eos"))
        deadline = time.time() + 30
        while os.path.exists(f"/proc/{lanes[('ingest', 1)]}") and time.time() < deadline:
            time.sleep(0.1)  # until lane 1's ingest has finished
        self.rewrite(config, streams=[("a", live("ball")), ("c", live("pinwheel"))])
        run.signal(signal.SIGHUP)
        self.wait_for("results of c", self.results_of("c"))
        msgs, results, events = self.stop_and_collect(run)
        self.assertEqual([e["event"] for e in events["c"]], ["started", "eos"])
        self.assertEqual(events["c"][-1]["message"], "stopped")
        self.assertEqual([e["event"] for e in events["b"]], ["started", "eos"])
        self.assertEqual([e["event"] for e in events["a"]], ["started", "eos"])
        self.assertIn("reload (SIGHUP): " + config + ": added 'c' (lane 1)", run.stderr)
        self.assertIn("lane 1 (ingest, preprocess, batch and infer; streams 'c') had finished (all of its streams had "
                      "ended): it starts again for the streams a reload added to it, listed again or tries again",
                      run.stderr)
        self.assertNotIn("drain timeout", run.stderr)

    def test_streams_with_a_source_join_and_leave_its_decoding_and_survive_a_lane_restart(self):
        """streams[].source in a live job: `cam` is decoded once and `cam-left` classifies its left half.
        A reload removes cam-left and adds cam-right (onto cam's lane, though lane 1 is emptier): cam-left
        ends, cam-right starts numbered from 0, cam goes on. Lane 0 then crashes: cam and cam-right reconnect
        and go on, forward only; cam-left, listed again after the restart, rejoins cam."""
        cam = live("ball")
        config, endpoint = write_config(self.dir, [("cam", cam), {"id": "cam-left", "source": "cam", "roi": [0, 0, 0.5, 1]},
                                                   ("other", live("smpte"))],
                                        job={"mode": "live"}, lanes_per_device=2)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.wait_for("results of cam and cam-left", lambda m: self.results_of("cam")(m) and self.results_of("cam-left")(m))
        self.rewrite(config, streams=[("cam", cam), {"id": "cam-right", "source": "cam", "roi": [0.5, 0, 0.5, 1]},
                                      ("other", live("smpte"))])
        run.signal(signal.SIGHUP)
        self.wait_for("cam-left's end", lambda m: has_event(m, "cam-left", "eos"))
        # 15 before the lane is killed, 10 more after it: the more than 20 the comparison below needs (a
        # first result was not enough: the crash could leave 20 in all, and the check failed once in CI).
        self.wait_for("15 results of cam-right", lambda m: len(results_by_stream(m).get("cam-right", [])) >= 15)

        lanes = run.watch_lanes(9)
        os.kill(lanes[("infer", 0)], signal.SIGKILL)
        self.wait_for("cam-right resumed", lambda m: has_event(m, "cam-right", "resumed"), timeout=60)
        before = len(results_by_stream(self.messages()).get("cam-right", []))
        self.wait_for("cam-right to go on after its lane's restart",
                      lambda m: len(results_by_stream(m).get("cam-right", [])) >= before + 10)
        # cam-left, removed before the restart, is listed again: it rejoins cam, numbered forward.
        ended_at = len(results_by_stream(self.messages()).get("cam-left", []))
        self.rewrite(config, streams=[("cam", cam), {"id": "cam-right", "source": "cam", "roi": [0.5, 0, 0.5, 1]},
                                      ("other", live("smpte")), {"id": "cam-left", "source": "cam", "roi": [0, 0, 0.5, 1]}])
        run.signal(signal.SIGHUP)
        self.wait_for("cam-left back", lambda m: len(results_by_stream(m).get("cam-left", [])) >= ended_at + 10,
                      timeout=60)
        msgs, results, events = self.stop_and_collect(run)

        left = [r["seq"] for r in results["cam-left"]]
        self.assertEqual(left[0], 0)
        self.assertEqual(left, sorted(set(left)))
        self.assertEqual([e["event"] for e in events["cam-left"]], ["started", "eos", "started", "eos"])
        self.assertEqual(events["cam-left"][1]["message"], "removed from the config")
        self.assertEqual(events["cam-left"][1]["frames"], ended_at)
        self.assertEqual(events["cam-left"][2]["message"], "back: a reload listed it again")
        right = [r["seq"] for r in results["cam-right"]]
        self.assertEqual(right[0], 0, "a stream added to a running source numbers its own frames from 0")
        self.assertEqual(right, sorted(set(right)), "cam-right: forward only over its lane's restart")
        for sid in ("cam", "cam-right"):
            self.assertEqual([e["event"] for e in events[sid]], ["started", "reconnecting", "resumed", "eos"], sid)
        # Classified by region: the ball's half of the frame and the whole differ in what they show, but
        # both are frames of one decoding: every cam-right result has a cam result of the same timestamp.
        cam_pts = {r["pts_ms"] for r in results["cam"]}
        self.assertGreater(len(results["cam-right"]), 20)
        missing = [r["seq"] for r in results["cam-right"] if r["pts_ms"] not in cam_pts]
        self.assertLessEqual(len(missing), 8, "cam-right frames that cam does not have (the lane restart loses a few)")
        self.assertIn("added 'cam-right' (lane 0); removed 'cam-left'", run.stderr)
        self.assertIn("ingest lane 0: stream 'cam-right' added (frames of 'cam')", run.stderr)
        self.assertRegex(run.stderr, r"ingest lane 0: 2 of 3 streams \(1 decoded\)")
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"][0]
        self.assertEqual({s["stream_id"]: s["status"] for s in summary["streams"]},
                         {"cam": "stopped", "cam-left": "stopped", "cam-right": "stopped", "other": "stopped"})


if __name__ == "__main__":
    import unittest
    unittest.main()
