#!/usr/bin/env bash
# build.sh - configure and build gculaunch and its tests into build/ (or $BUILD_DIR).
#
#   scripts/build.sh [extra cmake -D options]
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
build=${BUILD_DIR:-$top/build}
jobs=${JOBS:-$(nproc)}

cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$build" -j "$jobs"
echo "build: $build/launcher/gculaunch"
