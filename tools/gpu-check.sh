#!/usr/bin/env bash
# The one script to run on the GPU machine (see ../shared/device/README.md). In about 8 minutes on its
# 16 cores: unpack the Debian dependency bundle, build with CUDA against the machine's LibTorch, run the
# gpu-labelled tests (kernel parity, CUDA IPC between two processes, NVDEC ingest of H.264 and H.265),
# a few CPU unit tests, make a random-weight ResNet-50 with the machine's python3, and run the GPU
# benchmark (tools/gpu-bench.py: NVDEC alone, ResNet-50 fp16 alone, the whole pipeline, a per-frame
# loop). Everything lands under $OUT in at most 5 files:
#   summary.txt   what ran, exit statuses, test counts, the benchmark table (also printed at the end)
#   bench.md      the benchmark table (Markdown, for docs/benchmarks.md)
#   bench.json    every benchmark figure, job summary and failing command's stderr tail
#   gpu-tests.log ctest -L gpu --output-on-failure
#   logs.tar.gz   everything else: configure/build logs, nvidia-smi, environment, every benchmark
#                 command's log, the generated configs and job summaries
#
# Prepare here, in the repository root (once; both paths are ignored by .gitignore):
#   tools/setup.sh                                  # the Debian packages the bundle is made from
#   ../shared/device/bundle-deps.sh .devdeps        # -> .devdeps.tgz (about 20 MB)
#   tools/make-gpu-media.sh .devmedia               # -> .devmedia/ (about 21 MB: 8 x 300 frames 1080p
#                                                   #    H.264 + H.264/H.265 test clips; ~3 min on 2 cores)
# Call it with the device tool (one call; the working tree, .devdeps.tgz and .devmedia are ~45 MB of
# the 64 MiB it carries):
#   command: bash tools/gpu-check.sh     carry: [".devdeps.tgz", ".devmedia"]     timeout_s: 570
#
# Knobs (environment): GPU_CHECK_BUDGET_S (default 480, 1800 with GPU_CHECK_CPU=1: the script stops
# starting work so as to end by then), GPU_BENCH_STREAMS (default 32,80,160: three points, so that a fixed start-up cost and the
# rate can be told apart), GPU_BENCH_VARIANTS (default "cuda_graphs=off batch_shapes=exact
# lanes_per_device=2 jit_optimize=true mps=on": infer settings, lanes_per_device, or mps=on (the
# defaults with CUDA's Multi-Process Service running), each run once more end to end, at
# GPU_BENCH_COMPARE_STREAMS streams, default 80; the last ones are skipped if the budget runs out),
# GPU_BENCH_ARGS (more gpu-bench.py options),
# GPU_CHECK_TARGETS (ninja targets; default all), GPU_CHECK_MEDIA (default .devmedia),
# GPU_CHECK_BUILD_DIR (default /tmp/build), GPU_CHECK_CPU=1 (rehearse the script on a machine without
# a GPU: gpu-bench.py --cpu on 2 streams).
# The ingest tests find the carried clips through VAPIPE_TEST_MEDIA_DIR, VAPIPE_TEST_H264 and
# VAPIPE_TEST_H265 (absolute paths, exported below).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
OUT="${OUT:-/tmp/vapipe-gpu-out}"
# A CPU rehearsal's cold build alone takes 6 to 7 min on 2 cores: 480 s cut it short (2026-12-05).
default_budget=480
[[ ${GPU_CHECK_CPU:-0} == 1 ]] && default_budget=1800
budget=${GPU_CHECK_BUDGET_S:-$default_budget}
build=${GPU_CHECK_BUILD_DIR:-/tmp/build}
media=$(realpath -m "${GPU_CHECK_MEDIA:-.devmedia}")
work=/tmp/vapipe-gpu-check
logs=$work/logs
rm -rf "$work"; mkdir -p "$OUT" "$logs"
: > "$OUT/summary.txt"
summary() { echo "== [$(printf '%3d' "$SECONDS") s] $*" | tee -a "$OUT/summary.txt"; }
left() { echo $((budget - SECONDS)); }
# step NAME TIMEOUT LOG CMD...: runs CMD with a timeout cut to what is left of the budget (keeping
# RESERVE seconds for packing up); returns its status (124: timed out, 125: skipped, no time left).
reserve=20
step() {
  local name=$1 limit=$2 logf=$3; shift 3
  local avail=$(( $(left) - reserve ))
  (( avail < limit )) && limit=$avail
  if (( limit < 10 )); then summary "$name SKIPPED (budget: $(left) s left)"; return 125; fi
  summary "$name (timeout ${limit} s)"
  timeout -k 10 "$limit" "$@" > "$logf" 2>&1
  local rc=$?
  (( rc == 124 || rc == 137 )) && summary "$name TIMED OUT after ${limit} s"
  return $rc
}
# shellcheck disable=SC2317  # called by the EXIT trap
finish() {
  cp "$logs/gpu-tests.log" "$OUT/gpu-tests.log" 2>/dev/null
  if [[ -d $work/bench ]]; then
    cp "$work/bench/gpu-bench.json" "$OUT/bench.json" 2>/dev/null
    cp "$work/bench/gpu-bench.md" "$OUT/bench.md" 2>/dev/null
    mkdir -p "$logs/bench" && cp -r "$work/bench/." "$logs/bench/" 2>/dev/null
  fi
  tar czf "$OUT/logs.tar.gz" -C "$work" logs 2>/dev/null
  summary "done in $SECONDS s; files in \$OUT: $(cd "$OUT" && echo *)"
  echo
  echo "---------------- summary ----------------"
  tail -c 9000 "$OUT/summary.txt"
}
trap finish EXIT

