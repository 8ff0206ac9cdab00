#!/usr/bin/env bash
# test.sh - install dependencies, build, and run every test.  This is the
# command .ci/run calls and README.md shows.
#
#   scripts/test.sh            (as root on a fresh Debian bookworm machine)
#
# Fails if any test fails, and also if CTest reports any test as skipped, not
# run or disabled: a test that did not run proves nothing.  Whatever the outcome, it ends
# with the ten slowest tests.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
build=${BUILD_DIR:-$top/build}
cache=${GCULAUNCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gculaunch}
export GCULAUNCH_CACHE_DIR=$cache

"$here/bootstrap.sh"
# Line-only debug information, as the demo's build (README.md): cheaper to compile and to link
# into every test program; enough for the packaging checks to resolve addresses.
"$here/build.sh" -DGCULAUNCH_CACHE_DIR="$cache" -DGCULAUNCH_DEBUG_INFO=lines

# The torch 2.6 root the integration tests use (made once, then reused).
"$here/make_torch2_root.sh" "$cache/torch2-trixie"

log=$build/ctest.log
set +e
(cd "$build" && ctest --output-on-failure --timeout 900 -j "${JOBS:-$(nproc)}") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# CTest's lines "12/240 Test  #37: base.parse: a name ........   Passed    1.23 sec" (or
# "***Failed", "***Timeout"): seconds and name, slowest first.
echo "test.sh: the ten slowest tests:"
sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: (.*[^ ]) \.{3,} *.* ([0-9]+\.[0-9]+) sec$/\2\t\1/p' "$log" |
  sort -t $'\t' -k1,1 -rn | awk -F '\t' 'NR <= 10 { printf "  %8.2f s  %s\n", $1, $2 }'
if grep -qE '\*\*\*(Not Run|Skipped)|\(Disabled\)|tests? did not run' "$log"; then
  echo "test.sh: some tests were skipped, disabled or not run; that is a failure" >&2
  exit 1
fi
exit "$rc"
