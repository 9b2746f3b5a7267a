#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds vapipe with its tests, and runs every test (unit tests and
# end-to-end tests that start real process trees). GPU tests skip cleanly without a GPU.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/tools/setup.sh"
"$root/tools/build.sh"
cd "${VAPIPE_BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 600 -j "${VAPIPE_TEST_JOBS:-2}" "$@"
