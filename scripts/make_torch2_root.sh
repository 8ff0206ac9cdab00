#!/usr/bin/env bash
# make_torch2_root.sh - create (once) the Debian trixie root whose python3 has
# torch 2.6 (Debian's python3-torch), and print its path.  The tests and
# the benchmarks (bench/vs_torchrun.py) run that python3 with scripts/in_root.sh.
#
#   scripts/make_torch2_root.sh [DIR]
#
# DIR defaults to torch2-trixie in the gculaunch cache directory:
# $GCULAUNCH_CACHE_DIR, else $XDG_CACHE_HOME/gculaunch, else ~/.cache/gculaunch.
#
# The work is scripts/make_test_root.sh's: built once in a temporary
# directory, renamed to DIR only when `import torch` (2.x) works in it,
# serialised with a lock, a partial leftover removed, a finished DIR reused
# at once.  A DIR made some other way is used as it is if torch 2.x imports
# in it.  Takes a few minutes and about 1.6 GB; needs root and a Debian
# mirror (GCULAUNCH_DEBIAN_MIRROR to choose one).
#
# Debian builds this torch without libuv: a TCPStore there needs
# use_libuv=False, and torch 2.6's torchrun needs USE_LIBUV=0.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
[[ $# -le 1 && "${1:-}" != -* ]] || { echo "usage: ${0##*/} [DIR]" >&2; exit 2; }
cache=${GCULAUNCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gculaunch}
dir=${1:-$cache/torch2-trixie}

exec "$here/make_test_root.sh" --need-mib 3072 --as "${0##*/}" trixie "$dir" python3-torch -- \
  /usr/bin/python3 -c '
import sys
import torch
print("torch %s, python %s" % (torch.__version__, sys.version.split()[0]))
sys.exit(0 if torch.__version__.startswith("2.") else "torch is not 2.x")'
