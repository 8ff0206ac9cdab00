#!/usr/bin/env bash
# build_wheel.sh - pack the built gculaunch executable into a wheel that pip installs offline.
#
#   scripts/build_wheel.sh [--binary PATH] [--out DIR]
#
# Defaults: the build's executable (build/launcher/gculaunch, or $BUILD_DIR's) and dist/.
# Writes DIR/gculaunch-<version>-py3-none-manylinux1_x86_64.whl (the version is what
# `gculaunch --version` prints; the executable inside is stripped) and, when the build wrote
# the executable's debug file, DIR/gculaunch-<version>.debug beside it.  Needs only python3's
# standard library and binutils' strip (packaging/make_wheel.py says what goes in and why).
#
#   pip install dist/gculaunch-*.whl      # then: gculaunch ..., or python -m gculaunch ...
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
binary=${BUILD_DIR:-$top/build}/launcher/gculaunch
out=$top/dist
usage() { echo "usage: build_wheel.sh [--binary PATH] [--out DIR]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --binary) [[ $# -ge 2 ]] || usage; binary=$2; shift 2 ;;
    --binary=*) binary=${1#--binary=}; shift ;;
    --out) [[ $# -ge 2 ]] || usage; out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "build_wheel.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
python=$(command -v python3 || true)
[[ -n $python ]] || { echo "build_wheel.sh: error: python3 is missing (fix: apt-get install python3)" >&2; exit 1; }
exec "$python" "$top/packaging/make_wheel.py" --binary "$binary" --out "$out"
