#!/usr/bin/env bash
# checks.format: every C++ source of the project is formatted as .clang-format says, by the
# clang-format that scripts/bootstrap.sh installs (Debian's, version 14).  On failure it lists
# the files and the first differences; `clang-format -i FILE` fixes them.
set -euo pipefail
src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$src"
command -v clang-format >/dev/null ||
  { echo "format: clang-format is missing (run scripts/bootstrap.sh)" >&2; exit 1; }
version=$(clang-format --version)
[[ "$version" == *" version 14."* ]] ||
  { echo "format: expected clang-format 14 (what bootstrap installs), found: $version" >&2; exit 1; }

mapfile -t files < <(find base rendezvous etcd launcher tests bench -name '*.h' -o -name '*.cc' | sort)
[[ ${#files[@]} -gt 100 ]] || { echo "format: only ${#files[@]} sources found under $src" >&2; exit 1; }
bad=()
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "format: ${#bad[@]} of ${#files[@]} files differ from .clang-format:" >&2
  for f in "${bad[@]}"; do
    echo "  $f" >&2
    clang-format "$f" | diff -u "$f" - | sed -n '3,12p' | sed 's/^/    /' >&2 || true
  done
  echo "format: fix with: clang-format -i <file>..." >&2
  exit 1
fi
echo "format: ${#files[@]} files formatted as .clang-format says ($version)"
