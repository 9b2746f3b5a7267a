"""Archive folders watched while the job runs (streams[].watch_s): files that land in the folder are
classified, each once, every frame, as they settle; the job ends when it is stopped, and --resume goes
on without classifying a file twice. Also an archive job stopped while files wait their turn
(ingest.max_open_streams): it ends at once, the waiting files without results. And a watched folder
on a share that stops answering (a real FUSE file system that hangs, as a hard-mounted NFS share does)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

from e2e.common import (VAPIPE, E2ETest, Run, children_of, free_port, live_test_uri, make_clip, stream_entry,
                        write_config)

HANGING_SHARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hanging_share.py")


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


class WatchedFolder(E2ETest):
    def setUp(self):
        super().setUp()
        self.jsonl = os.path.join(self.dir, "results.jsonl")
        self.clips = os.path.join(self.dir, "clips")  # made outside the folder, then put in it
        os.makedirs(self.clips)

    def clip(self, name, pattern, frames):
        path = os.path.join(self.clips, name)
        make_clip(path, pattern, frames, 160, 120)
        return path

    def wait_for_ends(self, ids, timeout=60):
        """Until each stream of `ids` has reached its end (an eos not of a stop) in the results file."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            ended = {m["payload"]["stream_id"] for m in read_jsonl(self.jsonl)
                     if m["topic"].startswith("events/") and m["payload"]["event"] == "eos"
                     and m["payload"]["message"] != "stopped"}
            if set(ids) <= ended:
                return
            time.sleep(0.1)
        self.fail(f"streams {sorted(set(ids) - ended)} did not end in {timeout} s")

    def stop_after_results(self, run, sid, count):
        """SIGINT to the job once stream `sid` has `count` results in the results file; it must end by
        the signal (stopped before its end), without a drain timeout. Returns its results then."""
        deadline = time.time() + 60
        while time.time() < deadline and sum(m["topic"] == f"results/{sid}" for m in read_jsonl(self.jsonl)) < count:
            time.sleep(0.05)
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, -signal.SIGINT, run.stderr[-3000:])
        self.assertNotIn("drain timeout", run.stderr)
        return sum(m["topic"] == f"results/{sid}" for m in read_jsonl(self.jsonl))

    def assert_each_once(self, messages, expected):
        """`expected`: {stream id: (frames, pattern)}. Each stream's results are frames 0..n-1 once, in
        order, mostly naming its pattern, and its events are one started and one eos."""
        for sid, (frames, pattern) in expected.items():
            results = [m["payload"] for m in messages if m["topic"] == f"results/{sid}"]
            self.assertEqual([r["seq"] for r in results], list(range(frames)), sid)
            named = sum(r["label"] == pattern for r in results)
            self.assertGreaterEqual(named / frames, 0.9, f"{sid}: {named}/{frames} named '{pattern}'")
            events = [m["payload"]["event"] for m in messages if m["topic"] == f"events/{sid}"]
            self.assertEqual(events, ["started", "eos"], sid)

    def test_files_that_land_in_a_watched_folder_are_each_classified_once_every_frame(self):
        """A recorder's folder: one file at the start, still being written (left for a later look by
        settle_s), then a file written in two parts 0.6 s apart (read once whole, not at its first
        part), one copied in at once into a new subfolder. Every frame of each has one result; a stop
        with nothing left to do exits 0. Then, stopped, the folder gets one more file: `--resume`
        classifies that one alone, and no other file again."""
        nvr = os.path.join(self.dir, "nvr")
        os.makedirs(os.path.join(nvr, "day1"))
        shutil.copyfile(self.clip("a.mp4", "ball", 20), os.path.join(nvr, "day1", "a.mp4"))
        # Modified 2 s from now, as a recorder keeps touching its file: unsettled when the job starts
        # however long that takes on a loaded machine (settle_s 1 from the copy alone was not always).
        later = time.time() + 2
        os.utime(os.path.join(nvr, "day1", "a.mp4"), (later, later))
        smpte = self.clip("b.mp4", "smpte", 30)
        metrics = f"127.0.0.1:{free_port()}"
        config, _ = write_config(self.dir, [{"glob": "nvr/**/*.mp4", "watch_s": 0.3, "settle_s": 1}],
                                 publish={"wait_for_subscribers": 0, "metrics_address": metrics})
        run = Run(config)
        self.wait_for_ends(["day1-a"])
        with open(smpte, "rb") as f:
            data = f.read()
        os.makedirs(os.path.join(nvr, "day2"))
        with open(os.path.join(nvr, "day2", "b.mp4"), "wb") as f:  # a recorder writing its file
            f.write(data[:len(data) // 2])
            f.flush()
            time.sleep(0.6)
            f.write(data[len(data) // 2:])
        os.makedirs(os.path.join(nvr, "day3"))
        shutil.copyfile(os.path.join(self.clips, "a.mp4"), os.path.join(nvr, "day3", "c.mp4"))
        self.wait_for_ends(["day2-b", "day3-c"])
        # What the looks found, on `vapipe status` (publish's health document, renewed every second).
        pattern = os.path.join(nvr, "**", "*.mp4")
        deadline, status = time.time() + 20, ""
        while time.time() < deadline and f"watching {pattern} every 0.3 s: 3 files added" not in status:
            status = subprocess.run([VAPIPE, "status", metrics], capture_output=True, text=True, timeout=30).stdout
            time.sleep(0.2)
        self.assertIn(f"watching {pattern} every 0.3 s: 3 files added, the last file joined ", status)
        # A file that changes after the job took it (an export made again) is said, not classified again.
        with open(os.path.join(nvr, "day1", "a.mp4"), "ab") as f:
            f.write(b"\0" * 1000)
        time.sleep(1.8)  # settled again (settle_s 1), and looked at
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        expected = {"day1-a": (20, "ball"), "day2-b": (30, "smpte"), "day3-c": (20, "ball")}
        messages = read_jsonl(self.jsonl)
        self.assert_each_once(messages, expected)
        self.assertIn("streams[0].glob: 1 file(s) modified in the last 1 s are left for a later look", run.stderr)
        self.assertIn("is looked at again every 0.3 s while the job runs", run.stderr)
        self.assertIn("watched folders: 1 new file(s), classified in turn: 'day1-a'", run.stderr)
        self.assertNotIn("drain timeout", run.stderr)
        size = os.path.getsize(os.path.join(nvr, "day1", "a.mp4"))
        self.assertIn(f"(stream 'day1-a') has changed since the job took it ({size - 1000} bytes then, {size} now): "
                      "what it holds now is not classified again", run.stderr)
        summary = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual(len(summary), 1)
        self.assertEqual(summary[0]["frames"], 70)
        self.assertEqual(sorted(s["stream_id"] for s in summary[0]["streams"]), sorted(expected))
        # The wait for day2-b to settle (settle_s 1, after day1-a had ended) is idle, not steady time.
        self.assertGreaterEqual(summary[0]["idle_s"], 1.0)
        self.assertAlmostEqual(summary[0]["steady_fps"], 70 / summary[0]["steady_s"], places=3)
        self.assertRegex(run.stdout, r"frames/s over the [0-9.]+ s frames were under way \(idle [0-9.]+ s\)")
        self.assert_no_leftovers(run)

        # Stopped, the folder gets another file; the job started again with --resume takes it alone.
        shutil.copyfile(os.path.join(self.clips, "b.mp4"), os.path.join(nvr, "day3", "d.mp4"))
        again = Run(config, args=["--resume"])
        self.wait_for_ends(["day3-d"])
        time.sleep(1)  # a few more looks: nothing else is taken again
        again.signal(signal.SIGINT)
        code = again.wait(timeout=60)
        self.assertEqual(code, 0, again.stderr[-3000:])
        expected["day3-d"] = (30, "smpte")
        messages = read_jsonl(self.jsonl)
        self.assert_each_once(messages, expected)
        self.assertIn("--resume: stream 'day2-b' done in an earlier run (30 results)", again.stderr)
        summary = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual(summary[-1]["frames"], 100)
        self.assertEqual(summary[-1]["frames_this_run"], 30)

    def test_a_watching_job_stopped_mid_file_goes_on_from_there_with_resume(self):
        """A folder looked at every minute gets a file, and SIGHUP (a script that has just copied it
        in) has it looked at now. A stop while that file is being classified: its results stop at a
        whole frame (the job ends by the signal, as an archive job stopped before its end does), and
        --resume classifies the rest of it and nothing twice."""
        nvr = os.path.join(self.dir, "nvr")
        os.makedirs(nvr)
        config, _ = write_config(self.dir, [{"glob": "nvr/*.mkv", "watch_s": 60, "settle_s": 0.5}],
                                 publish={"wait_for_subscribers": 0}, batch={"max_batch_size": 1, "max_delay_ms": 0})
        run = Run(config)
        time.sleep(1)  # the job runs, with nothing to classify
        long = self.clip("long.mkv", "ball", 600)
        shutil.copyfile(long, os.path.join(nvr, "long.mkv"))
        time.sleep(0.7)  # settled
        # `vapipe reload` (SIGHUP) has the folder looked at now, and says so.
        looked = subprocess.run([VAPIPE, "reload", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(looked.returncode, 0, looked.stdout + looked.stderr)
        self.assertIn("reloaded: the watched folders are looked at now", looked.stdout)
        before = self.stop_after_results(run, "long", 50)
        self.assertIn("reload (SIGHUP): the watched folders are looked at now", run.stderr)
        self.assertLess(before, 600, "the file was classified whole before the stop")
        again = Run(config, args=["--resume"])
        self.wait_for_ends(["long"])
        again.signal(signal.SIGINT)
        self.assertEqual(again.wait(timeout=60), 0, again.stderr[-3000:])
        self.assertIn(f"--resume: stream 'long' goes on from frame {before}", again.stderr)
        messages = read_jsonl(self.jsonl)
        results = [m["payload"]["seq"] for m in messages if m["topic"] == "results/long"]
        self.assertEqual(results, list(range(600)))

    def test_a_crash_while_a_watched_file_is_classified_restarts_the_job_which_goes_on_with_it(self):
        """A stage killed while a file the watch added is being classified: the archive job restarts
        whole and goes on from its results file, with that file as one of its own streams (not taken
        for one that left the folder and ended as removed): every frame once."""
        nvr = os.path.join(self.dir, "nvr")
        os.makedirs(nvr)
        config, _ = write_config(self.dir, [{"glob": "nvr/*.mkv", "watch_s": 0.2, "settle_s": 0.5}],
                                 publish={"wait_for_subscribers": 0}, batch={"max_batch_size": 1, "max_delay_ms": 0})
        run = Run(config)
        stages = run.watch_stages()
        shutil.copyfile(self.clip("long.mkv", "ball", 600), os.path.join(nvr, "long.mkv"))
        deadline = time.time() + 60
        while time.time() < deadline and sum(m["topic"] == "results/long" for m in read_jsonl(self.jsonl)) < 50:
            time.sleep(0.05)
        os.kill(stages["infer"], signal.SIGKILL)
        self.wait_for_ends(["long"])
        run.signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=60), 0, run.stderr[-3000:])
        self.assertIn("restarting the job in 1 s", run.stderr)
        self.assertIn("--resume: stream 'long' goes on from frame", run.stderr)
        self.assertNotIn("no longer in the config", run.stderr)
        messages = read_jsonl(self.jsonl)
        self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == "results/long"], list(range(600)))

    def test_a_stop_while_files_wait_their_turn_ends_at_once_and_resume_reads_them(self):
        """An archive job (not watching) reading one file at a time: stopped during the first, it ends
        without waiting for the others (before, every stage waited for them until its drain timeout,
        twice); they have no results and no events, and --resume reads them whole."""
        for name in ("a", "b", "c"):
            self.clip(f"{name}.mkv", "ball", 300)
        config, _ = write_config(self.dir, [{"glob": "clips/*.mkv"}], ingest={"max_open_streams": 1},
                                 publish={"wait_for_subscribers": 0}, batch={"max_batch_size": 1, "max_delay_ms": 0})
        run = Run(config)
        self.assertLess(self.stop_after_results(run, "a", 30), 300)
        self.assertIn("ingest lane 0: stopped with 2 streams not opened yet: they have no results, and --resume reads "
                      "them", run.stderr)
        messages = read_jsonl(self.jsonl)
        self.assertEqual([m for m in messages if m["payload"].get("stream_id") in ("b", "c")], [])
        summary = [m["payload"] for m in messages if m["topic"] == "job/summary"][0]
        self.assertEqual({s["stream_id"]: s["status"] for s in summary["streams"]}, {"a": "stopped", "b": "pending", "c": "pending"})
        again = Run(config, args=["--resume"])
        self.assertEqual(again.wait(timeout=120), 0, again.stderr[-3000:])
        messages = read_jsonl(self.jsonl)
        for sid in ("a", "b", "c"):
            self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == f"results/{sid}"], list(range(300)), sid)


