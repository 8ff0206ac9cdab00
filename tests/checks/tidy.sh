#!/usr/bin/env bash
# checks.tidy: clang-tidy (the version scripts/bootstrap.sh installs: Debian's 14) with the
# project's .clang-tidy over every source of base/, rendezvous/ and launcher/ (their headers
# through HeaderFilterRegex), using the build's compile_commands.json.  Any warning fails:
# among them readability-function-size, no function over 100 lines.
#
# Only what changed is checked again: tidy_cache.py keeps, in the user's cache directory
# ($XDG_CACHE_HOME/gculaunch/tidy, else ~/.cache/gculaunch/tidy), a key for every source found
# clean (a hash of the source, every header it includes, its compile command, the .clang-tidy
# files and the clang-tidy version, with the clone's own paths left out) and skips a source
# whose key is there, so another clone or build directory of the same sources pays nothing.
# A cache directory another user could change is not used (one line says so; everything is
# checked); rm -r ~/.cache/gculaunch/tidy checks everything too.
#
#   TIDY_JOBS (default: the number of CPUs) clang-tidy processes run at once.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$here/../.." && pwd)}
build=${GCULAUNCH_BUILD_DIR:-$src/build}
jobs=${TIDY_JOBS:-$(nproc)}
die() { echo "tidy: $*" >&2; exit 1; }
command -v clang-tidy >/dev/null || die "clang-tidy is missing (run scripts/bootstrap.sh)"
command -v clang++ >/dev/null || die "clang++ is missing (run scripts/bootstrap.sh)"
[[ -f "$build/compile_commands.json" ]] || die "$build/compile_commands.json is missing (configure the build first)"

cd "$src"
mapfile -t files < <(find base rendezvous etcd launcher -name '*.cc' | sort)
[[ ${#files[@]} -gt 40 ]] || die "only ${#files[@]} sources found under $src"
echo "tidy: $(clang-tidy --version | grep -o 'version [0-9.]*')"
# g++'s warning flags that clang does not know are not findings.
exec /usr/bin/python3 "$here/tidy_cache.py" --src "$src" --build "$build" --jobs "$jobs" \
  --log "$build/tidy.log" --extra-arg=-Wno-unknown-warning-option "${files[@]/#/$src/}"
