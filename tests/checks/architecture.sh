#!/usr/bin/env bash
# checks.architecture: docs/architecture.md's picture and table of layers say what
# cmake/layers.cmake enforces and what the layers hold, the rendezvous backends stay in their
# folders, and this check can fail.
#   1. the real document and tree pass (tests/checks/architecture_map.py compares both places
#      with every GCULAUNCH_LAYER_ALLOW_<layer> row, the "what it holds" column with the
#      headers, and looks for backend names outside the backends' folders and table);
#   2. copies of the document with a layer missing from the picture, a use the rules forbid,
#      a use left out of the table, a header left out of "what it holds" and a name no header
#      declares each fail, with a line naming the layer;
#   3. a copy of the tree with a backend named outside its folder fails, naming the file.
set -euo pipefail

die() {
  echo "architecture: error: $*" >&2
  exit 1
}

src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
doc=$src/docs/architecture.md
scan=$src/tests/checks/architecture_map.py
[[ -f $doc && -f $src/cmake/layers.cmake ]] || die "no docs/architecture.md or cmake/layers.cmake under $src"

out=$(python3 "$scan" "$src") || die "docs/architecture.md disagrees with cmake/layers.cmake: $out"
echo "$out"

work=$(mktemp -d "${TMPDIR:-/tmp}/gculaunch-architecture.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# expect_failure WHAT SED-SCRIPT MESSAGE: the document edited by SED-SCRIPT fails with MESSAGE.
expect_failure() {
  local what=$1 script=$2 message=$3 edited=$work/architecture.md out status=0
  sed -E "$script" "$doc" >"$edited"
  cmp -s "$doc" "$edited" && die "$what: the edit changed nothing (sed: $script)"
  out=$(python3 "$scan" "$src" "$edited") || status=$?
  ((status == 1)) || die "$what: expected exit status 1, got $status: $out"
  [[ $out == *"$message"* ]] || die "$what: expected \"$message\" in: $out"
  echo "architecture: ok: $what fails"
}

expect_failure "a layer missing from the picture" '/^  ops  /d' \
  "the picture has no row for layer ops"
expect_failure "a use the rules forbid, in the picture" \
  's/^(  sys +processes, signals, .*)frontend$/\1frontend, run/' \
  "the picture says sys uses base, frontend, run"
expect_failure "a use left out of the table" \
  's/^(\| check \|.*)\| base, etcd, frontend, sys \|/\1| base, frontend, sys |/' \
  "the table says check uses base, frontend, sys"
expect_failure "a header left out of what it holds" 's/, warm standbys \(`StandbyPool`\)//' \
  "the table's \"what it holds\" for run does not name standby_pool.h"
expect_failure "a name no header of the layer declares" 's/`WorkerGroup`/`WorkerCrowd`/' \
  "the table's \"what it holds\" for run names \`WorkerCrowd\`, which no header of that layer declares"

# A backend named outside its folder, in a copy of the tree.
root=$work/root
mkdir -p "$root"
cp -R -- "$src/base" "$src/rendezvous" "$src/etcd" "$src/launcher" "$src/cmake" "$src/docs" "$root/"
printf '#pragma once\n// Asks whether the job runs on etcd.\n' >"$root/launcher/run/stray.h"
status=0
out=$(python3 "$scan" "$root") || status=$?
((status == 1)) || die "a backend named outside its folder: expected exit status 1, got $status: $out"
[[ $out == *"launcher/run/stray.h:2: names the etcd backend outside its folder"* ]] ||
  die "a backend named outside its folder: the check does not name launcher/run/stray.h: $out"
echo "architecture: ok: a backend named outside its folder fails"
echo "architecture: all checks passed"
