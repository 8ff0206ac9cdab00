#!/usr/bin/env bash
# in_root.sh - run one program of another Debian root (for example the one
# scripts/make_torch2_root.sh makes) as though it were installed on this
# machine.
#
#   scripts/in_root.sh ROOT PROGRAM [ARGS...]
#
# Example: scripts/in_root.sh ~/.cache/gculaunch/torch2-trixie /usr/bin/python3 -c 'import torch'
#
# PROGRAM is an absolute path inside ROOT.  It runs chrooted into ROOT, in a
# mount namespace of its own, and sees:
#   * the host's /proc, /dev (with /dev/shm and /dev/pts), /sys (read-only),
#     /tmp, /etc/hosts and /etc/resolv.conf (both read-only), and the current
#     directory (its physical path), all at the same paths as outside, so that
#     file arguments, temp files and host names mean the same inside;
#   * every directory named in IN_ROOT_BINDS (colon-separated absolute paths),
#     also at the same path, read-write;
#   * the same environment (PYTHONHOME excepted: a host value never fits the
#     root's Python), the same network namespace and the same open fds.
#
# Nothing is relayed: the script execs unshare, which execs this script
# again inside the new namespace, which mounts and then execs unshare
# --root, which execs PROGRAM.  The pid the caller started IS the program,
# so signals reach it and its exit status (or killing signal) is what the
# caller reaps.  The mounts exist only in that namespace and disappear with
# its last process; nothing is unmounted by hand and nothing shows on the
# host.  The only lasting trace in ROOT is an empty mount point made for the
# current directory or an IN_ROOT_BINDS entry when ROOT has none yet.
#
# Needs root; as another user it tries a user namespace (unshare
# --map-root-user), which the kernel may refuse.
#
# Exit status: PROGRAM's, or 125 with a one-line message when ROOT cannot be
# entered.
set -euo pipefail
prog=${0##*/}
die() {
  printf '%s: error: %s\n' "$prog" "$*" >&2
  exit 125
}
shopt -s execfail

if [[ -z "${_IN_ROOT_DIR:-}" ]]; then
  # ---- on the host -----------------------------------------------------------
  [[ $# -ge 2 ]] || die "usage: $prog ROOT PROGRAM [ARGS...]"
  [[ -d "$1" ]] || die "ROOT '$1' is not a directory"
  root=$(cd -- "$1" 2>/dev/null && pwd -P) || die "cannot enter the directory ROOT '$1'"
  [[ "$root" != / ]] || die "ROOT must not be /"
  [[ "$2" == /* ]] || die "PROGRAM must be an absolute path inside ROOT (got '$2')"
  [[ -e "$root$2" || -L "$root$2" ]] ||
    die "$root has no $2 (make the root first, e.g. scripts/make_torch2_root.sh)"
  command -v unshare >/dev/null || die "unshare is missing (apt-get install util-linux)"
  ns=(unshare --mount --propagation private)
  if [[ $EUID -ne 0 ]]; then
    ns+=(--map-root-user)
    # only root is sure to get a mount namespace; ask once, so that a refusal
    # ends here with status 125 rather than with unshare's own status 1
    "${ns[@]}" -- true 2>/dev/null ||
      die "cannot enter a private mount namespace: run as root (this kernel refuses a user namespace)"
  fi
  shift
  export _IN_ROOT_DIR=$root
  # shellcheck disable=SC2093  # execfail is set: a failed exec goes on to die
  exec "${ns[@]}" -- "$BASH" "${BASH_SOURCE[0]}" "$@"
  die "cannot enter a private mount namespace (needs root)"
fi

# ---- inside the new mount namespace (same pid) -------------------------------
root=$_IN_ROOT_DIR
unset _IN_ROOT_DIR PYTHONHOME
# Refuse to mount anything into the caller's own namespace: that happens only
# when _IN_ROOT_DIR came from the environment instead of from the code above.
if [[ /proc/self/ns/mnt -ef /proc/$PPID/ns/mnt ]]; then
  die "internal: not in a private mount namespace (is _IN_ROOT_DIR set in the environment?)"
fi
cd -P . 2>/dev/null || die "cannot resolve the current directory"
cwd=$PWD

shown=()  # host directories already visible inside at the same path
fstab=    # the binds, in order, as fstab lines for one `mount -a`

is_shown() {
  local d
  for d in "${shown[@]}"; do
    [[ "$1" == "$d" || "$1" == "$d"/* ]] && return 0
  done
  return 1
}

# place PATH VAR: set VAR to where host PATH lands inside ROOT; fails when a
# symlink inside ROOT would take it out of ROOT.  Symlinks are rare on these paths,
# so realpath (a process) runs only when one is met.
place() {
  local p=$root c rest=${1#/}
  while [[ -n "$rest" ]]; do
    c=${rest%%/*}
    [[ "$rest" == */* ]] && rest=${rest#*/} || rest=
    p=$p/$c
    if [[ -L "$p" ]]; then
      p=$(realpath -m -- "$root$1")
      [[ "$p" == "$root"/* ]] || return 1
      break
    fi
  done
  printf -v "$2" '%s' "$p"
}

# fstab_field S VAR: set VAR to S with the characters that fstab cannot hold
# literally escaped
fstab_field() {
  local s=${1//\\/\\134}
  s=${s// /\\040}
  s=${s//$'\t'/\\011}
  s=${s//$'\n'/\\012}
  printf -v "$2" '%s' "$s"
}

# show SRC [ro] [optional]: bind host SRC at the same path inside ROOT.  An
# optional SRC is left out when it is missing, when its place leads out of
# ROOT or when no mount point can be made for it.
show() {
  local src=$1 mode=${2:-rw} optional=${3:-} dst opts f_src f_dst
  if [[ ! -e "$src" ]]; then
    [[ -n "$optional" ]] && return 0
    die "$src does not exist"
  fi
  if ! place "$src" dst; then
    [[ -n "$optional" ]] && return 0
    die "$root$src leads out of ROOT through a symlink"
  fi
  if [[ -d "$src" ]]; then
    [[ -d "$dst" ]] || mkdir -p -- "$dst" 2>/dev/null || die "cannot make the mount point $dst"
    opts=rbind
    shown+=("$src")
  else
    if [[ ! -e "$dst" ]] && ! { mkdir -p -- "${dst%/*}" && : >"$dst"; } 2>/dev/null; then
      [[ -n "$optional" ]] && return 0
      die "cannot make the mount point $dst"
    fi
    opts=bind
  fi
  [[ $mode == rw ]] || opts+=,ro
  fstab_field "$src" f_src
  fstab_field "$dst" f_dst
  fstab+="$f_src $f_dst none $opts 0 0"$'\n'
}

# Trees that may hold ROOT itself come first, so that their recursive binds
# do not copy the mounts made below ROOT into themselves.
show /tmp
if [[ -n "${IN_ROOT_BINDS:-}" ]]; then
  IFS=: read -r -a binds <<<"$IN_ROOT_BINDS"
  for b in "${binds[@]}"; do
    [[ -n "$b" ]] || continue
    [[ "$b" == /* ]] || die "IN_ROOT_BINDS entries must be absolute paths (got '$b')"
    cd -P -- "$b" 2>/dev/null || die "IN_ROOT_BINDS entry '$b' is not a directory"
    b=$PWD  # its physical path, found without a subshell
    cd -- "$cwd"
    is_shown "$b" || show "$b"
  done
fi
if [[ "$cwd" != / ]] && ! is_shown "$cwd"; then
  show "$cwd"
fi
show /proc
show /dev
show /sys ro
show /etc/hosts ro optional
show /etc/resolv.conf ro optional

# One `mount -a` does every bind (a process costs more than a mount).  It
# needs its fstab in a regular file: that goes on a small tmpfs at ROOT/tmp,
# which lives only in this namespace and which the bind of /tmp then covers.
rtmp=
place /tmp rtmp || die "$root/tmp leads out of ROOT through a symlink"
[[ -d "$rtmp" ]] || die "$root has no /tmp directory"
mount -t tmpfs -o size=64k,mode=700 in_root "$rtmp" 2>/dev/null ||
  die "cannot mount a tmpfs on $rtmp"
printf '%s' "$fstab" >"$rtmp/fstab"
if ! mount -a -T "$rtmp/fstab" 2>/dev/null; then
  err=$(mount -a -T "$rtmp/fstab" 2>&1 || true)
  die "cannot bind the host's directories into $root: ${err%%$'\n'*}"
fi

# chroot + chdir + exec in one step, keeping the pid
# shellcheck disable=SC2093  # execfail is set: a failed exec goes on to die
exec unshare --root="$root" --wd="$cwd" -- "$@"
die "cannot start $1 inside $root"
