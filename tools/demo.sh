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
    if r["stream_id"] in seen:
        continue
    seen.add(r["stream_id"])
    print("  %-16s frame %-4d %-10s score %.3f  latency %.1f ms" % (
        r["stream_id"], r["seq"], r["label"], r["score"], r["latency_ms"]["total"]))
'
echo "All results: $results"
exit "$status"
