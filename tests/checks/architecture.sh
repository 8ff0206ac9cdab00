#!/usr/bin/env bash
# checks.architecture: docs/architecture.md's picture and table of layers say what
# cmake/layers.cmake enforces, and this check can fail.
#   1. the real document passes (tests/checks/architecture_map.py compares both places with
#      every GCULAUNCH_LAYER_ALLOW_<layer> row);
#   2. copies of it with a layer missing from the picture, a use the rules forbid, and a use
#      left out of the table each fail, with a line naming the layer.
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
echo "architecture: all checks passed"
