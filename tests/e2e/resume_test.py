"""Resuming an archive job after a crash: every process of `vapipe run` is killed (SIGKILL) halfway,
then `vapipe run CONFIG --resume` goes on from the job's JSON-lines file. The file ends up with every
frame's result exactly once, in order, and each stream's events once."""
import json
import os
import signal
import subprocess
import time

from e2e.common import VAPIPE, E2ETest, Run, WebhookReceiver, make_clip, write_config

# Finite test sources (id, pattern, frames): long enough that a kill lands mid-job.
STREAMS = [("ball", "ball", 600), ("snow", "snow", 450), ("smpte", "smpte", 300)]


def kill_whole_job(run, stages):
    """SIGKILL to every process of the job: publish first, so that nothing is written after the kill
    (not even the "stopped" ends a dying supervisor's stages would write); the supervisor last."""
    for pid in [stages[s] for s in ("publish", "ingest", "preprocess", "batch", "infer") if s in stages] + [run.proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    run.wait()  # its log, to run.stderr


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class Resume(E2ETest):
    def write_job(self, publish=None, **sections):
        config, _ = write_config(self.dir, [(sid, f"test://{p}?frames={n}&width=320&height=240") for sid, p, n in STREAMS],
                                 publish={"wait_for_subscribers": 0, **(publish or {})}, **sections)
        return config, os.path.join(self.dir, "results.jsonl")

    def run_resume(self, config):
        proc = subprocess.run([VAPIPE, "run", config, "--resume"], capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout, proc.stderr

    def test_a_killed_job_resumes_with_every_frame_exactly_once(self):
        config, jsonl = self.write_job()
        run = Run(config)
        stages = run.watch_stages()
        deadline = time.time() + 60
        while time.time() < deadline:  # kill once about a third of the results are in the file
            if os.path.exists(jsonl) and sum(1 for _ in open(jsonl)) > 450:
                break
            time.sleep(0.05)
        kill_whole_job(run, stages)  # killed, it left its pools and run folder (pipeline/stale_jobs.h)
        with open(jsonl, "a") as f:
            f.write('{"topic":"results/ball","payl')  # a line cut short, as a crash mid-write leaves it
        before = sum(1 for m in read_jsonl_lenient(jsonl) if m["topic"].startswith("results/"))
        self.assertGreater(before, 0)
        self.assertLess(before, sum(n for *_, n in STREAMS), "the job finished before it was killed")

        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn("--resume: ", err)
        self.assertIn("an incomplete last line", err)
        # The next `vapipe run` on the host (this one, or a parallel test's) removed them.
        self.assertEqual(run.leftovers(), [], "what the killed job left")
        messages = read_jsonl(jsonl)  # every line whole again
        for sid, pattern, frames in STREAMS:
            results = [m["payload"] for m in messages if m["topic"] == f"results/{sid}"]
            self.assertEqual([r["seq"] for r in results], list(range(frames)), f"stream {sid}")
            correct = sum(r["label"] == pattern for r in results)
            self.assertGreaterEqual(correct / frames, 0.95, f"stream {sid}: {correct}/{frames} named '{pattern}'")
            events = [m["payload"]["event"] for m in messages if m["topic"] == f"events/{sid}"]
            self.assertEqual(events, ["started", "eos"], f"stream {sid}")
        summaries = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual(len(summaries), 1)
        summary = summaries[0]
        self.assertTrue(summary["resumed"])
        self.assertEqual(summary["frames"], sum(n for *_, n in STREAMS))
        self.assertEqual(summary["frames_this_run"], summary["frames"] - before)
        self.assertEqual(messages[-1]["topic"], "job/summary")
        # Its top labels count every run's results, as the file holds them.
        for stream in summary["streams"]:
            sid, top = stream["stream_id"], stream["top_labels"][0]
            in_file = sum(1 for m in messages if m["topic"] == f"results/{sid}" and m["payload"]["label"] == top["label"])
            self.assertEqual(top["frames"], in_file, sid)
            self.assertEqual(top["label"], dict((s, p) for s, p, _ in STREAMS)[sid])

        # Resuming a job that is complete does nothing.
        size = os.path.getsize(jsonl)
        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn("is already complete in " + jsonl, err)
        self.assertEqual(os.path.getsize(jsonl), size)

        # Its summary file missing (the disk was full when the run ended): written from the results'.
        summary_file = os.path.join(self.dir, "summary.json")
        os.remove(summary_file)
        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        with open(summary_file) as f:
            self.assertEqual(json.load(f)["frames"], summary["frames"])
        # One whose summary is missing (the disk filled as it was written) gets it, once, and no result
        # again.
        with open(jsonl) as f:
            lines = f.readlines()
        with open(jsonl, "w") as f:
            f.writelines(lines[:-1])
        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        with open(jsonl) as f:
            again = f.readlines()
        self.assertEqual(again[:-1], lines[:-1])
        self.assertEqual(json.loads(again[-1])["topic"], "job/summary")
        self.assertEqual(json.loads(again[-1])["payload"]["frames"], summary["frames"])

    def test_a_killed_job_with_streams_of_one_source_resumes_each_of_them_exactly_once(self):
        """streams[].source: a clip decoded once for three streams (itself and two regions). Killed
        mid-job, the three have different counts in the file (publish writes them as they come); the
        resumed reader goes on from the least of them (sought, by the timestamp of its last result), and
        each stream takes only the frames past its own."""
        clip = os.path.join(self.dir, "cam.mkv")
        make_clip(clip, "ball", 900, 320, 240)
        config, _ = write_config(self.dir, [("cam", clip), {"id": "left", "source": "cam", "roi": [0, 0, 0.5, 1]},
                                            {"id": "right", "source": "cam", "roi": [0.5, 0, 0.5, 1]}],
                                 publish={"wait_for_subscribers": 0})
        jsonl = os.path.join(self.dir, "results.jsonl")
        run = Run(config)
        stages = run.watch_stages()
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(jsonl) and sum(1 for _ in open(jsonl)) > 900):
            time.sleep(0.05)
        kill_whole_job(run, stages)
        counts = {sid: sum(1 for m in read_jsonl_lenient(jsonl) if m["topic"] == f"results/{sid}")
                  for sid in ("cam", "left", "right")}
        self.assertLess(max(counts.values()), 900, "the job finished before it was killed")

        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        least = min(counts.values())
        if max(counts.values()) > least:
            self.assertIn(f"stream 'cam': resumed from frame {least}, the least of its group's results (3)", err)
        self.assertIn("stream 'cam': sought to a keyframe before", err)
        messages = read_jsonl(jsonl)
        pts = {}
        for sid in ("cam", "left", "right"):
            results = [m["payload"] for m in messages if m["topic"] == f"results/{sid}"]
            self.assertEqual([r["seq"] for r in results], list(range(900)), f"stream {sid} (had {counts[sid]})")
            pts[sid] = [r["pts_ms"] for r in results]
            events = [m["payload"] for m in messages if m["topic"] == f"events/{sid}"]
            self.assertEqual([e["event"] for e in events], ["started", "eos"], f"stream {sid}")
            self.assertEqual(events[-1]["frames"], 900, sid)
        self.assertEqual(pts["left"], pts["cam"])
        self.assertEqual(pts["right"], pts["cam"])

    def test_a_stopped_job_resumes_where_its_streams_were_stopped(self):
        """Ctrl-C writes "stopped" ends and a summary: the file is cut at the first of them. With two
        lanes (two ingest processes read the same plan). With segments: the segments open at the stop go
        on in the resumed run, each `began` with one `ended`, as `vapipe segments` finds them in the file
        (the stop's `ended` was kept, and the resumed run began the label again; found 2026-12-07)."""
        config, jsonl = self.write_job(lanes_per_device=2, publish={"segments_min_frames": 3})
        run = Run(config)
        run.watch_lanes(expected=9)
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(jsonl) and sum(1 for _ in open(jsonl)) > 300):
            time.sleep(0.05)
        run.signal(signal.SIGINT)
        # Drained and summed up, then ended by the signal, as a shell expects of an interrupted command
        # (a loop of jobs stops; a Kubernetes Job's evicted pod is not taken for a finished one).
        self.assertEqual(run.wait(timeout=60), -signal.SIGINT, run.stderr[-3000:])
        self.assertRegex(run.stdout, r"job '[^']+' stopped before its end: \d+ of 3 streams did not reach theirs; "
                                     r"`vapipe run .+ --resume` goes on from where they were")
        self.assertNotIn("second signal", run.stderr)
        stopped = read_jsonl(jsonl)
        self.assertIn("stopped", [m["payload"].get("message") for m in stopped if m["topic"].startswith("events/")])
        summary = [m["payload"] for m in stopped if m["topic"] == "job/summary"]
        self.assertGreater(summary[-1]["unfinished_streams"], 0)

        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn("was stopped there", err)
        messages = read_jsonl(jsonl)
        for sid, _, frames in STREAMS:
            results = [m["payload"]["seq"] for m in messages if m["topic"] == f"results/{sid}"]
            self.assertEqual(results, list(range(frames)), f"stream {sid}")
            events = [m["payload"]["event"] for m in messages if m["topic"] == f"events/{sid}"]
            self.assertEqual(events, ["started", "eos"], f"stream {sid}")
        self.assertEqual([m["topic"] for m in messages].count("job/summary"), 1)
        # Segments: each began once and ended once, and the runs are the file's results' own.
        segments = [m["payload"] for m in messages if m["topic"].startswith("segments/")]
        key = lambda s: (s["stream_id"], s["label"], s["start_seq"])
        began = sorted(key(s) for s in segments if s["event"] == "began")
        ended = sorted((key(s) + (s["end_seq"], s["frames"])) for s in segments if s["event"] == "ended")
        self.assertTrue(began, segments)
        self.assertEqual(began, [e[:3] for e in ended])
        cli = subprocess.run([VAPIPE, "segments", jsonl, "--min-frames", "3", "--bridge", "--json"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        from_results = sorted((s["stream_id"], s["label"], s["start_seq"], s["end_seq"], s["frames"])
                              for s in map(json.loads, cli.stdout.splitlines()))
        self.assertEqual(ended, from_results)

    def test_a_stopped_and_resumed_jobs_webhook_gets_each_result_once_in_order(self):
        """Ctrl-C, then --resume: the file is cut at the first stream's "stopped" end and the results
        after it are redone. The webhook took some of those before the stop: the resumed run sends it
        what it had not taken, and not what it had (seq went back at Redis, 7 to 16 twice a stream;
        found 2026-12-07). Only the stopped run's ends and summary stay as they were sent."""
        receiver = WebhookReceiver()
        self.addCleanup(receiver.close)
        hook = {"url": f"http://127.0.0.1:{receiver.port}/hook", "topics": ["results/", "events/"],
                "queue_policy": "block"}
        config, jsonl = self.write_job(publish={"webhooks": [hook]})
        run = Run(config)
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(jsonl) and sum(1 for _ in open(jsonl)) > 300):
            time.sleep(0.05)
        run.signal(signal.SIGINT)
        self.assertEqual(run.wait(timeout=60), -signal.SIGINT, run.stderr[-3000:])
        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertRegex(err, r"\((\d+) complete lines after it are redone\)")
        got = [(r["topic"], r["json"]["payload"]) for r in receiver.received]
        for sid, _, frames in STREAMS:
            seqs = [p["seq"] for t, p in got if t == f"results/{sid}"]
            self.assertEqual(seqs, list(range(frames)), f"stream {sid}: each result once, in order")
            events = [p["event"] for t, p in got if t == f"events/{sid}" and p.get("message") != "stopped"]
            self.assertEqual(events, ["started", "eos"], f"stream {sid}")

    def test_a_stage_that_crashes_mid_job_restarts_it_from_the_jsonl_file(self):
        """No --resume: the supervisor itself restarts a job whose stage crashed, and an archive job
        then goes on from its JSON-lines file."""
        config, jsonl = self.write_job()
        run = Run(config)
        stages = run.watch_stages()
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(jsonl) and sum(1 for _ in open(jsonl)) > 300):
            time.sleep(0.05)
        os.kill(stages["infer"], signal.SIGKILL)
        code = run.wait(timeout=300)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertIn(f"stage infer (pid {stages['infer']}) failed: killed by signal 9 (Killed); restarting the job in 1 s "
                      f"(restart 1 of at most 3 in a row), going on from {jsonl}", run.stderr)
        self.assertIn("--resume: stream 'ball' goes on from frame", run.stderr)
        messages = read_jsonl(jsonl)
        for sid, pattern, frames in STREAMS:
            results = [m["payload"] for m in messages if m["topic"] == f"results/{sid}"]
            self.assertEqual([r["seq"] for r in results], list(range(frames)), f"stream {sid}")
            events = [m["payload"]["event"] for m in messages if m["topic"] == f"events/{sid}"]
            self.assertEqual(events, ["started", "eos"], f"stream {sid}")
        summaries = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual(len(summaries), 1)
        self.assertTrue(summaries[0]["resumed"])
        self.assertEqual(summaries[0]["frames"], sum(n for *_, n in STREAMS))

    def test_a_crash_restart_sends_a_block_webhook_what_the_crashed_run_had_not_delivered(self):
        """The webhook stalls while infer crashes: the crashed run's publish is killed holding messages of
        lines already in the file. The restarted job sends the webhook the lines after its delivery mark
        first, each with the Idempotency-Key of its first try: the receiver has every message of the file,
        the keys telling the tries it got twice. (Before: the file's lines counted as delivered; 193 of 603
        never came.)"""
        receiver = WebhookReceiver()
        self.addCleanup(receiver.close)
        hook = {"url": f"http://127.0.0.1:{receiver.port}/hook", "topics": ["results/", "events/", "job/summary"],
                "queue_policy": "block", "timeout_s": 30}
        config, jsonl = self.write_job(publish={"webhooks": [hook]})
        run = Run(config)
        self.addCleanup(receiver.answering.set)
        stages = run.watch_stages()
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(jsonl) and sum(1 for _ in open(jsonl)) > 300):
            time.sleep(0.05)
        receiver.answering.clear()  # its requests wait: what publish holds is not delivered
        time.sleep(0.5)
        os.kill(stages["infer"], signal.SIGKILL)
        deadline = time.time() + 30
        while time.time() < deadline and "restarting the job" not in run.stderr_so_far():
            time.sleep(0.05)
        time.sleep(1.0)
        receiver.answering.set()
        code = run.wait(timeout=300)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertRegex(run.stderr, r"publish\.webhooks\[0\] \(http://127\.0\.0\.1:\d+\) had not taken lines \d+\.\.\d+ "
                                     r"of .*results\.jsonl when the job stopped")
        lines = read_jsonl(jsonl)
        self.assertEqual([m["payload"]["seq"] for m in lines if m["topic"] == "results/ball"], list(range(600)))
        with open(os.path.join(self.dir, ".results.jsonl.sinks")) as f:
            marks = json.load(f)
        (key,) = marks["settled"].keys()  # "webhook <a hash of its url>"
        wanted = {f'"{marks["run_id"]}-{key.split()[1]}-{n}"': (m["topic"], m["payload"]) for n, m in enumerate(lines, 1)}
        got = {}
        for r in receiver.received:
            self.assertIn(r["key"], wanted, "a message of no line of the file")
            self.assertEqual((r["topic"], r["json"]["payload"]), wanted[r["key"]], f"message {r['key']}")
            got[r["key"]] = r
        self.assertEqual(len(got), len(wanted), "messages of the file the webhook never got")
        self.assertEqual(list(marks["settled"].values()), [len(lines)])

    def test_resume_of_a_complete_job_sends_its_sinks_what_they_had_not_taken(self):
        """A block webhook down at the job's end: the job exits 7, its results file whole. Once the
        receiver is back, `vapipe run --resume` sends it what it had not taken (the file's lines after
        its delivery mark), and exits 0; the file is not written."""
        receiver = WebhookReceiver()
        self.addCleanup(receiver.close)
        hook = {"url": f"http://127.0.0.1:{receiver.port}/hook", "topics": ["events/", "job/summary"],
                "queue_policy": "block"}
        config, jsonl = self.write_job(publish={"webhooks": [hook]}, job={"stage_timeout_s": 4})
        receiver.refusing.set()
        run = Run(config)
        self.assertEqual(run.wait(timeout=300), 7, run.stderr[-3000:])
        self.assertEqual(receiver.received, [])
        with open(jsonl) as f:
            before = f.read()
        receiver.refusing.clear()
        code, out, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn("is already complete", err)
        self.assertRegex(err, r"publish\.webhooks\[0\] \(http://127\.0\.0\.1:\d+\) had not taken lines 1\.\.\d+ of ")
        with open(jsonl) as f:
            self.assertEqual(f.read(), before)
        wanted = [(m["topic"], m["payload"]) for m in read_jsonl(jsonl) if
                  (m["topic"].startswith("events/") or m["topic"] == "job/summary")]
        self.assertEqual([(r["topic"], r["json"]["payload"]) for r in receiver.received], wanted)
        code, _, err = self.run_resume(config)  # nothing left to send: no connection, exit 0
        self.assertEqual(code, 0, err[-3000:])
        self.assertEqual(len(receiver.received), len(wanted))

    def test_a_second_job_on_the_same_results_file_is_refused_while_the_first_runs(self):
        """Two jobs appending to one JSON-lines file (a cron run overlapping the last one, a job started
        twice) would break its exactly-once record: the second stops at once, naming the file, and the
        first finishes with every frame once."""
        # Paced at 30 frames a second (live=true), 5 s on any machine: both attempts come while it runs.
        frames = 150
        config, _ = write_config(self.dir, [("long", f"test://ball?frames={frames}&width=320&height=240&live=true")],
                                 job={"mode": "archive"}, publish={"wait_for_subscribers": 0})
        jsonl = os.path.join(self.dir, "results.jsonl")
        run = Run(config)
        deadline = time.time() + 60
        while time.time() < deadline and not (os.path.exists(jsonl) and os.path.getsize(jsonl) > 0):
            time.sleep(0.05)
        for extra in (["--resume"], []):
            second = subprocess.run([VAPIPE, "run", config, *extra], capture_output=True, text=True, timeout=60)
            self.assertEqual(second.returncode, 1, second.stderr[-3000:])
            self.assertIn(f"publish.jsonl_path {jsonl} is being written by another vapipe job", second.stderr)
        self.assertIsNone(run.proc.poll(), "the first job ended before the second ones came: the check proves nothing")
        self.assertEqual(run.wait(timeout=300), 0, run.stderr[-3000:])
        messages = read_jsonl(jsonl)
        results = [m["payload"]["seq"] for m in messages if m["topic"] == "results/long"]
        self.assertEqual(results, list(range(frames)))
        self.assertEqual([m["topic"] for m in messages].count("job/summary"), 1)

    def test_resume_over_a_folder_that_grew_classifies_only_the_new_files(self):
        """The archive workflow of a folder that fills up: run the job again with --resume (from cron,
        say) and only the files that arrived since are classified; the file keeps one summary."""
        folder = os.path.join(self.dir, "archive")
        os.makedirs(folder)
        make_clip(os.path.join(folder, "cam1.mp4"), "ball", 60, 320, 240)
        make_clip(os.path.join(folder, "cam2.mp4"), "smpte", 45, 320, 240)
        config, _ = write_config(self.dir, [{"glob": "archive/*.mp4"}], publish={"wait_for_subscribers": 0})
        jsonl = os.path.join(self.dir, "results.jsonl")
        code, _, err = self.run_resume(config)  # the first run: nothing to resume yet
        self.assertEqual(code, 0, err[-3000:])
        make_clip(os.path.join(folder, "cam3.mp4"), "snow", 30, 320, 240)
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn("--resume: stream 'cam1' done in an earlier run (60 results)", err)
        self.assertIn("--resume: stream 'cam3' goes on from frame 0", err)
        self.assertIn("the summary of a run that ended before the config had the streams that are new in it now", err)
        messages = read_jsonl(jsonl)
        for sid, frames in (("cam1", 60), ("cam2", 45), ("cam3", 30)):
            results = [m["payload"]["seq"] for m in messages if m["topic"] == f"results/{sid}"]
            self.assertEqual(results, list(range(frames)), f"stream {sid}")
        summaries = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual(len(summaries), 1)
        self.assertEqual(summaries[0]["frames"], 135)
        self.assertEqual(summaries[0]["frames_this_run"], 30)
        self.assertEqual(messages[-1]["topic"], "job/summary")

        # A file classified to its end that changes afterwards (a recorder that was still writing it): the
        # next --resume keeps its results, and says so by name with both sizes.
        cam2 = os.path.join(folder, "cam2.mp4")
        before = os.path.getsize(cam2)
        started = [m["payload"] for m in messages if m["topic"] == "events/cam2" and m["payload"]["event"] == "started"]
        self.assertEqual(started[0]["bytes"], before)
        make_clip(cam2, "smpte", 90, 320, 240)
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn(f"--resume: stream 'cam2': {cam2} has changed since it was classified ({before} bytes then, "
                      f"{os.path.getsize(cam2)} now): its 45 results are kept", err)
        self.assertEqual(err.count("has changed since it was classified"), 1, "cam1 and cam3 did not change")
        self.assertIn("is already complete", err)

        # Retention deletes the oldest file: its results stay, the job is still complete, and the next
        # file to arrive is classified as before (the cron run does not break on the missing file).
        os.remove(os.path.join(folder, "cam1.mp4"))
        size = os.path.getsize(jsonl)
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn(f"--resume: stream 'cam1' is in {jsonl} but no longer in the config", err)
        self.assertIn("is already complete in " + jsonl, err)
        self.assertEqual(os.path.getsize(jsonl), size)
        make_clip(os.path.join(folder, "cam4.mp4"), "ball", 20, 320, 240)
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn("its 60 results are kept, and it is not run again", err)
        messages = read_jsonl(jsonl)
        for sid, frames in (("cam1", 60), ("cam2", 45), ("cam3", 30), ("cam4", 20)):
            results = [m["payload"]["seq"] for m in messages if m["topic"] == f"results/{sid}"]
            self.assertEqual(results, list(range(frames)), f"stream {sid}")
            events = [m["payload"]["event"] for m in messages if m["topic"] == f"events/{sid}"]
            self.assertEqual(events, ["started", "eos"], f"stream {sid}")
        summaries = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual(len(summaries), 1)
        self.assertEqual(summaries[0]["frames"], 155)
        self.assertEqual(summaries[0]["frames_this_run"], 20)
        by_id = {st["stream_id"]: st for st in summaries[0]["streams"]}
        self.assertEqual(sorted(by_id), ["cam1", "cam2", "cam3", "cam4"])
        self.assertEqual((by_id["cam1"]["status"], by_id["cam1"]["frames"]), ("done", 60))
        self.assertEqual(by_id["cam1"]["top_labels"][0]["label"], "ball")

    def test_a_stream_gone_from_the_config_before_it_finished_ends_as_removed(self):
        """A job killed while a stream ran, resumed with a config that no longer has that stream (its file
        was deleted, or it was taken out of the list): its results so far stay, it ends with an eos
        "removed from the config", the others finish, and the file is complete for the next resume."""
        # Paced at 30 frames a second (live=true): 5 s, so it is surely running when the job is killed.
        streams = [("long", "test://ball?frames=150&width=320&height=240&live=true"),
                   ("short", "test://smpte?frames=40&width=320&height=240")]
        config, _ = write_config(self.dir, streams, job={"mode": "archive"}, publish={"wait_for_subscribers": 0})
        jsonl = os.path.join(self.dir, "results.jsonl")
        run = Run(config)
        stages = run.watch_stages()
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(jsonl):
                with open(jsonl) as f:
                    if sum('"results/long"' in line for line in f) > 20:
                        break
            time.sleep(0.05)
        kill_whole_job(run, stages)
        kept = [m["payload"]["seq"] for m in read_jsonl_lenient(jsonl) if m["topic"] == "results/long"]
        self.assertGreater(len(kept), 20)
        self.assertLess(len(kept), 150, "the long stream finished before the kill")

        config, _ = write_config(self.dir, streams[1:], job={"mode": "archive"}, publish={"wait_for_subscribers": 0})
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn(f"--resume: stream 'long' is in {jsonl} but no longer in the config", err)
        self.assertIn("it ends now, unfinished, as removed", err)
        messages = read_jsonl(jsonl)
        self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == "results/long"], kept)
        ends = [m["payload"] for m in messages if m["topic"] == "events/long" and m["payload"]["event"] != "started"]
        self.assertEqual([(e["event"], e["message"]) for e in ends], [("eos", "removed from the config")])
        # As an end ingest says: its frames are its results, its uri the one it started with.
        started = [m["payload"] for m in messages if m["topic"] == "events/long" and m["payload"]["event"] == "started"]
        self.assertEqual((ends[0]["frames"], ends[0]["uri"]), (len(kept), started[0]["uri"]))
        self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == "results/short"], list(range(40)))
        summaries = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual(len(summaries), 1)
        by_id = {st["stream_id"]: st for st in summaries[0]["streams"]}
        self.assertEqual((by_id["long"]["status"], by_id["long"]["frames"]), ("removed", len(kept)))
        self.assertEqual((by_id["short"]["status"], by_id["short"]["frames"]), ("done", 40))
        self.assertEqual(summaries[0]["frames"], len(kept) + 40)

        code, _, err = self.run_resume(config)  # nothing is left to do
        self.assertEqual(code, 0, err[-3000:])
        self.assertIn("is already complete in " + jsonl, err)

    def test_a_complete_job_with_a_failed_stream_is_still_failed_when_resumed(self):
        """A file missing when the job ran failed its stream (exit 3); --resume finds every stream ended,
        runs nothing, and exits 3 again, naming it: a script that resumes jobs sees it is not a success."""
        good = os.path.join(self.dir, "good.mkv")
        make_clip(good, "ball", 10, 160, 120)
        late = os.path.join(self.dir, "late.mkv")
        config, _ = write_config(self.dir, [("good", good), ("late", late)], publish={"wait_for_subscribers": 0})
        jsonl = os.path.join(self.dir, "results.jsonl")
        proc = subprocess.run([VAPIPE, "run", config], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 3, proc.stderr[-3000:])
        size = os.path.getsize(jsonl)
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 3, err[-3000:])
        self.assertIn("is already complete in " + jsonl, err)
        self.assertIn("--resume: stream 'late' failed in an earlier run (", err)
        self.assertNotIn("stream 'good' failed", err)
        self.assertEqual(os.path.getsize(jsonl), size)

    def test_an_unfinished_file_replaced_by_another_recording_is_not_gone_on_with(self):
        """Results of part of a file (its started event: the size and head_hash of what was read), the file
        since replaced by another recording under its name: --resume keeps the results, and the stream
        fails naming the file and both sizes instead of following them with the other video's frames."""
        then = os.path.join(self.dir, "then.mkv")
        make_clip(then, "ball", 30, 160, 120)
        cam = os.path.join(self.dir, "cam.mkv")
        make_clip(cam, "snow", 30, 160, 120)
        with open(then, "rb") as f:
            head = f.read(64 * 1024)
        fnv = 14695981039346656037
        for byte in head:
            fnv = ((fnv ^ byte) * 1099511628211) % (1 << 64)
        config, _ = write_config(self.dir, [("cam", cam)], publish={"wait_for_subscribers": 0})
        jsonl = os.path.join(self.dir, "results.jsonl")
        with open(jsonl, "w") as f:
            started = {"schema": "vapipe.event", "stream_id": "cam", "event": "started", "uri": "file://" + cam,
                       "bytes": os.path.getsize(then), "head_hash": f"{fnv:016x}"}
            f.write(json.dumps({"topic": "events/cam", "payload": started}) + "\n")
            for seq in range(5):
                result = {"schema": "vapipe.result", "stream_id": "cam", "seq": seq, "pts_ms": seq * 33.3, "label": "ball",
                          "score": 0.9, "error": None}
                f.write(json.dumps({"topic": "results/cam", "payload": result}) + "\n")
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 3, err[-3000:])
        said = (f"{cam} has changed since it was classified in part ({os.path.getsize(then)} bytes then, "
                f"{os.path.getsize(cam)} now")
        self.assertIn(said, err)
        messages = read_jsonl(jsonl)
        self.assertEqual([m["payload"]["seq"] for m in messages if m["topic"] == "results/cam"], list(range(5)))
        ends = [m["payload"] for m in messages if m["topic"] == "events/cam" and m["payload"]["event"] != "started"]
        self.assertEqual([e["event"] for e in ends], ["error"])
        self.assertIn(said, ends[0]["message"])

    def test_a_results_file_of_other_streams_is_refused(self):
        config, _ = write_config(self.dir, [("a", "test://ball?frames=10&width=320&height=240")],
                                 publish={"wait_for_subscribers": 0})
        jsonl = os.path.join(self.dir, "results.jsonl")
        with open(jsonl, "w") as f:
            f.write('{"topic":"results/x","payload":{"stream_id":"x","seq":0}}\n')
        code, _, err = self.run_resume(config)
        self.assertEqual(code, 1, err[-3000:])
        self.assertIn(f"publish.jsonl_path {jsonl}: none of its streams ('x') is in the config {config}", err)

    def test_resume_needs_the_jsonl_file_setting(self):
        config, _ = write_config(self.dir, [("a", "test://ball?frames=5")], publish={"jsonl_path": ""})
        code, out, err = self.run_resume(config)
        self.assertEqual(code, 1)
        self.assertIn("--resume needs publish.jsonl_path", err)
        self.assertIn(config, err)


def read_jsonl_lenient(path):
    """The complete lines of a file whose last line may be cut short."""
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out