# 1. Dependencies and the machine.
if [[ -f .devdeps.tgz ]]; then
  # shellcheck disable=SC1091  # made by ../shared/device/bundle-deps.sh
  tar xzf .devdeps.tgz && source .devdeps/env.sh
  export PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1
else
  summary "no .devdeps.tgz here: using the system's packages"
fi
if [[ ${GPU_CHECK_CPU:-0} == 1 && -n ${GST_PLUGIN_SYSTEM_PATH_1_0:-} ]]; then
  # A rehearsal: the bundle has no CPU video decoders (the GPU machine decodes with nvcodec).
  GST_PLUGIN_SYSTEM_PATH_1_0+=":/usr/lib/x86_64-linux-gnu/gstreamer-1.0"
fi
PY=python3
python3 -c 'import torch' >/dev/null 2>&1 || PY=/usr/bin/python3
{
  echo "date: $(date -u +%FT%TZ)"; echo "uname: $(uname -a)"; echo "nproc: $(nproc)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  echo "python: $($PY -c 'import sys, torch; print(sys.executable, "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -1)"; echo "cmake: $(cmake --version | head -1)"
  echo "/dev/shm:"; df -h /dev/shm; echo "memory:"; free -g
  echo "gst nvcodec:"; gst-inspect-1.0 nvcodec 2>&1 | grep -E 'nvh26[45]dec|cudaupload|cudadownload'
} > "$logs/environment.txt" 2>&1
nvidia-smi > "$logs/nvidia-smi.txt" 2>&1 || true
summary "machine: $(nproc) cores, GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
if [[ -f "$media/media.json" ]]; then
  export VAPIPE_TEST_MEDIA_DIR="$media" VAPIPE_TEST_H264="$media/nvdec-h264.mp4" VAPIPE_TEST_H265="$media/nvdec-h265.mp4"
  summary "media: $(find "$media" -name '*.mp4' | wc -l) clips, $(du -sh "$media" | cut -f1) in $media"
else
  summary "media: no $media/media.json (make it here with tools/make-gpu-media.sh and carry .devmedia): the NVDEC tests may skip and the benchmark cannot run"
fi

# 2. Configure and build (Release, CUDA for the H200, every target unless GPU_CHECK_TARGETS says).
step configure 150 "$logs/configure.log" \
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
rc=$?
if (( rc != 0 )); then summary "configure FAILED (exit $rc)"; tail -30 "$logs/configure.log"; exit 1; fi
grep -E 'vapipe: (CUDA sources|infer.s CUDA graphs)' "$logs/configure.log" | sed 's/^-- //' | while read -r l; do summary "$l"; done
# -k 0: a failure shows every broken source at once, not only the first.
# 360 s: the H200 machine's 16 cores built it in 43 s; a rehearsal's cold build on 2 cores takes 6 to 7 min.
build_limit=360
[[ ${GPU_CHECK_CPU:-0} == 1 ]] && build_limit=1200
# shellcheck disable=SC2086  # a list of targets
step build "$build_limit" "$logs/build.log" ninja -C "$build" -k 0 -j "$(nproc)" ${GPU_CHECK_TARGETS:-}
rc=$?
if (( rc != 0 && rc != 124 && rc != 125 )) && grep -q "infer's CUDA graphs ON" "$logs/configure.log"; then
  # The CUDA graph code compiles only against a LibTorch with CUDA, which no development machine has:
  # if it is what broke, build without it rather than lose the session's GPU time.
  summary "build FAILED (exit $rc); building again without infer's CUDA graphs (-DVAPIPE_CUDA_GRAPHS=OFF)"
  grep -E -B2 -A12 'error|FAILED' "$logs/build.log" | head -40 | tee -a "$OUT/summary.txt"
  cp "$logs/build.log" "$logs/build-with-cuda-graphs.log"
  step "configure without CUDA graphs" 60 "$logs/configure.log" cmake -S . -B "$build" -DVAPIPE_CUDA_GRAPHS=OFF
  # shellcheck disable=SC2086
  step build 300 "$logs/build.log" ninja -C "$build" -k 0 -j "$(nproc)" ${GPU_CHECK_TARGETS:-}
  rc=$?
fi
if (( rc != 0 )); then summary "build FAILED (exit $rc)"; grep -E -B2 -A12 'error|FAILED' "$logs/build.log" | head -60; exit 1; fi
summary "build ok ($(grep -c '^\[' "$logs/build.log") steps)"

# 2b. vapipe doctor, and the same with the libraries' full teardown at exit (VAPIPE_FULL_TEARDOWN=1):
# on this machine that teardown crashed `vapipe run` and `doctor` (2026-11-29); the crash report's
# backtrace says where.
step doctor 60 "$logs/doctor.log" "$build/cli/vapipe" doctor
summary "doctor exit $?: $(grep -cE '^\s*OK' "$logs/doctor.log") OK, $(grep -cE '^\s*WARN' "$logs/doctor.log") WARN, $(grep -cE '^\s*FAIL' "$logs/doctor.log") FAIL"
grep -E '^\s*(WARN|FAIL)' "$logs/doctor.log" | head -8 | tee -a "$OUT/summary.txt"
step "doctor, full teardown" 60 "$logs/doctor-full-teardown.log" env VAPIPE_FULL_TEARDOWN=1 "$build/cli/vapipe" doctor --json
summary "doctor with VAPIPE_FULL_TEARDOWN=1 exit $?"
grep -A22 'backtrace:' "$logs/doctor-full-teardown.log" | cut -c1-200 | tee -a "$OUT/summary.txt"

# 3. Tests: everything labelled gpu, then a few CPU unit tests that need no host GStreamer plugins.
# The GPU pipeline's e2e test (whole jobs, `vapipe doctor` each) runs last, after the benchmark: in
# this step it could take the time the benchmark's 160-stream rows need.
step "gpu tests" 240 "$logs/gpu-tests.log" ctest --test-dir "$build" -L gpu -E '^e2e\.gpu_pipeline_test$' \
  --output-on-failure --timeout 120
rc=$?
summary "gpu tests exit $rc: $(grep -E 'tests passed|tests failed|No tests were found' "$logs/gpu-tests.log" | tail -1)"
grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|Not Run|SEGFAULT|Exception|Subprocess aborted)' "$logs/gpu-tests.log" | head -20 | tee -a "$OUT/summary.txt"
grep -E '^\s+[0-9]+ - .*\(Skipped\)' "$logs/gpu-tests.log" | head -20 | sed 's/^\s*/  skipped: /' | tee -a "$OUT/summary.txt"
if [[ -x "$build/tests/vapipe_stage_tests" ]]; then
  step "cpu tests" 60 "$logs/cpu-tests.log" "$build/tests/vapipe_stage_tests" --gtest_filter='CpuPreprocessor*:Batcher*'
  summary "cpu tests exit $?: $(grep -E '^\[  (PASSED|FAILED)' "$logs/cpu-tests.log" | tr '\n' ' ')"
