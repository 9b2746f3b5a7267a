"""The GPU path end to end (ctest labels gpu and e2e): `vapipe run` with the defaults on a GPU machine
puts a lane on GPU 0 (NVDEC, CUDA preprocessing, fp16 inference; frames and tensors in CUDA IPC device
pools), and every frame of an H.264 clip, an H.265 clip and a synthetic stream is classified exactly
once, in order. Skips without a usable GPU (vapipe doctor's gpu check). No subscriber process: the
results are read from the JSON-lines sink, so pyzmq is not needed on the GPU machine."""
import json
import os
import subprocess
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


if __name__ == "__main__":
    unittest.main()
