#!/usr/bin/env bash
# make_test_root.sh - create (once) a minimal Debian root for tests that must
# run something of another Debian release, and print its path.
#
#   scripts/make_test_root.sh [--need-mib N] [--as NAME] SUITE DIR [EXTRA_PACKAGES] [-- CHECK...]
#
# Example: scripts/make_test_root.sh bullseye ~/.cache/gculaunch/bullseye-root python3-minimal
# (scripts/make_torch2_root.sh uses it for the torch 2.6 root.)
#
# * DIR already finished (marker file .gculaunch-root-ok): nothing is done.
# * Otherwise debootstrap --variant=minbase builds it in DIR.partial.<pid>,
#   which is renamed to DIR only when complete and, if a CHECK program is
#   given, only once CHECK (a program inside the root with its arguments, run
#   through scripts/in_root.sh) succeeds in it.
# * Runs for the same DIR are serialised with a lock (DIR.lock): a second run
#   waits, then finds DIR done.  A leftover DIR.partial.* of an interrupted
#   run is removed first.
# * A DIR without the marker is taken as it is when CHECK succeeds in it (a
#   root made by hand or by an older script); otherwise it is refused, never
#   removed: it may not be a root at all.
# * /etc/hosts gets a localhost line (debootstrap leaves it empty; every real
#   container has one).
#
# --need-mib N: refuse to start with less than N MiB free beside DIR
# (default 1024).  --as NAME: the name messages start with (for a script
# that calls this one).  GCULAUNCH_DEBIAN_MIRROR, if set, is the mirror URL given
# to debootstrap (default: its own, deb.debian.org).
#
# Needs root, debootstrap (scripts/bootstrap.sh installs it) and a reachable
# Debian mirror.  Stdout is only DIR, as the last line; progress and errors
# go to stderr.
set -euo pipefail
prog=${0##*/}
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
die() { printf '%s: error: %s\n' "$prog" "$*" >&2; exit 1; }
say() { printf '%s: %s\n' "$prog" "$*" >&2; }
usage() { echo "usage: $prog [--need-mib N] [--as NAME] SUITE DIR [EXTRA_PACKAGES] [-- CHECK...]" >&2; exit 2; }

need_mib=1024
while [[ $# -gt 0 ]]; do
  case $1 in
    --need-mib) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; need_mib=$2; shift 2 ;;
    --as) [[ -n "${2:-}" ]] || usage; prog=$2; shift 2 ;;
    *) break ;;
  esac
