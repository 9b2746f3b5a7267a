#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds vapipe, and runs the demo (configs/demo.yaml, embedded in
# the binary): five stage processes classify synthetic streams and two shipped clips, while a
# subscriber prints what arrives on the result bus.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tools/setup.sh"
"$root/tools/build.sh"
vapipe="${VAPIPE_BUILD_DIR:-$root/build}/cli/vapipe"
results="$(mktemp /tmp/vapipe-demo-XXXXXX.jsonl)"
"$vapipe" sub --exit-on-summary --timeout 120 > "$results" &
sub_pid=$!
status=0
"$vapipe" run || status=$?
wait "$sub_pid" || true
echo
echo "The subscriber received $(grep -c '"vapipe.result"' "$results") results; the first of each stream:"
grep '"vapipe.result"' "$results" | python3 -c '
import json, sys
seen = set()
for line in sys.stdin:
    r = json.loads(line)
    if r["stream_id"] in seen: continue
    seen.add(r["stream_id"])
    print(f"  {r[\"stream_id\"]:<16} frame {r[\"seq\"]:<4} {r[\"label\"]:<10} score {r[\"score\"]:.3f}  latency {r[\"latency_ms\"][\"total\"]:.1f} ms")
'
echo "All results: $results"
exit "$status"
