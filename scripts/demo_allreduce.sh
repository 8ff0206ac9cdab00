#!/usr/bin/env bash
# demo_allreduce.sh - install, build, and run the main job: a real 4-process
# PyTorch (gloo) all-reduce on CPU, launched by gculaunch.
#
#   scripts/demo_allreduce.sh [NPROC]
#
# Installs only what the demo needs (scripts/bootstrap.sh demo) and builds only the gculaunch
# executable, without the tests; scripts/test.sh, later, installs the rest and reconfigures the
# same build/ with the tests.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
nproc=${1:-4}

"$here/bootstrap.sh" demo
# Line-only debug information: compiling takes about a sixth less CPU than with -g, and stacks
# read with build/launcher/gculaunch.debug still name functions, files and lines.
"$here/build.sh" --target gculaunch -DGCULAUNCH_TESTS=OFF -DGCULAUNCH_DEBUG_INFO=lines
cd "$top"
# Debian's python3-torch is installed for /usr/bin/python3; another python3 earlier on
# PATH (pyenv, conda) may lack torch, so the interpreter is named.
exec build/launcher/gculaunch --standalone --nproc-per-node "$nproc" --device cpu --python /usr/bin/python3 \
  examples/allreduce.py
