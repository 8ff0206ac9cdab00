#!/usr/bin/env bash
# checks.unused_functions: no product function that the executable never uses (unless its name
# ends in ForTest, or tests/checks/unused_functions.allow says why it stays), and no function
# declared in a product header that nothing defines.
#   1. links gculaunch once more (the target gculaunch_gc_sections: every object of the product
#      libraries, --gc-sections --print-gc-sections; the objects are already compiled with
#      -ffunction-sections, so this is one link, not a second compile) and hands the linker's
#      list of removed functions to tests/checks/unused_functions.py, with the product objects
#      for the declarations;
#   2. proves that the check can fail: a linker's list that names a function as removed, and a
#      copy of the tree with a declaration nothing defines, each fail, naming it.
set -euo pipefail

die() {
  echo "unused_functions: error: $*" >&2
  exit 1
}

src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
build=${GCULAUNCH_BUILD_DIR:-$src/build}
scan=$src/tests/checks/unused_functions.py
[[ -f $build/CMakeCache.txt ]] ||
  die "no CMake build directory at $build (set GCULAUNCH_BUILD_DIR, or build with scripts/build.sh)"
command -v c++filt >/dev/null && command -v nm >/dev/null && command -v readelf >/dev/null ||
  die "c++filt, nm or readelf not found (install binutils)"

work=$(mktemp -d "${TMPDIR:-/tmp}/gculaunch-unused.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# The linker prints the removed sections only when it runs: remove the last link's output.
binary=$(find "$build/launcher/app" -maxdepth 1 -name gculaunch_gc_sections -type f || true)
[[ -z $binary ]] || rm -f -- "$binary"
cmake --build "$build" --target gculaunch_gc_sections -j "${JOBS:-2}" >"$work/link.log" 2>&1 ||
  die "linking gculaunch_gc_sections failed: $(tail -n 20 "$work/link.log")"
grep -q "removing unused section" "$work/link.log" ||
  die "the link printed no removed section (is --print-gc-sections in its link options?)"

status=0
out=$(python3 "$scan" "$src" "$build" "$work/link.log") || status=$?
echo "$out"
((status == 0)) || die "unused functions or undefined declarations (see above)"

# ---- the check can fail ----
# A function the executable uses, DecideStoreHost, in a made-up line of the linker's list: the
# only line of that list, so that the scan stays short.
object=$build/launcher/cluster/CMakeFiles/gculaunch_cluster.dir/store_host.cc.o
symbol=$(nm --defined-only "$object" | awk '$2 == "T" && $3 ~ /DecideStoreHost/ && !n++ {print $3}')
[[ -n $symbol ]] || die "no DecideStoreHost in $object (was it renamed? update this check)"
echo "ld: removing unused section '.text.$symbol' in file '$object'" >"$work/extra.log"
status=0
out=$(python3 "$scan" "$src" "$build" "$work/extra.log") || status=$?
((status == 1)) || die "an unused function: expected exit status 1, got $status: $out"
[[ $out == *"gculaunch::DecideStoreHost("*"): the executable never uses it (store_host.cc)"* ]] ||
  die "an unused function is not named: $out"
echo "unused_functions: ok: an unused function fails"

# A declaration nobody defines, in a copy of the product headers.
root=$work/root
mkdir -p "$root/tests/checks"
cp -R -- "$src/base" "$src/rendezvous" "$src/etcd" "$src/launcher" "$root/"
cp -- "$src/tests/checks/unused_functions.allow" "$root/tests/checks/"
printf '#pragma once\nnamespace gculaunch {\nint NeverDefinedForThisCheck(int n);\n}\n' \
  >"$root/launcher/run/undefined.h"
status=0
out=$(python3 "$scan" "$root" "$build" /dev/null) || status=$?
((status == 1)) || die "an undefined declaration: expected exit status 1, got $status: $out"
[[ $out == *"launcher/run/undefined.h:3: gculaunch::NeverDefinedForThisCheck is declared but defined nowhere"* ]] ||
  die "an undefined declaration is not named: $out"
echo "unused_functions: ok: a declaration nothing defines fails"
echo "unused_functions: all checks passed"
