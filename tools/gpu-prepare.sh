#!/usr/bin/env bash
# Prepares, on this (Debian) machine, what tools/gpu-check.sh needs carried to the GPU machine:
#   .devdeps.tgz  the Debian headers, libraries and GStreamer plugins (../shared/device/bundle-deps.sh),
#                 plus what the tests need and that script leaves out (without them the project does
#                 not configure there): GoogleTest's static libraries (Debian ships it as .a files
#                 only), cpp-httplib (its .pc and those it requires, its shared library and
#                 brotli's; OpenSSL and zlib are on the GPU machine's Ubuntu already) and libmosquitto
#                 (publish.mqtt's client: its header, .pc and shared library), librdkafka
#                 (publish.kafka's, likewise, with libsasl2, which Ubuntu may lack); and two GStreamer
#                 plugins: jpegenc (segment pictures, which the GPU e2e test's RTSP camera asks for)
#                 and openh264dec (a CPU H.264 decoder, which vapipe doctor asks for; 2026-12-04 its
#                 FAIL line was the only one there)
#   .devmedia/    1080p clips for the benchmark and the NVDEC tests (tools/make-gpu-media.sh)
# Both are ignored by .gitignore. Then, with the device tool:
#   command: bash tools/gpu-check.sh     carry: [".devdeps.tgz", ".devmedia"]     timeout_s: 570
#   tools/gpu-prepare.sh [make-gpu-media.sh options]      (BUNDLE_DEPS: path of bundle-deps.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# GCC 13 there: a standard header this machine's GCC 12 brings in on the way is missing there
# (2026-12-05: one device call lost). The textual check here is instant; tools/check-gcc13-headers.sh
# compiles every source against GCC 13's headers (about 15 minutes) when sources changed much.
python3 tools/lint-includes.py >&2 || { echo "gpu-prepare: add the includes above first" >&2; exit 1; }
bundle=${BUNDLE_DEPS:-$root/../shared/device/bundle-deps.sh}
[[ -x $bundle ]] || { echo "gpu-prepare: no $bundle (set BUNDLE_DEPS)" >&2; exit 1; }
EXTRA_DEV="libmosquitto-dev librdkafka-dev ${EXTRA_DEV:-}" EXTRA_PC="cpp-httplib libmosquitto rdkafka ${EXTRA_PC:-}" \
  EXTRA_PLUGINS="libgstjpeg.so libgstopenh264.so ${EXTRA_PLUGINS:-}" "$bundle" .devdeps
lib=/usr/lib/x86_64-linux-gnu
for a in libgtest.a libgtest_main.a libgmock.a libgmock_main.a libcpp-httplib.so libbrotlicommon.so.1 \
         libbrotlidec.so.1 libbrotlienc.so.1 libmosquitto.so librdkafka.so libsasl2.so.2; do
  [[ -e $lib/$a ]] || { echo "gpu-prepare: no $lib/$a (install libgtest-dev libgmock-dev libcpp-httplib-dev libmosquitto-dev librdkafka-dev)" >&2; exit 1; }
  cp -a "$lib/$a"* ".devdeps$lib/"  # with the files its links point to
done
# The bundle keeps some libraries without their soname link (libzmq.so.5.2.4 but no libzmq.so.5): our
# binaries record the soname, so the loader on the GPU machine needs the link.
while IFS= read -r -d '' so_file; do
  soname=$(readelf -d "$so_file" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p' || true)  # not ELF: none
  dir=$(dirname "$so_file")
  if [[ -n $soname && ! -e $dir/$soname ]]; then ln -s "$(basename "$so_file")" "$dir/$soname"; fi
done < <(find .devdeps -type f -name '*.so.*' -print0)
tar czf .devdeps.tgz .devdeps
tools/make-gpu-media.sh .devmedia "$@"
# What the device tool will carry: tracked and untracked-not-ignored files, plus the two carried paths.
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
deps=$(stat -c %s .devdeps.tgz) media=$(du -sb .devmedia | cut -f1)
total=$((tree + deps + media))
printf 'gpu-prepare: working tree %.1f MB + .devdeps.tgz %.1f MB + .devmedia %.1f MB = %.1f MB (the device tool carries at most 67.1 MB)\n' \
  "$(echo "$tree / 1000000" | bc -l)" "$(echo "$deps / 1000000" | bc -l)" "$(echo "$media / 1000000" | bc -l)" "$(echo "$total / 1000000" | bc -l)"
(( total < 64 * 1024 * 1024 )) || { echo "gpu-prepare: too much to carry; make fewer or smaller clips" >&2; exit 1; }