class AShareThatStopsAnswering(E2ETest):
    """Files on a share (tests/e2e/hanging_share.py, a FUSE file system) whose requests all wait while
    it is switched off, as a hard-mounted NFS share's do when its server is gone."""

    def setUp(self):
        super().setUp()
        self.jsonl = os.path.join(self.dir, "results.jsonl")
        self.backing = os.path.join(self.dir, "backing")
        self.share = os.path.join(self.dir, "share")
        self.switch = os.path.join(self.dir, "switched-off")
        os.makedirs(self.backing)
        os.makedirs(self.share)
        self.fs = None
        try:
            import fusepy  # noqa: F401 (python3-fusepy)
        except ImportError:
            self.skipTest("fusepy (Debian's python3-fusepy) is not installed")
        if not os.path.exists("/dev/fuse"):
            self.skipTest("no /dev/fuse here")
        self.fs = subprocess.Popen([sys.executable, HANGING_SHARE, self.backing, self.share, self.switch],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        while time.time() < deadline and not os.path.ismount(self.share) and self.fs.poll() is None:
            time.sleep(0.05)
        if not os.path.ismount(self.share):
            self.fs.kill()
            error = self.fs.communicate()[1]
            self.fs = None
            self.skipTest(f"cannot mount a FUSE file system here (root or the fuse group needed): {error[-300:]}")

    def tearDown(self):
        if os.path.exists(self.switch):
            os.remove(self.switch)  # every request waiting on the share goes on
        self.end_runs()  # before the share goes: a job still reading it
        if self.fs:
            self.fs.terminate()  # unmounts
            try:
                self.fs.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.fs.kill()
            subprocess.run(["umount", "-l", self.share], stderr=subprocess.DEVNULL)
        super().tearDown()

    def wait_for(self, what, condition, timeout=30, run=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if condition():
                return
            time.sleep(0.1)
        self.fail(f"{what} did not happen in {timeout} s" + (f"; its log:\n{run.stderr_so_far()[-4000:]}" if run else ""))

    def ended(self):
        return {m["payload"]["stream_id"] for m in read_jsonl(self.jsonl)
                if m["topic"].startswith("events/") and m["payload"]["event"] == "eos"
                and m["payload"]["message"] != "stopped"}

    def results(self, sid):
        return sum(m["topic"] == f"results/{sid}" for m in read_jsonl(self.jsonl))

    @staticmethod
    def infer_restarted(run, old_pid):
        """Whether the job has a `vapipe stage infer` other than `old_pid` (started again)."""
        return any(len(argv) >= 3 and argv[1] == "stage" and argv[2] == "infer" and pid != old_pid
                   for pid, argv in children_of(run.proc.pid))

    @staticmethod
    def status_of(metrics):
        return subprocess.run([VAPIPE, "status", metrics], capture_output=True, text=True, timeout=30).stdout

    def run_reading_the_share(self, streams, **sections):
        """`vapipe run` of `streams` (the 900-frame remote.mkv on the share among them), switched off
        once 50 of its frames have results: a read of it then waits on the share."""
        make_clip(os.path.join(self.backing, "remote.mkv"), "ball", 900, 160, 120)
        config, _ = write_config(self.dir, streams, publish={"wait_for_subscribers": 0},
                                 batch={"max_batch_size": 1, "max_delay_ms": 0}, **sections)
        run = Run(config)
        self.wait_for("50 results of the file on the share", lambda: self.results("remote") >= 50, 60, run=run)
        open(self.switch, "w").close()
        return config, run

    def test_a_share_that_stops_answering_holds_up_no_restart_and_no_stop(self):
        """The share stops answering while the job watches it: a look waits on it. Meanwhile a stage
        crashes: the archive job restarts whole (before, vapipe run's loop waited in the look, and
        with it the restart); `vapipe status` says the look has been running; SIGINT stops the job.
        Once the share answers again, `--resume` classifies the file that came while it hung."""
        make_clip(os.path.join(self.backing, "a.mkv"), "ball", 20, 160, 120)
        metrics = f"127.0.0.1:{free_port()}"
        config, _ = write_config(self.dir, [{"glob": "share/*.mkv", "watch_s": 0.3, "settle_s": 0}],
                                 publish={"wait_for_subscribers": 0, "metrics_address": metrics})
        run = Run(config)
        stages = dict(run.watch_stages())
        self.wait_for("the end of stream 'a'", lambda: "a" in self.ended(), 60)
        open(self.switch, "w").close()
        self.wait_for("a look waiting on the share", lambda: os.path.exists(self.switch + ".waits"))
        make_clip(os.path.join(self.backing, "b.mkv"), "smpte", 30, 160, 120)  # seen once it answers

        os.kill(stages["infer"], signal.SIGKILL)
        self.wait_for("the job's restart", lambda: self.infer_restarted(run, stages["infer"]), run=run)
        self.assertIn("restarting the job in 1 s", run.stderr_so_far())
        self.wait_for("vapipe status saying the look runs", lambda: "a look RUNNING FOR" in self.status_of(metrics),
                      run=run)
        self.assertIn("(the share does not answer?)", self.status_of(metrics))
        self.assertTrue(os.path.exists(self.switch + ".waits"))  # the share has not answered since

        run.signal(signal.SIGINT)
        self.wait_for("the job's end", lambda: "job 'e2e' finished" in run.stderr_so_far(), run=run)
        os.remove(self.switch)
        self.assertEqual(run.wait(timeout=30), 0, run.stderr[-3000:])
        self.assertNotIn("drain timeout", run.stderr)

        again = Run(config, args=["--resume"])
        self.wait_for("the end of stream 'b'", lambda: "b" in self.ended(), 60)
        again.signal(signal.SIGINT)
        self.assertEqual(again.wait(timeout=60), 0, again.stderr[-3000:])
        messages = read_jsonl(self.jsonl)
        for sid, frames in (("a", 20), ("b", 30)):
            self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == f"results/{sid}"],
                             list(range(frames)), sid)

    def test_a_file_whose_read_hangs_is_said_and_goes_on_once_the_share_answers(self):
        """An archive job (not watching) of a file on the share and one on a local disk: the share stops
        answering while its file is read. The local file is classified to its end meanwhile; the other
        is said (no frame from its file for 3 x stall_timeout_s), and once the share answers it goes on
        from where it was: every frame of both once, exit 0."""
        os.makedirs(os.path.join(self.dir, "local"))
        make_clip(os.path.join(self.dir, "local", "local.mkv"), "smpte", 300, 160, 120)
        _, run = self.run_reading_the_share([{"glob": "share/*.mkv"}, {"glob": "local/*.mkv"}],
                                            ingest={"stall_timeout_s": 1})
        self.wait_for("the local file's end", lambda: "local" in self.ended(), 60, run=run)
        said = "stream 'remote' (file://" + os.path.join(self.share, "remote.mkv") + "): no frame from its file for 3 s"
        self.wait_for("the hung read said", lambda: said in run.stderr_so_far(), 30, run=run)
        self.assertTrue(os.path.exists(self.switch + ".waits"), "the file was read whole before the share went")
        before = self.results("remote")
        self.assertLess(before, 900)
        os.remove(self.switch)
        self.assertEqual(run.wait(timeout=120), 0, run.stderr[-3000:])
        self.assertIn("stream 'remote': frames from its file again, after ", run.stderr)
        messages = read_jsonl(self.jsonl)
        for sid, frames in (("remote", 900), ("local", 300)):
            self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == f"results/{sid}"],
                             list(range(frames)), sid)

    def test_a_stop_while_a_files_read_hangs_ends_that_stream_at_once_and_resume_goes_on(self):
        """The share stops answering while its file is read, and the job is stopped (SIGINT): the
        stream ends at its last frame sent, without the drain timeout (before, every stage waited for
        it, then ingest was killed: exit 2); once the share answers, --resume reads the rest."""
        config, run = self.run_reading_the_share([{"glob": "share/*.mkv"}])
        self.wait_for("the read waiting on the share", lambda: os.path.exists(self.switch + ".waits"), 30, run=run)
        time.sleep(1)  # what was read before is sent
        before = self.results("remote")
        run.signal(signal.SIGINT)
        self.wait_for("the job's end", lambda: "job 'e2e' stopped before its end" in run.stderr_so_far(), 30, run=run)
        log = run.stderr_so_far()  # ended while the share still hangs, and not by the drain timeout
        self.assertNotIn("drain timeout", log)
        self.assertIn("stream 'remote' (file://" + os.path.join(self.share, "remote.mkv") + "): its file's read has "
                      "not returned 2 s after the stop (a share that does not answer?): the stream ends at frame ", log)
        os.remove(self.switch)
        self.assertEqual(run.wait(timeout=60), -signal.SIGINT, run.stderr[-3000:])
        self.assertLess(self.results("remote"), 900)
        again = Run(config, args=["--resume"])
        self.assertEqual(again.wait(timeout=120), 0, again.stderr[-3000:])
        self.assertIn("--resume: stream 'remote' goes on from frame", again.stderr)
        self.assertGreaterEqual(before, 50)
        messages = read_jsonl(self.jsonl)
        self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == "results/remote"], list(range(900)))

    def test_a_live_jobs_reload_from_a_share_that_stops_answering_holds_up_no_restart_and_no_stop(self):
        """A live job's config is on the share. The share stops answering and the job gets SIGHUP: the
        re-read waits on it. Meanwhile infer crashes: its lane starts again (its stages parse the job's
        own copy of the config; before, vapipe run's loop waited in the re-read, and with it the
        restart) and 'a' goes on; once the share answers, the reload adds 'b'. The share stops again,
        SIGHUP, SIGINT: the job ends while the re-read still waits, and 'c' is never added."""
        metrics = f"127.0.0.1:{free_port()}"
        config, _ = write_config(self.dir, [("a", live_test_uri("ball"))], job={"mode": "live"},
                                 publish={"wait_for_subscribers": 0, "metrics_address": metrics})
        backing = os.path.join(self.backing, "job.yaml")
        os.rename(config, backing)
        on_share = os.path.join(self.share, "job.yaml")
        run = Run(on_share)
        stages = dict(run.watch_stages())
        self.wait_for("10 results of a", lambda: self.results("a") >= 10, 60, run=run)

        def add_stream(sid, pattern):
            with open(backing) as f:
                cfg = json.load(f)
            cfg["streams"].append(stream_entry((sid, live_test_uri(pattern))))
            with open(backing, "w") as f:
                json.dump(cfg, f, indent=1)
        add_stream("b", "smpte")
        open(self.switch, "w").close()
        run.signal(signal.SIGHUP)
        self.wait_for("the re-read waiting on the share", lambda: os.path.exists(self.switch + ".waits"), run=run)
        os.kill(stages["infer"], signal.SIGKILL)
        self.wait_for("infer's restart", lambda: self.infer_restarted(run, stages["infer"]), run=run)
        before = self.results("a")
        self.wait_for("a going on after its lane's restart", lambda: self.results("a") >= before + 10, 60, run=run)
        self.assertEqual(self.results("b"), 0)
        reloading = "a reload (SIGHUP) RUNNING FOR"
        self.wait_for("vapipe status saying the re-read runs", lambda: reloading in self.status_of(metrics), run=run)
        self.assertIn("its config is still being read (the share does not answer?)", self.status_of(metrics))
        self.assertNotIn("added 'b'", run.stderr_so_far())  # the share has not answered since
        os.remove(self.switch)
        self.wait_for("results of b", lambda: self.results("b") >= 5, 60, run=run)
        self.wait_for("vapipe status no longer saying a re-read runs", lambda: reloading not in self.status_of(metrics),
                      run=run)

        os.remove(self.switch + ".waits")
        add_stream("c", "pinwheel")
        open(self.switch, "w").close()
        run.signal(signal.SIGHUP)
        self.wait_for("the second re-read waiting on the share", lambda: os.path.exists(self.switch + ".waits"),
                      run=run)
        run.signal(signal.SIGINT)
        self.wait_for("the job's end", lambda: "job 'e2e' finished" in run.stderr_so_far(), run=run)
        os.remove(self.switch)
        self.assertEqual(run.wait(timeout=30), 0, run.stderr[-3000:])
        err = run.stderr
        self.assertIn("reload (SIGHUP): " + on_share + ": added 'b'; removed none; 2 streams now", err)
        self.assertNotIn("added 'c'", err)
        self.assertEqual(self.results("c"), 0)
        self.assertNotIn("drain timeout", err)
