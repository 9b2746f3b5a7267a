#!/usr/bin/env bash
# Compiles every C++ source (syntax only) against GCC 13's standard library headers, as the GPU
# machine's g++ 13 does. GCC 13's headers include fewer of each other than Debian 12's GCC 12's, so a
# missing <cstdint> builds here and fails there (2026-12-05: it cost a device call). Run it before a
# device call when sources were added since the last one; about 15 minutes on 2 cores.
#   tools/check-gcc13-headers.sh [regex of sources, default all]
# It fetches libstdc++-13-dev from Debian 13 (trixie) once into /opt/libstdcxx13 (headers only; this
# machine's g++ 12 compiles against them), and configures a scratch build dir for its compile commands.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
filter=${1:-.}
headers=/opt/libstdcxx13
if [[ ! -d $headers/usr/include/c++/13 ]]; then
  mirror=http://deb.debian.org/debian
  # (awk stops reading at the package: xz then dies of SIGPIPE, which pipefail would make fatal)
  deb=$(set +o pipefail; curl -sf "$mirror/dists/trixie/main/binary-amd64/Packages.xz" | xz -dc |
        awk '/^Package: libstdc\+\+-13-dev$/{p=1} p&&/^Filename:/{print $2; exit}')
  [[ -n $deb ]] || { echo "check-gcc13-headers: no libstdc++-13-dev in trixie's index" >&2; exit 1; }
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  curl -sf -o "$tmp/libstdcxx13.deb" "$mirror/$deb"
  dpkg -x "$tmp/libstdcxx13.deb" "$headers"
fi
scratch=/tmp/vapipe-gcc13-check
cmake -S "$root" -B "$scratch" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_BUILD_TYPE=Release > "$scratch.configure.log" 2>&1 ||
  { echo "check-gcc13-headers: configure failed, see $scratch.configure.log" >&2; exit 1; }
python3 - "$scratch/compile_commands.json" "$headers" "$filter" > "$scratch.cmds" <<'PY'
import json, re, shlex, sys
cc, headers, pattern = json.load(open(sys.argv[1])), sys.argv[2], re.compile(sys.argv[3])
std = ["-nostdinc++", "-isystem", headers + "/usr/include/c++/13",
       "-isystem", headers + "/usr/include/x86_64-linux-gnu/c++/13"]
for entry in cc:
    src = entry["file"]
    args = shlex.split(entry["command"])
    if not src.endswith(".cpp") or not args[0].endswith(("c++", "g++")) or not pattern.search(src):
        continue
    kept, skip = [], False
    for a in args[1:]:
        if skip: skip = False; continue
        if a == "-o": skip = True; continue
        if a != "-c": kept.append(a)
    print("cd %s && g++ %s -fsyntax-only %s" % (shlex.quote(entry["directory"]),
          " ".join(map(shlex.quote, std)), " ".join(map(shlex.quote, kept))))
PY
total=$(wc -l < "$scratch.cmds")
echo "check-gcc13-headers: $total sources against $headers/usr/include/c++/13"
failed=0
while IFS= read -r cmd; do
  if ! out=$(bash -c "$cmd" 2>&1); then
    failed=$((failed + 1)); grep -E 'error' <<< "$out" | head -5
  fi
done < "$scratch.cmds"
echo "check-gcc13-headers: $failed of $total sources failed"
(( failed == 0 ))
