#!/usr/bin/env bash
# build.sh - configure and build gculaunch into build/ (or $BUILD_DIR).
#
#   scripts/build.sh [--target TARGET]... [extra cmake -D options]
#
# Without --target it builds everything, the tests included: it configures with
# -DGCULAUNCH_TESTS=ON, so that a build directory the demo configured without tests gets them
# back.  With --target (or BUILD_TARGET=TARGET) it builds only that target and leaves
# GCULAUNCH_TESTS as it is; scripts/demo_allreduce.sh builds only `gculaunch`, configured with
# -DGCULAUNCH_TESTS=OFF (no Catch2, clang or etcd needed).  A later -D option wins over the
# default.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
build=${BUILD_DIR:-$top/build}
jobs=${JOBS:-$(nproc)}

targets=()
[[ -n ${BUILD_TARGET:-} ]] && targets+=("$BUILD_TARGET")
cmake_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --target) [[ $# -ge 2 ]] || { echo "build.sh: --target needs a target name" >&2; exit 2; }
              targets+=("$2"); shift 2 ;;
    --target=*) targets+=("${1#--target=}"); shift ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
  cmake_args=(-DGCULAUNCH_TESTS=ON "${cmake_args[@]}")
fi

cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "${cmake_args[@]}" >/dev/null
if [[ ${#targets[@]} -eq 0 ]]; then
  cmake --build "$build" -j "$jobs"
else
  cmake --build "$build" -j "$jobs" --target "${targets[@]}"
fi
echo "build: $build/launcher/gculaunch"
