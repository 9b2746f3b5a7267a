#!/usr/bin/env bash
# Configures and builds vapipe into build/ (Ninja, ccache). Used by demo.sh and test.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VAPIPE_BUILD_DIR:-$root/build}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/vapipe-ccache}"
# Relative paths in the cache key: a fresh clone elsewhere (CI) still hits the cache.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${VAPIPE_BUILD_TYPE:-RelWithDebInfo}"
fi
cmake --build "$build" -j "${VAPIPE_JOBS:-$(nproc)}"
