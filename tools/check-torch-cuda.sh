#!/usr/bin/env bash
# Compiles the translation units that include LibTorch against a LibTorch 2.x built with CUDA, on a
# machine without a GPU: Debian's own libtorch-dev is 1.13 and CPU-only, so the code under
# VAPIPE_TORCH_CUDA (infer's CUDA graphs) is otherwise compiled only on the GPU machine. The headers
# come from Debian sid's contrib package libtorch-cuda-dev (PyTorch 2.6), unpacked into a cache folder,
# not installed. Syntax and types only (-fsyntax-only): nothing is linked or run.
#   tools/check-torch-cuda.sh            # VAPIPE_TORCH_CUDA_CACHE: where the headers go (/tmp/vapipe-torch-cuda)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache=${VAPIPE_TORCH_CUDA_CACHE:-/tmp/vapipe-torch-cuda}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cuda_include=${CUDA_INCLUDE:-/usr/local/cuda/include}
[[ -f $cuda_include/cuda_runtime_api.h ]] || { echo "check-torch-cuda: no CUDA toolkit headers in $cuda_include" >&2; exit 2; }
include=$cache/root/usr/include
if [[ ! -f $include/ATen/cuda/CUDAGraph.h ]]; then
  mkdir -p "$cache"
  echo "check-torch-cuda: fetching libtorch-cuda-dev from $mirror (sid contrib)"
  curl -fsS --max-time 120 "$mirror/dists/sid/contrib/binary-amd64/Packages.xz" -o "$cache/Packages.xz"
  xz -dc "$cache/Packages.xz" > "$cache/Packages"
  deb=$(awk '/^Package: libtorch-cuda-dev$/{p=1} p&&/^Filename:/{print $2; exit}' "$cache/Packages")
  [[ -n $deb ]] || { echo "check-torch-cuda: no libtorch-cuda-dev in sid contrib" >&2; exit 2; }
  curl -fsS --max-time 300 "$mirror/$deb" -o "$cache/libtorch-cuda-dev.deb"
  rm -rf "$cache/root" && dpkg -x "$cache/libtorch-cuda-dev.deb" "$cache/root"
fi
version=$(awk '/^#define TORCH_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v == "" ? "" : ".") $3} END{print v}' \
  "$include/torch/csrc/api/include/torch/version.h")
echo "check-torch-cuda: LibTorch $version headers (CUDA build) in $include"
failed=0
for tu in stages/infer/torch_classifier.cpp stages/infer/torch_runtime_info.cpp \
          tests/stages/infer/torch_classifier_test.cpp tests/stages/preprocess/preprocess_torch_parity_test.cpp; do
  # -I (not -isystem): these headers must win over Debian's 1.13 ones in /usr/include; -H lists what
  # was read, to prove that none of the 1.13 headers slipped in.
  if g++ -std=c++17 -fsyntax-only -H -Wall -Wextra -DVAPIPE_TORCH_CUDA=1 -DVAPIPE_WITH_CUDA=1 \
       -DVAPIPE_SOURCE_DIR="\"$root\"" -I"$root" -I"$include" -I"$include/torch/csrc/api/include" \
       -isystem "$cuda_include" "$root/$tu" 2> "$cache/compile.log"; then
    if grep -q '^\.\+ /usr/include/\(torch\|ATen\|c10\)/' "$cache/compile.log"; then
      echo "FAIL $tu: Debian's LibTorch 1.13 headers were read too:"; grep '^\.\+ /usr/include/\(torch\|ATen\|c10\)/' "$cache/compile.log" | head -3
      failed=1
    else
      own=$(grep -c "^$root/.*: warning" "$cache/compile.log" || true)
      echo "ok   $tu ($own warnings in vapipe's own files)"
      grep "^$root/.*: warning" "$cache/compile.log" | head -5 || true
    fi
  else
    echo "FAIL $tu:"; grep -A3 ': error: ' "$cache/compile.log" | head -30
    failed=1
  fi
done
exit $failed
