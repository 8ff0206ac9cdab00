#!/usr/bin/env bash
# test.sh - install dependencies, build, and run every test.  This is the
# command .ci/run calls and README.md shows.
#
#   scripts/test.sh            (as root on a fresh Debian bookworm machine)
#
# Fails if any test fails, and also if CTest reports any test as skipped, not
# run or disabled: a test that did not run proves nothing.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
build=${BUILD_DIR:-$top/build}
cache=${GCULAUNCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gculaunch}
export GCULAUNCH_CACHE_DIR=$cache

"$here/bootstrap.sh"
"$here/build.sh" -DGCULAUNCH_CACHE_DIR="$cache"

# The torch 2.6 root the integration tests use (made once, then reused).
"$here/make_torch2_root.sh" "$cache/torch2-trixie"

log=$build/ctest.log
set +e
(cd "$build" && ctest --output-on-failure --timeout 900 -j "${JOBS:-$(nproc)}") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if grep -qE '\*\*\*(Not Run|Skipped)|\(Disabled\)|tests? did not run' "$log"; then
  echo "test.sh: some tests were skipped, disabled or not run; that is a failure" >&2
  exit 1
fi
exit "$rc"
