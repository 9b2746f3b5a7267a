"""A live job goes on when one of its stages crashes: that stage's lane (ingest, preprocess, batch and
infer) starts again, or publish alone, and the rest of the job never notices. The restarted lane's
streams say `reconnecting` and `resumed` (attempt 0), and their seq goes on forward; nothing is numbered
twice."""
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

from e2e.common import (
    SOURCE_DIR, VAPIPE, Run, SubscribedTest, Subscriber, events_by_stream, free_port, has_event, live_test_uri,
    make_clip, results_by_stream, write_config)

live = live_test_uri


class StageRestart(SubscribedTest):
    def test_a_crashed_stage_restarts_its_lane_and_a_crashed_publish_restarts_alone(self):
        metrics = f"127.0.0.1:{free_port()}"
        config, endpoint = write_config(self.dir, [("a", live("ball")), ("b", live("smpte"))], job={"mode": "live"},
                                        lanes_per_device=2, publish={"metrics_address": metrics})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lanes = run.watch_lanes(9)
        self.wait_for("results of a and b", lambda m: self.count("a") >= 10 and self.count("b") >= 10)

        # infer of lane 1 (stream b) crashes: lane 1 restarts; lane 0 (stream a) goes on untouched.
        a_before, b_before = self.count("a"), self.count("b")
        os.kill(lanes[("infer", 1)], signal.SIGKILL)
        is_restart = lambda e: e["event"] in ("reconnecting", "resumed") and e["attempt"] == 0
        self.wait_for("b resumed after its lane's restart",
                      lambda m: any(e["event"] == "resumed" and e["attempt"] == 0
                                    for e in events_by_stream(m).get("b", [])), timeout=60)
        self.wait_for("results of b after the restart", lambda m: self.count("b") >= b_before + 10)
        text = ""
        deadline = time.time() + 10  # the metrics are a snapshot taken once a second
        while time.time() < deadline and 'vapipe_stream_restarts_total{stream="b"} 1' not in text:
            time.sleep(0.2)
            text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read().decode()
        self.assertIn('vapipe_stream_restarts_total{stream="b"} 1', text)
        self.assertIn('vapipe_stream_restarts_total{stream="a"} 0', text)
        self.assertIn('vapipe_stream_state{stream="b",state="running"} 1', text)
        self.assertGreater(self.count("a"), a_before + 10)  # a never paused
        # The dead processes' figures went with them: the restarted lane is not taken for a stalled one.
        health = json.loads(urllib.request.urlopen(f"http://{metrics}/healthz", timeout=10).read())
        self.assertEqual((health["status"], health["stalled"]), ("ok", []), health)

        # publish crashes: it alone restarts; the subscriber's socket reconnects by itself.
        received = len(self.messages())
        os.kill(lanes[("publish", 0)], signal.SIGKILL)
        self.wait_for("results after publish's restart", lambda m: len(m) >= received + 40, timeout=60)

        msgs, results, events = self.stop_and_collect(run)
        for sid in ["a", "b"]:
            seqs = [r["seq"] for r in results[sid]]
            self.assertEqual(seqs, sorted(set(seqs)), f"stream {sid}: never a seq twice, never backwards")
        # a: one start, one end; nothing else happened to it.
        self.assertEqual([e["event"] for e in events["a"]], ["started", "eos"])
        # b: its lane restarted once; numbering jumped forward over the crash.
        b_events = [e["event"] for e in events["b"]]
        self.assertEqual(b_events, ["started", "reconnecting", "resumed", "eos"], events["b"])
        reconnecting = events["b"][1]
        self.assertTrue(is_restart(reconnecting))
        self.assertIn("its lane restarted: stage infer[1] (pid", reconnecting["message"])
        self.assertIn("killed by signal 9", reconnecting["message"])
        # a ran on through lane 1's restart: up to publish's restart (whose results the subscriber
        # missed) every seq is there, but for frames the live queue dropped and counted.
        a_seqs = [r["seq"] for r in results["a"]]
        self.assertEqual(a_seqs[:a_before + 10], sorted(set(a_seqs[:a_before + 10])))
        self.assertLessEqual(a_seqs[a_before + 9] + 1 - (a_before + 10), events["a"][-1]["dropped"])

        # The JSON-lines file was appended to by the restarted publish, not cut.
        with open(os.path.join(self.dir, "results.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        file_seqs = [l["payload"]["seq"] for l in lines if l["topic"] == "results/a"]
        self.assertEqual(file_seqs[0], 0)
        self.assertEqual(file_seqs, sorted(set(file_seqs)))
        self.assertGreater(file_seqs[-1], a_seqs[a_before + 10])

        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"]
        self.assertEqual(len(summary), 1)
        self.assertTrue(summary[0]["publish_restarted"])
        self.assertEqual({s["stream_id"]: s["status"] for s in summary[0]["streams"]}, {"a": "stopped", "b": "stopped"})
        err = run.stderr
        self.assertRegex(err, r"stage infer\[1\] \(pid \d+\) failed: killed by signal 9 \(Killed\); restarting lane 1 "
                              r"\(ingest, preprocess, batch and infer; streams 'b'\) in 1 s \(restart 1 of at most 3")
        # Counted apart from lane 1's crash: publish restarts after 1 s, its first restart in a row.
        self.assertRegex(err, r"stage publish \(pid \d+\) failed: killed by signal 9 \(Killed\); restarting publish in 1 s "
                              r"\(restart 1 of at most 3 in a row\)")
        self.assertIn("started stage ingest[1] again", err)
        self.assertNotIn("started stage ingest[0] again", err)
        self.assertNotIn("restarting the job", err)
        self.assert_no_leftovers(run)

    def test_a_stop_while_a_lane_is_down_still_ends_its_streams(self):
        """SIGINT arrives during a crashed lane's back-off: the lane starts only to end its streams, so
        every stream gets its end event and the summary says stopped, not running."""
        config, endpoint = write_config(self.dir, [("a", live("ball")), ("b", live("smpte"))], job={"mode": "live"},
                                        lanes_per_device=2)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lanes = run.watch_lanes(9)
        self.wait_for("results of a and b", lambda m: self.count("a") >= 10 and self.count("b") >= 10)
        os.kill(lanes[("infer", 1)], signal.SIGKILL)
        time.sleep(0.3)  # inside the 1 s back-off
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertIn("the job is stopping: lane 1 (ingest, preprocess, batch and infer; streams 'b') starts again "
                      "only to end its streams", run.stderr)
        msgs = self.subscriber.wait(timeout=30)
        events = events_by_stream(msgs)
        self.assertEqual([e["event"] for e in events["a"]], ["started", "eos"])
        self.assertEqual([e["event"] for e in events["b"]], ["started", "reconnecting", "eos"])
        self.assertEqual(events["b"][-1]["message"], "stopped")
        summary = [m["payload"] for m in msgs if m["topic"] == "job/summary"]
        self.assertEqual(len(summary), 1)
        self.assertEqual({s["stream_id"]: s["status"] for s in summary[0]["streams"]}, {"a": "stopped", "b": "stopped"})
        self.assertNotIn("ingest emitted", run.stderr)  # its counts agree with what publish saw
        self.assert_no_leftovers(run)

    def test_a_file_read_to_its_end_is_not_read_again_when_its_lane_restarts(self):
        """A live job's file that its lane had read to its end before the lane crashed is not read again
        from its start by the restarted lane (before stop 54 it was: its results repeated, with a second
        eos): it ends again, which publish, having said its end, does not repeat. A camera of the same
        lane reconnects and goes on."""
        clip = os.path.join(SOURCE_DIR, "tests", "media", "ball-320x240-h264.mp4")
        config, endpoint = write_config(self.dir, [("f", clip), ("a", live("ball"))], job={"mode": "live"})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lanes = run.watch_lanes(5)
        self.wait_for("f's end", lambda m: any(e["event"] == "eos" for e in events_by_stream(m).get("f", [])),
                      timeout=60)
        read = self.count("f")
        os.kill(lanes[("infer", 0)], signal.SIGKILL)
        self.wait_for("a resumed after its lane's restart",
                      lambda m: any(e["event"] == "resumed" for e in events_by_stream(m).get("a", [])), timeout=60)
        self.wait_for("results of a after the restart", lambda m: len(results_by_stream(m).get("a", [])) >= 20)
        time.sleep(2)  # (the file, were it read again, would have given results by now)
        msgs, results, events = self.stop_and_collect(run)
        self.assertEqual(len(results["f"]), read, "the file's frames classified once")
        self.assertEqual([e["event"] for e in events["f"]], ["started", "eos"])
        self.assertEqual([e["event"] for e in events["a"]], ["started", "reconnecting", "resumed", "eos"])
        self.assertIn("stream 'f': read to its end before its lane restarted: not read again", run.stderr)

    def test_a_file_being_read_goes_on_after_its_last_frame_sent_when_its_lane_restarts(self):
        """A live job's file that its lane was reading when the lane crashed goes on after the last frame
        the crashed ingest sent (ingest notes each one's timestamp, run_dir/seq-<lane>.positions),
        instead of from its start as before: no timestamp is classified twice, and seq goes on forward.
        The frames in flight at the crash are lost, as a camera's are; the file is read at its own pace
        (30 fps), so no other frame is."""
        clip = os.path.join(self.dir, "long.mp4")
        make_clip(clip, "ball", 450, 160, 120)  # 15 s
        config, endpoint = write_config(self.dir, [("f", clip)], job={"mode": "live"})
        validate = subprocess.run([VAPIPE, "validate", config], capture_output=True, text=True, timeout=60)
        self.assertIn("long.mp4 (read at its own pace, as a camera sends)\n", validate.stdout)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lanes = run.watch_lanes(5)
        self.wait_for("f's first results", lambda m: self.count("f") >= 100, timeout=60)
        os.kill(lanes[("infer", 0)], signal.SIGKILL)
        self.wait_for("f's end", lambda m: any(e["event"] == "eos" for e in events_by_stream(m).get("f", [])),
                      timeout=120)
        msgs, results, events = self.stop_and_collect(run)
        self.assertEqual([e["event"] for e in events["f"]], ["started", "reconnecting", "resumed", "eos"],
                         run.stderr[-3000:])
        seqs = [r["seq"] for r in results["f"]]
        pts = [r["pts_ms"] for r in results["f"]]
        self.assertEqual(seqs, sorted(set(seqs)), "seq never repeats or goes back")
        self.assertEqual(pts, sorted(set(pts)), "no frame classified twice (before the change: from 0 again)")
        self.assertGreater(pts[-1], 14900, "read on to its end (its last frame at 14.97 s)")
        # Paced, nothing dropped: at most one gap, the frames in flight in the lane at the crash (none
        # when the kill came between two frames).
        gaps = [(a, b) for a, b in zip(pts, pts[1:]) if b - a > 40]
        self.assertLessEqual(len(gaps), 1, gaps)
        self.assertLess(450 - len(pts), 40, "lost: at most what the lane held in flight")
        self.assertRegex(run.stderr, r"stream 'f': sought to a keyframe before \d+:\d+\.\d+, its last frame sent "
                                     r"before its lane restarted")
        self.assertRegex(run.stderr, r"stream 'f': resumed after the restart of its lane, from seq 4096 at "
                                     r"\d+:\d+\.\d+ of its file")

    def test_a_looping_file_goes_on_looping_across_a_lane_restart(self):
        """streams[].loop: a live job's 1 s clip is read again at each end (a `changed` event says each
        loop, numbering goes on, timestamps start over). Lane 0 restarted in the middle of a loop goes
        on in that loop after its last frame sent, not from the clip's start, and loops on."""
        clip = os.path.join(self.dir, "second.mp4")
        make_clip(clip, "ball", 30, 160, 120)
        pictures = os.path.join(self.dir, "pictures")
        config, endpoint = write_config(self.dir, [{"id": "f", "uri": clip, "loop": True}],  # live by default
                                        publish={"segments_min_frames": 3, "segments_pictures_dir": pictures,
                                                 "segments_clips": True, "segments_clip_pre_s": 0.2,
                                                 "segments_clip_post_s": 0.2})
        validate = subprocess.run([VAPIPE, "validate", config], capture_output=True, text=True, timeout=60)
        self.assertIn("live mode", validate.stdout)
        self.assertIn("second.mp4 (read at its own pace, as a camera sends, again from its start at each end)\n",
                      validate.stdout)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lanes = run.watch_lanes(5)
        self.wait_for("f's second loop", lambda m: self.count("f") >= 45, timeout=60)
        os.kill(lanes[("infer", 0)], signal.SIGKILL)
        looped = lambda m: [e for e in events_by_stream(m).get("f", []) if e["event"] == "changed"]
        self.wait_for("f resumed", lambda m: has_event(m, "f", "resumed"), timeout=60)
        after = len(looped(self.messages()))
        self.wait_for("two more loops", lambda m: len(looped(m)) >= after + 2, timeout=60)
        msgs = self.stop_and_collect(run)[0]
        events = [m["payload"]["event"] for m in msgs if m["topic"] == "events/f"]
        self.assertEqual(events[0], "started")
        self.assertEqual(events[-1], "eos")
        self.assertEqual([e for e in events if e not in ("changed",)], ["started", "reconnecting", "resumed", "eos"])
        self.assertGreaterEqual(events.count("changed"), 3)
        # In message order: each run of results between two events only goes forward in the clip.
        runs, current, seqs = [], [], []
        for m in msgs:
            if m["topic"] == "events/f":
                runs.append(current)
                current = []
            elif m["topic"] == "results/f":
                current.append(m["payload"]["pts_ms"])
                seqs.append(m["payload"]["seq"])
        self.assertEqual(seqs, sorted(set(seqs)), "seq only goes forward")
        for r in runs:
            self.assertEqual(r, sorted(set(r)), "within a loop (and across the restart) the clip only goes forward")
        # The loop the restart came in: the results before the crash and after the `resumed` make one
        # read of the clip, with no timestamp twice.
        crash = events.index("reconnecting")
        across = runs[crash] + runs[crash + 2]
        self.assertEqual(across, sorted(set(across)), "the restarted lane went on in its loop")
        self.assertIn("stream 'f': looped: read again from its start (streams[].loop; time 2)", run.stderr)
        # Each loop's segment ends at the loop (the `changed` event); a clip open there is cut by the new read.
        segments = [m["payload"] for m in msgs if m["topic"] == "segments/f"]
        self.assertGreaterEqual(sum(1 for p in segments if p["event"] == "ended"), 3)
        clips = [p for p in segments if p["event"] == "clip"]
        self.assertTrue(any(p["error"] is None and "a looping file read again" in (p["cut_short"] or "") and
                            os.path.getsize(p["clip"]) > 0 for p in clips), clips)

    def test_each_lane_counts_its_own_crashes(self):
        """max_restarts 1: one crash in each of two lanes is one restart each, not two in a row."""
        config, endpoint = write_config(self.dir, [("a", live("ball")), ("b", live("smpte"))],
                                        job={"mode": "live", "max_restarts": 1}, lanes_per_device=2)
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        lanes = run.watch_lanes(9)
        self.wait_for("results of a and b", lambda m: self.count("a") >= 5 and self.count("b") >= 5)
        resumed = lambda m, sid: has_event(m, sid, "resumed")
        os.kill(lanes[("infer", 0)], signal.SIGKILL)
        self.wait_for("a resumed", lambda m: resumed(m, "a"), timeout=60)
        os.kill(lanes[("infer", 1)], signal.SIGKILL)
        self.wait_for("b resumed", lambda m: resumed(m, "b"), timeout=60)
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertEqual(run.stderr.count("(restart 1 of at most 1 in a row)"), 2)

    def test_crashes_beyond_max_restarts_stop_the_job(self):
        config, endpoint = write_config(self.dir, [("a", live("ball"))], job={"mode": "live", "max_restarts": 1})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        stages = run.watch_stages()
        self.wait_for("results of a", lambda m: self.count("a") >= 10)
        os.kill(stages["preprocess"], signal.SIGKILL)
        self.wait_for("a resumed", lambda m: has_event(m, "a", "resumed"),
                      timeout=60)
        run.stage_pids = {}
        stages = run.watch_stages()
        os.kill(stages["preprocess"], signal.SIGKILL)
        code = run.wait(timeout=60)
        self.assertEqual(code, 2, run.stderr[-3000:])
        self.assertIn("1 restarts in a row, job.max_restarts", run.stderr)
        self.assertNotIn("restarting the job", run.stderr)

    def test_a_stopped_stage_makes_healthz_say_stalled_until_it_goes_on(self):
        """A stage process stopped (SIGSTOP: a debugger, a frozen container) stays alive, so the supervisor sees
        nothing, and the watchdog inside it is stopped too. /healthz says the job is stalled (503, naming the
        stage) once its figures are 15 s old, `vapipe status` says so (exit 1), and both are ok again once it
        goes on. The stages waiting on it are not named."""
        metrics = f"127.0.0.1:{free_port()}"
        config, endpoint = write_config(self.dir, [("a", live("ball"))], job={"mode": "live"},
                                        publish={"metrics_address": metrics})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        stages = run.watch_stages()
        self.wait_for("results of a", lambda m: self.count("a") >= 10, timeout=60)

        def health():
            try:
                with urllib.request.urlopen(f"http://{metrics}/healthz", timeout=10) as answer:
                    return answer.status, json.loads(answer.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        code, h = health()
        self.assertEqual((code, h["status"], h["stalled"]), (200, "ok", []), h)
        os.kill(stages["batch"], signal.SIGSTOP)
        def go_on():  # (if the test fails while it is stopped; gone once the job has ended)
            try:
                os.kill(stages["batch"], signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.addCleanup(go_on)
        stopped_at = time.time()
        deadline = stopped_at + 40
        while time.time() < deadline and code != 503:
            time.sleep(0.5)
            code, h = health()
        self.assertEqual(code, 503, h)
        self.assertGreaterEqual(time.time() - stopped_at, 14)  # figures 15 s old, not sooner
        self.assertEqual(h["status"], "stalled")
        self.assertEqual([(s["stage"], s["lane"]) for s in h["stalled"]], [("batch", 0)], h["stalled"])
        self.assertIn("no figures for 1", h["stalled"][0]["why"])
        status = subprocess.run([VAPIPE, "status", metrics], capture_output=True, text=True, timeout=30)
        self.assertEqual(status.returncode, 1, status.stdout + status.stderr)
        self.assertRegex(status.stdout, r"^STALLED: batch lane 0: no figures for \d+ s \(it writes them every second")
        text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read().decode()
        self.assertRegex(text, r'\nvapipe_stage_silent_seconds\{stage="batch",lane="0"\} 1[5-9]')

        os.kill(stages["batch"], signal.SIGCONT)
        deadline = time.time() + 10
        while time.time() < deadline and code != 200:
            time.sleep(0.2)
            code, h = health()
        self.assertEqual((code, h["status"], h["stalled"]), (200, "ok", []), h)
        before = self.count("a")
        self.wait_for("results of a after batch went on", lambda m: self.count("a") >= before + 10, timeout=60)
        msgs, results, events = self.stop_and_collect(run)
        seqs = [r["seq"] for r in results["a"]]
        self.assertEqual(seqs, sorted(set(seqs)))
        # The log says both, for the post-mortem.
        self.assertRegex(run.stderr, r"stage batch \(lane 0\) has stalled: no figures for 1\d s .*; /healthz answers 503 "
                                     r"until it moves again")
        self.assertRegex(run.stderr, r"stage batch \(lane 0\) is no longer stalled, \d+ s after it was said to be")

    def test_a_stage_stuck_in_its_own_work_is_aborted_and_its_lane_restarted(self):
        """Infer runs a model that never returns from a batch with a white frame (a stuck CUDA call, in
        effect), and only lane 1's stream has them: its watchdog aborts it after job.stage_timeout_s, with the stuck thread's
        backtrace, and the lane restarts; it sticks again, and max_restarts ends the job. Lane 0's
        stream goes on meanwhile."""
        stuck_model = os.path.join(SOURCE_DIR, "tests", "media", "stuck_on_white.pt")
        # Both lanes run the model; only the blinking stream (lane 1) has white frames.
        config, endpoint = write_config(
            self.dir, [("a", live("ball")), ("blinker", live("blink"))],
            job={"mode": "live", "stage_timeout_s": 2, "max_restarts": 1}, lanes_per_device=2,
            infer={"model": stuck_model})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.wait_for("results of a", lambda m: self.count("a") >= 10, timeout=60)
        code = run.wait(timeout=120)
        self.assertEqual(code, 2, run.stderr[-3000:])
        err = run.stderr
        self.assertRegex(err, r"\[infer \d+\] infer: stuck in its own work \(processing messages?\) for 2\.\d s "
                              r"\(job.stage_timeout_s\): aborting it")
        self.assertIn("backtrace", err)
        self.assertRegex(err, r"stage infer\[1\] \(pid \d+\) failed: killed by signal 6 \(Aborted\); restarting lane 1")
        self.assertIn("1 restarts in a row, job.max_restarts", err)
        msgs = self.subscriber.wait(timeout=30)
        self.assertGreater(len(results_by_stream(msgs).get("a", [])), 60)  # went on for both stuck spells
        # blinker: a black frame before each white one that got stuck, at most.
        self.assertLessEqual(len(results_by_stream(msgs).get("blinker", [])), 2)


if __name__ == "__main__":
    import unittest
    unittest.main()
