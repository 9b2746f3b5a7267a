"""Live jobs: a clean stop on SIGINT, a crashed stage that is named, and one that restarts the job."""
import os
import signal
import time
import unittest

from e2e.common import E2ETest, Run, Subscriber, WebhookReceiver, events_by_stream, results_by_stream, write_config


def live_streams():
    return [("live-a", "test://ball?frames=0&width=320&height=240&fps=30&live=true"),
            ("live-b", "test://smpte?frames=0&width=640&height=480&fps=30&live=true")]


class Shutdown(E2ETest):
    def wait_for_results(self, path, count, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    if sum('"results/' in line for line in f) >= count:
                        return
            time.sleep(0.1)
        self.fail(f"fewer than {count} results in {timeout} s")

    def test_sigint_drains_and_exits_zero_with_streams_stopped(self):
        # A webhook on the events: the stream ends said at the stop reach it before publish exits.
        receiver = WebhookReceiver()
        self.addCleanup(receiver.close)
        config, endpoint = write_config(self.dir, live_streams(), job={"mode": "live"},
                                        publish={"webhooks": [{"url": f"http://127.0.0.1:{receiver.port}/hook",
                                                               "topics": ["events/"]}]})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.assertEqual(len(run.watch_stages()), 5)
        self.wait_for_results(self.subscriber.path, 20)
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        messages = self.subscriber.wait(timeout=30)
        events = events_by_stream(messages)
        results = results_by_stream(messages)
        for sid in ("live-a", "live-b"):
            self.assertEqual(events[sid][-1]["event"], "eos")
            self.assertEqual(events[sid][-1]["message"], "stopped")
            # Whatever ingest emitted before stopping was published: none lost in the drain.
            emitted = events[sid][-1]["frames"]
            self.assertEqual(len(results[sid]), emitted)
            seqs = [r["seq"] for r in results[sid]]
            self.assertEqual(seqs, sorted(seqs))
            self.assertEqual(len(seqs) + events[sid][-1]["dropped"], seqs[-1] + 1)
        hooked = [r["json"] for r in receiver.received]
        self.assertEqual(hooked, [{"topic": m["topic"], "payload": m["payload"]} for m in messages
                                  if m["topic"].startswith("events/")])
        self.assertEqual(sorted((h["topic"], h["payload"]["event"]) for h in hooked),
                         [("events/live-a", "eos"), ("events/live-a", "started"),
                          ("events/live-b", "eos"), ("events/live-b", "started")])
        self.assert_no_leftovers(run)

    def test_a_killed_stage_is_named_and_stops_the_job(self):
        config, endpoint = write_config(self.dir, live_streams(), job={"mode": "live", "max_restarts": 0})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        stages = run.watch_stages()
        self.wait_for_results(self.subscriber.path, 5)
        os.kill(stages["preprocess"], signal.SIGKILL)
        code = run.wait(timeout=60)
        self.assertEqual(code, 2)
        self.assertIn(f"stage preprocess (pid {stages['preprocess']}) failed: killed by signal 9", run.stderr)
        self.assertIn("(job.max_restarts is 0)", run.stderr)
        self.assert_no_leftovers(run)

    def test_a_stage_that_crashes_restarts_its_lane_and_results_go_on(self):
        config, endpoint = write_config(self.dir, live_streams(), job={"mode": "live"})
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        stages = run.watch_stages()
        self.wait_for_results(self.subscriber.path, 5)
        os.kill(stages["infer"], signal.SIGKILL)
        with open(self.subscriber.path) as f:
            before = sum('"results/' in line for line in f)
        self.wait_for_results(self.subscriber.path, before + 60)  # from the restarted stages
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertIn(f"stage infer (pid {stages['infer']}) failed: killed by signal 9 (Killed); restarting the lane "
                      "(ingest, preprocess, batch and infer; streams 'live-a', 'live-b') in 1 s (restart 1 of at most "
                      "3 in a row); the rest of the job goes on", run.stderr)
        self.assertEqual(run.stderr.count("started stage infer"), 2)
        self.assertEqual(run.stderr.count("started stage publish"), 1)  # publish went on
        messages = self.subscriber.wait(timeout=30)
        events = events_by_stream(messages)
        results = results_by_stream(messages)
        for sid, _ in live_streams():
            kinds = [e["event"] for e in events[sid]]
            self.assertEqual(kinds, ["started", "reconnecting", "resumed", "eos"], sid)
            seqs = [r["seq"] for r in results[sid]]
            self.assertEqual(seqs, sorted(set(seqs)), f"{sid}: seq goes forward over the restart")
        summary = [m["payload"] for m in messages if m["topic"] == "job/summary"]
        self.assertEqual([s["restarts"] for s in summary[0]["streams"]], [1, 1])
        self.assert_no_leftovers(run)


if __name__ == "__main__":
    unittest.main()
