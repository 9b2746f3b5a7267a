#!/usr/bin/env bash
# Fuzzes the parsers of what comes from outside (tests/fuzz/: wire messages, H.264/H.265 access
# units and their reference numbering (with MPEG-2's), MPEG-TS packets' continuity counters, an RTSP
# camera's frame times (the decoding times of its clips), ONVIF answers, archive files' headers,
# configs, small text fields, results files, /healthz, a Redis server's replies, an MP4's track matrix, HLS
# playlists and DASH manifests) with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer: builds them with clang into build-fuzz/ (CPU only), then runs each for
# SECONDS (default 60) from its seed corpus. New inputs that reach new code are kept under
# build-fuzz/corpus/<target>/ (not in the repository); an input that crashes is written to
# build-fuzz/crashes/<target>/ and the script exits 1 naming it: copy it into
# tests/fuzz/corpus/<target>/ with the fix, so ctest's fuzz.<target> replays it from then on.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]      e.g. tools/fuzz.sh 300 onvif_xml wire
#
# Needs clang and its runtime (Debian: clang, libclang-rt-14-dev), beside what tools/setup.sh installs.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VAPIPE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${1:-60}"
shift || true
all=(wire h26x_access_unit reference_gaps ts_tail_loss decoding_times onvif_xml container_end config text_fields results_lines resume_plan operator_files
     status_report resp_reply mp4_orientation hls_playlist)
targets=("${@:-${all[@]}}")
[[ ${#targets[@]} -eq 0 || -z ${targets[0]} ]] && targets=("${all[@]}")
for tool in clang clang++; do
  command -v "$tool" > /dev/null || { echo "fuzz.sh: $tool is missing (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
done
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/vapipe-ccache}" CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVAPIPE_ENABLE_CUDA=OFF \
    -DVAPIPE_FUZZ=ON -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" > "$build.configure.log" 2>&1 ||
    { echo "fuzz.sh: configuring failed, see $build.configure.log" >&2; exit 2; }
fi
cmake --build "$build" -j "${VAPIPE_JOBS:-$(nproc)}" --target "${targets[@]/#/vapipe_fuzz_}" || exit 2
failed=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" crashes="$build/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  echo "== $t: ${seconds} s"
  # Leaks are not crashes here: GStreamer and GLib keep their registries for the process's life.
  dict=()  # the JSON targets get the words of a results line,
  [[ $t == results_lines || $t == resume_plan ]] && dict=(-dict="$root/tests/fuzz/results.dict")
  [[ $t == config ]] && dict=(-dict="$root/tests/fuzz/config.dict")  # and the config its keys
  [[ $t == status_report ]] && dict=(-dict="$root/tests/fuzz/healthz.dict")
  ASAN_OPTIONS=detect_leaks=0 "$build/tests/fuzz/vapipe_fuzz_$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 -artifact_prefix="$crashes/" "${dict[@]}" \
    "$corpus" "$root/tests/fuzz/corpus/$t" > "$build/$t.log" 2>&1
  rc=$?
  grep -E '^stat::(number_of_executed_units|new_units_added)|^#[0-9]+ +DONE' "$build/$t.log" | tr '\n' ' '
  echo
  if (( rc != 0 )); then
    failed+=("$t")
    echo "   FAILED (exit $rc): $(ls -t "$crashes" | head -1) — see $build/$t.log" >&2
    grep -m 3 -E 'ERROR: |runtime error|SUMMARY' "$build/$t.log" >&2
  fi
done
(( ${#failed[@]} == 0 )) || { echo "fuzz.sh: crashed: ${failed[*]}" >&2; exit 1; }
echo "fuzz.sh: no crash in ${targets[*]}"
