#!/usr/bin/env bash
# The one script to run on the GPU machine (see ../shared/device/README.md): unpack the Debian
# dependency bundle, build with CUDA against the machine's LibTorch, run the gpu-labelled tests and
# the CPU tests that need no GStreamer plugins from the host, and leave logs under $OUT.
#   Here:  ../shared/device/bundle-deps.sh .devdeps   (once; .devdeps.tgz is carried)
#   There: tools/gpu-check.sh
set -uo pipefail
OUT="${OUT:-/tmp/vapipe-gpu-out}"
mkdir -p "$OUT"
summary() { echo "== $*" | tee -a "$OUT/summary.txt"; }
if [[ -f .devdeps.tgz ]]; then
  tar xzf .devdeps.tgz && source .devdeps/env.sh
  export PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1
fi
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
summary "configure"
cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 \
  || { summary "configure FAILED"; tail -30 "$OUT/configure.log"; exit 1; }
summary "build"
ninja -C /tmp/build > "$OUT/build.log" 2>&1 || { summary "build FAILED"; tail -40 "$OUT/build.log"; exit 1; }
summary "gpu tests"
(cd /tmp/build && ctest -L gpu --output-on-failure --timeout 300) > "$OUT/gpu-tests.log" 2>&1
summary "gpu tests exit $? ($(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1))"
(cd /tmp/build && timeout 300 ./tests/vapipe_stage_tests --gtest_filter='CpuPreprocessor*:Batcher*') > "$OUT/cpu-tests.log" 2>&1
summary "cpu tests exit $?"
cat "$OUT/summary.txt"
