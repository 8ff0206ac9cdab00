#!/usr/bin/env bash
# checks.tidy: clang-tidy (the version scripts/bootstrap.sh installs: Debian's 14) with the
# project's .clang-tidy over every source of base/, rendezvous/ and launcher/ (their headers
# through HeaderFilterRegex), using the build's compile_commands.json.  Any warning fails:
# among them readability-function-size, no function over 120 lines.
#
#   TIDY_JOBS (default: the number of CPUs) clang-tidy processes run at once.
set -euo pipefail
src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
build=${GCULAUNCH_BUILD_DIR:-$src/build}
jobs=${TIDY_JOBS:-$(nproc)}
die() { echo "tidy: $*" >&2; exit 1; }
command -v run-clang-tidy >/dev/null || die "run-clang-tidy is missing (run scripts/bootstrap.sh)"
[[ -f "$build/compile_commands.json" ]] || die "$build/compile_commands.json is missing (configure the build first)"

cd "$src"
mapfile -t files < <(find base rendezvous launcher -name '*.cc' -not -path 'rendezvous/bench/*' | sort)
[[ ${#files[@]} -gt 40 ]] || die "only ${#files[@]} sources found under $src"
log=$build/tidy.log
start=$(date +%s)
# g++'s warning flags that clang does not know are not findings.
if ! run-clang-tidy -p "$build" -j "$jobs" -quiet -extra-arg=-Wno-unknown-warning-option \
    "${files[@]/#/$src/}" >"$log" 2>&1; then
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '(error|warning): ' | sort -u >&2 || tail -40 "$log" >&2
  die "clang-tidy found problems (full output: $log)"
fi
if sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -qE '(error|warning): '; then
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '(error|warning): ' | sort -u >&2
  die "clang-tidy reported problems (full output: $log)"
fi
echo "tidy: ${#files[@]} sources clean in $(( $(date +%s) - start )) s ($(clang-tidy --version | grep -o 'version [0-9.]*'))"
