#!/usr/bin/env bash
# make_test_root.sh - create (once) a minimal Debian root for tests that must
# run gculaunch on an older distribution, and print its path.
#
#   scripts/make_test_root.sh SUITE DIR [EXTRA_PACKAGES]
#
# Example: scripts/make_test_root.sh bullseye ~/.cache/gculaunch/bullseye-root python3-minimal
#
# * DIR already complete (marker file .gculaunch-root-ok): nothing is done.
# * Otherwise debootstrap --variant=minbase builds it in DIR.partial.<pid>,
#   which is renamed to DIR only when complete; a leftover from an
#   interrupted run is removed first.  Runs are serialised with a lock.
# * /etc/hosts gets a localhost line (debootstrap leaves it empty; every real
#   container has one).
# Needs root and a reachable Debian mirror.
set -euo pipefail
prog=${0##*/}
die() { printf '%s: error: %s\n' "$prog" "$*" >&2; exit 1; }

[[ $# -ge 2 ]] || { echo "usage: $prog SUITE DIR [EXTRA_PACKAGES]" >&2; exit 2; }
suite=$1
dir=$(realpath -m -- "$2")
extra=${3:-}
marker=$dir/.gculaunch-root-ok

[[ -f "$marker" ]] && { echo "$dir"; exit 0; }
[[ $EUID -eq 0 ]] || die "creating $dir needs root"
command -v debootstrap >/dev/null || die "debootstrap is missing (run scripts/bootstrap.sh)"
mkdir -p -- "$(dirname -- "$dir")"

exec 9>"$dir.lock"
flock 9
[[ -f "$marker" ]] && { echo "$dir"; exit 0; }

for old in "$dir".partial.*; do
  [[ -e "$old" ]] && rm -rf --one-file-system -- "$old"
done
[[ -e "$dir" ]] && rm -rf --one-file-system -- "$dir"

tmp=$dir.partial.$$
log=$tmp.log
trap 'rm -rf --one-file-system -- "$tmp"' EXIT
mkdir -- "$tmp"
echo "$prog: debootstrap $suite into $tmp (takes a minute or two)" >&2
if ! setsid unshare --mount --propagation private -- \
    debootstrap --variant=minbase ${extra:+--include="$extra"} "$suite" "$tmp" \
    >"$log" 2>&1 </dev/null; then
  tail -n 20 -- "$log" >&2
  die "debootstrap $suite failed"
fi
rm -f -- "$log"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
touch "$tmp/.gculaunch-root-ok"
mv -T -- "$tmp" "$dir"
trap - EXIT
echo "$dir"
