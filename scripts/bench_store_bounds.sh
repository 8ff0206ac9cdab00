#!/usr/bin/env bash
# bench_store_bounds.sh - the store's memory bounds under attack (issue 26), in one run.
#
#   scripts/bench_store_bounds.sh [--no-torch2] [--no-launch]
#
# For each attack of docs/tcpstore-protocol.md section 6.1 (MULTI_GET amplification, a
# watcher that never reads, GETs never read, partial frames, APPEND past the value limit,
# garbage connections) it prints the peak RSS of `gculaunch store` and of torch's classic
# TCPStore server (torch 1.13 from /usr/bin/python3; torch 2.x from the cached root of
# scripts/make_torch2_root.sh, when it exists), how a well-behaved client fared during the
# attack, and, in a launch, the time from a rank's failure to gculaunch's exit during it.
# Needs a build (scripts/build.sh).  Loopback only; bounded (about 3 to 5 minutes; 15 at
# most).  Nothing is asserted: it prints numbers (scripts/bench_store_bounds.py says what
# each one means).
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
build=${BUILD_DIR:-$top/build}
root=${GCULAUNCH_CACHE_DIR:-$HOME/.cache/gculaunch}/torch2-trixie

torch2=()
extra=()
for arg in "$@"; do
  case $arg in
    --no-torch2) torch2=(none) ;;
    --no-launch) extra+=(--no-launch) ;;
    *) echo "bench_store_bounds.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[[ -x "$build/launcher/gculaunch" ]] || {
  echo "bench_store_bounds.sh: $build/launcher/gculaunch is missing (run scripts/build.sh)" >&2
  exit 2
}
if [[ ${#torch2[@]} == 0 && -x "$root/usr/bin/python3" ]]; then
  extra+=(--torch2 "$here/in_root.sh" "$root" /usr/bin/python3)
fi
exec timeout --kill-after=10 900 /usr/bin/python3 "$here/bench_store_bounds.py" \
  --gculaunch "$build/launcher/gculaunch" --torch-python /usr/bin/python3 "${extra[@]}"