fi

# 4. The model: a random-weight ResNet-50, checked in fp16 on the GPU.
model=$work/models/resnet50_random.pt
step "resnet50" 120 "$logs/make-resnet50.log" "$PY" tools/make_resnet50.py "$model" --check-fp16
rc=$?
summary "resnet50 exit $rc: $(tail -2 "$logs/make-resnet50.log" | tr '\n' ' ' | cut -c1-400)"

# 5. The benchmark, in what is left of the budget.
if [[ ! -x "$build/cli/vapipe" ]]; then
  summary "benchmark SKIPPED: no $build/cli/vapipe"
elif [[ ! -f "$media/media.json" ]]; then
  summary "benchmark SKIPPED: no media"
else
  streams=${GPU_BENCH_STREAMS:-32,80,160} compare=${GPU_BENCH_COMPARE_STREAMS:-80}
  bench_args=()
  # Without working CUDA IPC (some VMs), the device pools cannot be shared: measure through host pools.
  if grep -qE 'CudaIpcPool\.AnotherProcess.*(Failed|Exception|SEGFAULT)' "$logs/gpu-tests.log"; then
    bench_args+=(--host-pools)
    summary "CUDA IPC failed its test: the benchmark runs with transport.device_pools false"
  fi
  [[ ${GPU_CHECK_CPU:-0} == 1 ]] && { bench_args=(--cpu --batch 4); streams=2; compare=2; }
  [[ -f $model ]] || { model=$root/models/pattern_cnn.pt; summary "no ResNet-50: benchmark with the shipped pattern CNN"; }
  variants=${GPU_BENCH_VARIANTS:-cuda_graphs=off batch_shapes=exact lanes_per_device=2 jit_optimize=true mps=on}
  # About 20 s kept for each comparison run below (an 80-stream run took 12 to 16 s on the H200; each
  # may take up to 90 s of what is left). On 2026-12-04 the benchmark itself took 114 s, starting at
  # 120 s; the GPU e2e test, skipped then, will take some of that.
  bench_budget=$(( $(left) - reserve - 15 - 20 * $(wc -w <<< "$variants") ))
  # shellcheck disable=SC2086  # extra options
  step benchmark $((bench_budget + 10)) "$logs/gpu-bench.log" env PYTHONUNBUFFERED=1 python3 tools/gpu-bench.py \
    --vapipe "$build/cli/vapipe" --media "$media" --model "$model" --out "$work/bench" \
    --budget-s "$bench_budget" --log-level info --streams "$streams" "${bench_args[@]}" ${GPU_BENCH_ARGS:-}
  rc=$?
  summary "benchmark exit $rc (budget ${bench_budget} s)"
  [[ -f $work/bench/gpu-bench.md ]] && cat "$work/bench/gpu-bench.md" >> "$OUT/summary.txt"
  (( rc != 0 )) && grep -E '^\[gpu-bench .*: (failed|timeout|skipped)' "$logs/gpu-bench.log" | tail -15 | tee -a "$OUT/summary.txt"
  # Where each stage's time went in the largest end-to-end run (each stage logs it when it ends).
  most=0
  for f in "$work"/bench/logs/e2e-*.log; do
    n=${f##*/e2e-}; n=${n%.log}
    [[ -f $f && $n =~ ^[0-9]+$ ]] && (( n > most )) && { most=$n; last_log=$f; }
  done
  if [[ -n ${last_log:-} ]]; then
    summary "stage time in $(basename "$last_log"):"
    grep -E 'done: .* busy|infer: [0-9]+ batches|infer: batches (ran at|padded|run without CUDA graphs)|ingest lane [0-9]+: ([0-9]+ streams in|streams start after)|infer: LibTorch .* from .* \(loaded in' "$last_log" | sed -E 's/^[0-9-]+ [0-9:.]+ //' | cut -c1-320 | tee -a "$OUT/summary.txt"
  fi
  # The same end to end with one setting changed, to compare: without CUDA graphs (one launch per layer,
  # as before 2026-11-30); every batch at its own size instead of padded to fixed sizes (which also
  # means no graphs); TorchScript's run-time re-optimisation on; two lanes (two infer processes)
  # on the GPU, in case one infer process cannot keep it busy; and mps=on, the same job with CUDA's
  # Multi-Process Service running: without it the GPU runs one process's context at a time and
  # switches between ingest's, preprocess's and infer's (on 2026-12-04 every stage after ingest idled
  # most of the time at about 4,700 frames/s, and settings that change only infer's GPU work cost 12%); with it their
  # kernels and copies share the GPU at once. The daemon (a user-space service, no device setting)
  # runs only for that run, its pipe and logs in /tmp.
  for variant in $variants; do
    (( $(left) - reserve > 60 )) || { summary "end to end with $variant SKIPPED (budget: $(left) s left)"; continue; }
    vout=$work/bench/${variant//[=.]/-}
    set_args=(--infer-set "$variant")
    if [[ $variant == mps=on ]]; then
      set_args=()
      if ! command -v nvidia-cuda-mps-control >/dev/null; then
        summary "end to end with MPS SKIPPED: no nvidia-cuda-mps-control here"; continue
      fi
      export CUDA_MPS_PIPE_DIRECTORY=/tmp/vapipe-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/vapipe-mps/log
      mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
      if ! timeout 20 nvidia-cuda-mps-control -d; then
        summary "end to end with MPS SKIPPED: nvidia-cuda-mps-control -d failed"
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; continue
      fi
      summary "MPS control daemon started"
    fi
    variant_limit=$(( $(left) - reserve )); (( variant_limit > 90 )) && variant_limit=90
    # shellcheck disable=SC2086
    step "benchmark, $variant" "$variant_limit" "$logs/gpu-bench-${variant//[=.]/-}.log" env PYTHONUNBUFFERED=1 \
      python3 tools/gpu-bench.py --vapipe "$build/cli/vapipe" --media "$media" --model "$model" --out "$vout" \
      --budget-s $(( variant_limit - 10 )) --streams "$compare" --skip decode --skip infer --skip per-frame \
      --log-level info "${set_args[@]}" "${bench_args[@]}" ${GPU_BENCH_ARGS:-}
    summary "end to end, $compare streams, $variant: exit $?, $(python3 - "$vout/gpu-bench.json" <<'PY' 2>&1 | tail -1
import json, sys
row = json.load(open(sys.argv[1]))["rows"][0]
tw = row.get("where_the_time_went") or {}
w = tw.get("stages", {})
own = ", ".join("%s own work %.0f%%" % (k, 100 * v["own_work"]) for k, v in w.items() if "own_work" in v)
cores = ", ".join("%s %.1f" % (k, v["cpu_cores"]) for k, v in w.items() if "cpu_cores" in v)
gpu = tw.get("gpu") or {}
print("steady %.0f frames/s, every frame classified: %s; %s; CPU cores: %s; GPU: SMs %s%%, NVDEC %s%%" % (
    row.get("e2e_steady") or 0, row.get("every_frame"), own, cores or "-", gpu.get("sm", "-"), gpu.get("dec", "-")))
PY
)"
    grep -hE 'infer: [0-9]+ batches|infer: batches (ran at|padded|run without CUDA graphs)' "$vout"/logs/e2e-*.log 2>/dev/null | sed -E 's/^[0-9-]+ [0-9:.]+ //' | cut -c1-320 | tee -a "$OUT/summary.txt"
    if [[ $variant == mps=on ]]; then
      echo quit | timeout 30 nvidia-cuda-mps-control || summary "MPS: quit did not answer within 30 s"
      mkdir -p "$logs/mps" && cp -r "$CUDA_MPS_LOG_DIRECTORY/." "$logs/mps/" 2>/dev/null
      unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
      summary "MPS control daemon stopped"
    fi
  done
fi

# 6. The GPU pipeline's e2e test, in what is left (whole jobs on NVDEC, CUDA preprocessing and infer).
if (( $(left) - reserve > 30 )); then
  step "gpu e2e test" 200 "$logs/gpu-e2e-test.log" ctest --test-dir "$build" -R '^e2e\.gpu_pipeline_test$' \
    --output-on-failure
  summary "gpu e2e test exit $?: $(grep -E 'tests passed|tests failed|No tests were found' "$logs/gpu-e2e-test.log" | tail -1)"
  grep -E '^(FAIL|ERROR):|^\w+Error|skipped' "$logs/gpu-e2e-test.log" | head -12 | tee -a "$OUT/summary.txt"
else
  summary "gpu e2e test SKIPPED (budget: $(left) s left)"
fi
exit 0
