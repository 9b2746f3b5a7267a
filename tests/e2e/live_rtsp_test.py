"""Live cameras: two real RTSP servers on loopback, a live job classifying both, then Ctrl-C."""
import os
import signal
import subprocess
import time
import unittest

from e2e.common import E2ETest, Run, Subscriber, events_by_stream, free_port, results_by_stream, write_config

RTSP_SERVER = os.environ.get("VAPIPE_RTSP_SERVER", "build/tests/vapipe_rtsp_test_server")


class LiveRtsp(E2ETest):
    def start_camera(self, pattern):
        port = free_port()
        proc = subprocess.Popen([RTSP_SERVER, str(port), pattern, "640", "360"], stdout=subprocess.PIPE, text=True)
        uri = proc.stdout.readline().strip()
        self.assertTrue(uri.startswith("rtsp://"), f"RTSP test server did not start on port {port}")
        self.addCleanup(lambda: (proc.terminate(), proc.wait(), proc.stdout.close()))
        return uri

    def test_two_rtsp_cameras_are_classified_live_and_stop_cleanly(self):
        cams = {"door": ("smpte", self.start_camera("smpte")), "yard": ("pinwheel", self.start_camera("pinwheel"))}
        config, endpoint = write_config(self.dir, [(sid, uri) for sid, (_, uri) in cams.items()])
        self.subscriber = Subscriber(endpoint, self.dir)
        run = Run(config)
        self.assertEqual(len(run.watch_stages()), 5)
        deadline = time.time() + 60
        while time.time() < deadline:
            with open(self.subscriber.path) as f:
                lines = f.readlines()
            counts = {sid: sum(f'"results/{sid}"' in line for line in lines) for sid in cams}
            if min(counts.values()) >= 30:
                break
            time.sleep(0.2)
        run.signal(signal.SIGINT)
        code = run.wait(timeout=60)
        self.assertEqual(code, 0, run.stderr[-3000:])
        self.assertIn("live mode", run.stderr)
        messages = self.subscriber.wait(timeout=30)
        results, events = results_by_stream(messages), events_by_stream(messages)
        for sid, (pattern, uri) in cams.items():
            got = results.get(sid, [])
            self.assertGreaterEqual(len(got), 30, f"camera {sid}")
            seqs = [r["seq"] for r in got]
            self.assertEqual(seqs, sorted(set(seqs)), f"camera {sid}: results out of order or twice")
            correct = sum(r["label"] == pattern for r in got)
            self.assertGreaterEqual(correct / len(got), 0.95, f"camera {sid}: {correct}/{len(got)} named '{pattern}'")
            self.assertEqual([e["event"] for e in events[sid]], ["started", "eos"])
            self.assertEqual(events[sid][-1]["message"], "stopped")
            self.assertEqual(events[sid][0]["uri"], uri)
            self.assertLess(sum(r["latency_ms"]["total"] for r in got) / len(got), 2000)
        self.assert_no_leftovers(run)


if __name__ == "__main__":
    unittest.main()
