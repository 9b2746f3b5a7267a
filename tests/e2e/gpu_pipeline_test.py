"""The GPU path end to end (ctest labels gpu and e2e): `vapipe run` with the defaults on a GPU machine
puts a lane on GPU 0 (NVDEC, CUDA preprocessing, fp16 inference; frames and tensors in CUDA IPC device
pools), and every frame of an H.264 clip, an H.265 clip and a synthetic stream is classified exactly
once, in order. Skips without a usable GPU (vapipe doctor's gpu check). No subscriber process: the
results are read from the JSON-lines sink, so pyzmq is not needed on the GPU machine."""
import json
import os
import signal
import subprocess
import time
import unittest

from e2e.common import SOURCE_DIR, VAPIPE, E2ETest, Run, results_by_stream, write_config

MEDIA = os.path.join(SOURCE_DIR, "tests", "media")


def gpu_available():
    p = subprocess.run([VAPIPE, "doctor", "--json"], capture_output=True, text=True, timeout=120)
    try:
        checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    except (ValueError, KeyError):
        return False, "vapipe doctor --json gave no report"
    gpu = checks.get("gpu", {})
    return gpu.get("status") == "OK", gpu.get("detail", "no gpu check")


class GpuPipeline(E2ETest):
    def setUp(self):
        super().setUp()
        ok, why = gpu_available()
        if not ok:
            self.skipTest(f"no usable GPU: {why}")

    def run_job(self, **sections):
        streams = [("h264", os.path.join(MEDIA, "ball-320x240-h264.mp4")),
                   ("h265", os.path.join(MEDIA, "ball-320x240-h265.mp4")),
                   ("smpte", "test://smpte?frames=40&width=1280&height=720&format=NV12")]
        config, _ = write_config(self.dir, streams, publish={"wait_for_subscribers": 0},
                                 preprocess={"dtype": "float16"}, infer={"precision": "fp16"}, **sections)
        run = Run(config, env={"VAPIPE_LOG_LEVEL": "info"})
        code = run.wait(timeout=240)
        self.assertEqual(code, 0, run.stderr[-4000:])
        with open(os.path.join(self.dir, "results.jsonl")) as f:
            results = results_by_stream(json.loads(line) for line in f)
        for sid, frames, label in (("h264", 30, "ball"), ("h265", 30, "ball"), ("smpte", 40, "smpte")):
            got = results.get(sid, [])
            self.assertEqual([r["seq"] for r in got], list(range(frames)), f"{sid}: {run.stderr[-2000:]}")
            self.assertTrue(all(r["error"] is None for r in got), [r["error"] for r in got if r["error"]][:3])
            correct = sum(r["label"] == label for r in got)
            self.assertGreaterEqual(correct / frames, 0.9, f"{sid}: {correct}/{frames} named {label}")
        return run

    def test_every_frame_through_nvdec_cuda_ipc_and_fp16_inference(self):
        run = self.run_job()
        self.assertIn("lane 0 (GPU 0): decode nvdec, preprocess cuda:0, infer cuda:0", run.stderr)
        # NVDEC took both codecs: no stream fell back to the CPU decoder.
        self.assertNotIn("stream 'h264': decoding on the CPU", run.stderr)
        self.assertNotIn("stream 'h265': decoding on the CPU", run.stderr)
        self.assertIn("fp16, channels-last", run.stderr)

    def test_host_pools_give_the_same_results(self):
        self.run_job(transport={"device_pools": False})

    def test_a_live_lane_restarts_on_the_gpu_after_infer_crashes(self):
        """infer is killed in a live job: the lane's new processes make new CUDA IPC pools, the new
        preprocess and infer open them, and both streams resume with seq going forward."""
        live = "test://{}?frames=0&live=true&fps=30&width=1280&height=720&format=NV12"
        config, _ = write_config(self.dir, [("ball", live.format("ball")), ("smpte", live.format("smpte"))],
                                 job={"mode": "live"}, publish={"wait_for_subscribers": 0},
                                 preprocess={"dtype": "float16"}, infer={"precision": "fp16"})
        run = Run(config, env={"VAPIPE_LOG_LEVEL": "info"})
        jsonl = os.path.join(self.dir, "results.jsonl")

        def lines():
            try:
                with open(jsonl) as f:
                    return [json.loads(line) for line in f if line.endswith("\n")]
            except FileNotFoundError:
                return []

        def wait_for(what, predicate, timeout=90):
            deadline = time.time() + timeout
            while time.time() < deadline and run.proc.poll() is None:
                if predicate(lines()):
                    return
                time.sleep(0.2)
            self.fail(f"timed out waiting for {what}: {run.proc.poll()}")

        count = lambda msgs, sid: sum(m["topic"] == f"results/{sid}" for m in msgs)
        stages = run.watch_stages()
        wait_for("results", lambda m: count(m, "ball") >= 20 and count(m, "smpte") >= 20)
        os.kill(stages["infer"], signal.SIGKILL)
        resumed = lambda m, sid: any(x["topic"] == f"events/{sid}" and x["payload"]["event"] == "resumed" for x in m)
        wait_for("both streams resumed", lambda m: resumed(m, "ball") and resumed(m, "smpte"))
        before = {sid: count(lines(), sid) for sid in ("ball", "smpte")}
        wait_for("results after the restart", lambda m: all(count(m, s) >= before[s] + 20 for s in before))
        run.signal(signal.SIGINT)
        code = run.wait(timeout=120)
        self.assertEqual(code, 0, run.stderr[-4000:])
        msgs = lines()
        results = results_by_stream(msgs)
        for sid in ("ball", "smpte"):
            events = [m["payload"]["event"] for m in msgs if m["topic"] == f"events/{sid}"]
            self.assertEqual(events, ["started", "reconnecting", "resumed", "eos"], sid)
            seqs = [r["seq"] for r in results[sid]]
            self.assertEqual(seqs, sorted(set(seqs)), f"{sid}: forward only")
            self.assertTrue(all(r["error"] is None for r in results[sid]), f"{sid}: {run.stderr[-2000:]}")
        self.assertIn("restarting the lane", run.stderr)


if __name__ == "__main__":
    unittest.main()