done
args=()
while [[ $# -gt 0 && "$1" != -- ]]; do args+=("$1"); shift; done
check=()
if [[ $# -gt 0 ]]; then shift; check=("$@"); fi
[[ ${#args[@]} -ge 2 && ${#args[@]} -le 3 ]] || usage
suite=${args[0]}
dir=$(realpath -m -- "${args[1]}")
extra=${args[2]:-}
[[ "$dir" != / ]] || die "DIR must not be /"
marker=$dir/.gculaunch-root-ok
mirror=${GCULAUNCH_DEBIAN_MIRROR:-}

[[ -f "$marker" ]] && { echo "$dir"; exit 0; }
[[ $EUID -eq 0 ]] || die "$dir is not made yet and making it needs root (run as root)"
mkdir -p -- "$(dirname -- "$dir")" || die "cannot create the directory that holds $dir"

# check_in ROOT [quiet]: run CHECK inside ROOT, its output on stderr (or
# nowhere).  From / so that in_root.sh makes no mount point inside ROOT for
# the current directory.
check_in() {
  if [[ -n "${2:-}" ]]; then
    (cd / && "$here/in_root.sh" "$1" "${check[@]}") >/dev/null 2>&1
  else
    (cd / && "$here/in_root.sh" "$1" "${check[@]}") >&2
  fi
}

exec 9>"$dir.lock" || die "cannot create the lock file $dir.lock"
if ! flock -n 9; then
  say "another run is making $dir; waiting for it (at most an hour)"
  flock -w 3600 9 || die "still locked after an hour: another $prog on $dir is stuck; end it"
fi
[[ -f "$marker" ]] && { echo "$dir"; exit 0; }

# Leftovers of interrupted runs.  Nothing is writing them: a builder holds
# the lock as long as it (or a debootstrap it left behind) runs.
for old in "$dir".partial.*; do
  [[ -e "$old" ]] || continue
  say "removing $old, left by an interrupted run"
  rm -rf --one-file-system -- "$old" ||
    die "cannot remove $old (is something mounted below it?); remove it by hand"
done

if [[ -e "$dir" ]]; then
  if [[ -d "$dir" && -z "$(ls -A -- "$dir")" ]]; then
    rmdir -- "$dir"
  elif [[ ${#check[@]} -gt 0 ]] && check_in "$dir" quiet; then
    say "$dir was made elsewhere and passes the check; using it"
    touch -- "$marker"
    echo "$dir"
    exit 0
  else
    die "$dir exists but is not a finished root (no ${marker##*/}${check:+ and its check fails}); remove it (rm -rf --one-file-system $dir) or choose another DIR"
  fi
fi

command -v debootstrap >/dev/null || die "debootstrap is missing (run scripts/bootstrap.sh)"
command -v unshare >/dev/null || die "unshare is missing (apt-get install util-linux)"
free_mib=$(df -Pm -- "$(dirname -- "$dir")" | awk 'NR == 2 { print $4 }')
if [[ "$free_mib" =~ ^[0-9]+$ && $free_mib -lt $need_mib ]]; then
  die "only $free_mib MiB free beside $dir, $need_mib MiB are needed; free some space or choose another DIR"
fi

tmp=$dir.partial.$$
log=$dir.debootstrap.log
child=
cleanup() {
  if [[ -n "$child" ]]; then
    # debootstrap runs in a session of its own: end all of it, then wait
    # (bounded) until none of it is left before removing its files
    kill -TERM -- "-$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
      kill -0 -- "-$child" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$child" 2>/dev/null || true
  fi
  if [[ -e "$tmp" ]]; then rm -rf --one-file-system -- "$tmp"; fi
}
trap cleanup EXIT
trap 'say "interrupted; removing $tmp"; exit 130' INT
trap 'say "terminated; removing $tmp"; exit 143' TERM HUP

mkdir -- "$tmp"
say "debootstrap $suite${extra:+ with $extra} into $tmp (takes minutes; log $log)"
# debootstrap runs in a session of its own, so that the traps above can end
# all of it; with a parent-death signal, so that it also stops when this
# script is killed outright (SIGKILL, or the caller's whole process group);
# and in a private mount namespace, so that the proc and sys it mounts in
# the target vanish with it, however it ends.  Neither setsid (a background
# job of a script leads no process group), setpriv nor unshare forks: $! is
# debootstrap itself.
setsid setpriv --pdeathsig KILL -- unshare --mount --propagation private -- \
  debootstrap --variant=minbase ${extra:+--include="$extra"} "$suite" "$tmp" ${mirror:+"$mirror"} \
  >"$log" 2>&1 </dev/null &
child=$!
rc=0
wait "$child" || rc=$?
child=
if [[ $rc -ne 0 ]]; then
  if grep -qiE 'No space left on device' "$log"; then
    why="the disk is full"
  elif grep -qE "Failed getting release file|Couldn't download|Unable to fetch|Could not resolve|Temporary failure resolving" "$log"; then
    why="cannot reach the Debian mirror ${mirror:-deb.debian.org} (set GCULAUNCH_DEBIAN_MIRROR to one that works)"
  else
    why=$(grep -E '^E: ' "$log" | tail -n 1 || true)
    why=${why:-exit status $rc}
  fi
  die "debootstrap $suite failed: $why; see $log"
fi
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
if [[ ${#check[@]} -gt 0 ]] && ! check_in "$tmp"; then
  die "the new $suite root fails its check (${check[*]}); nothing was kept"
fi
rm -f -- "$log"
touch -- "$tmp/.gculaunch-root-ok"
mv -T -- "$tmp" "$dir"
trap - EXIT
echo "$dir"
