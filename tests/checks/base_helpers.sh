#!/usr/bin/env bash
# checks.base_helpers: base/text.h's helpers stay single, and this check can fail.
#
# base/text.h holds the one copy of each small text helper (Join, Seconds, Plural, ...).  A
# function declared there must not be defined again, under the same name, at namespace scope
# (anonymous namespaces included) in any other .h/.cc of base/, rendezvous/, etcd/ or
# launcher/: call the base one instead, or give a helper that does something else a name of
# its own.  Member functions (`Foo::Join`), calls and plain declarations are not definitions.
#   1. the real tree passes;
#   2. in a throw-away tree, a copy of a helper in an anonymous namespace, and one in a named
#      namespace spread over two lines, fail it with their file and line, while a member
#      function, a call and a declaration of the same names pass.
set -euo pipefail

die() {
  echo "base_helpers: error: $*" >&2
  exit 1
}

src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
[[ -f $src/base/text.h ]] || die "no base/text.h under $src (set GCULAUNCH_SOURCE_DIR to the repository)"
command -v python3 >/dev/null || die "python3 not found"

work=$(mktemp -d "${TMPDIR:-/tmp}/gculaunch-base-helpers.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

cat >"$work/scan.py" <<'PY'
"""scan.py ROOT: prints FILE:LINE for each namespace-scope definition, outside base/text.*, of
a function that base/text.h declares; exits 1 when there is one."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
header = (root / "base/text.h").read_text()
# Namespace-scope declarations start in column 0 (clang-format does not indent namespaces):
# the name is the last identifier before the first '('.
decl = re.compile(r"^(?![\s/#}]|namespace\b|using\b)[^()=;{]*?\b([A-Za-z_]\w*)\s*\(", re.M)
names = sorted({m.group(1) for m in decl.finditer(header)})
if len(names) < 5:
    sys.exit("base_helpers: found only %r declared in base/text.h" % names)
pattern = re.compile(r"^(?![\s/#}]|namespace\b|using\b|return\b)[^()=;{]*?(?<![\w:])(%s)\s*\("
                     % "|".join(names), re.M)
skip = {"base/text.h", "base/text.cc"}
bad = 0
files = 0
for top in ("base", "rendezvous", "etcd", "launcher"):
    for path in sorted((root / top).rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in (".h", ".cc") or rel in skip:
            continue
        files += 1
        text = path.read_text(errors="replace")
        for m in pattern.finditer(text):
            # A definition: its body's '{' comes before any ';' (a declaration ends at ';').
            rest = text[m.end():]
            brace, semi = rest.find("{"), rest.find(";")
            if brace < 0 or (0 <= semi < brace):
                continue
            line = text.count("\n", 0, m.start()) + 1
            print("%s:%d: %s is defined again; base/text.h has it (call that one, or give "
                  "this helper a name of its own)" % (rel, line, m.group(1)))
            bad += 1
if files == 0:
    sys.exit("base_helpers: found no .h or .cc file under %s" % root)
print("base_helpers: %d files checked against %d helpers of base/text.h (%s), %d copies"
      % (files, len(names), ", ".join(names), bad))
sys.exit(1 if bad else 0)
PY

# ---- 1. the real tree ----
status=0
out=$(python3 "$work/scan.py" "$src" 2>&1) || status=$?
((status == 0)) || die "helpers of base/text.h are defined again:"$'\n'"$out"
echo "$out"

# ---- 2. a throw-away tree ----
tree=$work/tree
mkdir -p "$tree/base" "$tree/rendezvous" "$tree/etcd" "$tree/launcher/ops"
cp "$src/base/text.h" "$tree/base/text.h"
cat >"$tree/launcher/ops/copy.cc" <<'EOF'
#include "base/text.h"

namespace gculaunch {
namespace {

std::string Seconds(double s) { return std::to_string(s) + " s"; }

}  // namespace

std::string Join(const std::vector<std::string>& parts,
                 char sep) {
  return parts.empty() ? "" : parts[0] + sep;
}

}  // namespace gculaunch
EOF
cat >"$tree/etcd/fine.cc" <<'EOF'
#include "base/text.h"

namespace gculaunch {

std::string Join(int parts);

std::string Parts::Join(const std::vector<std::string>& parts) const {
  return gculaunch::Join(parts, ", ");
}

class Words {
 public:
  std::string Seconds() const { return "s"; }
};

std::string Describe(const std::vector<std::string>& parts) {
  return Join(parts, ", ") +
Plural(2, "part");
}

}  // namespace gculaunch
EOF
status=0
out=$(python3 "$work/scan.py" "$tree" 2>&1) || status=$?
((status != 0)) || die "the check accepted copies of Seconds and Join (launcher/ops/copy.cc): $out"
for want in "launcher/ops/copy.cc:6: Seconds is defined again" \
  "launcher/ops/copy.cc:10: Join is defined again"; do
  [[ $out == *"$want"* ]] || die "the check does not say \"$want\"; it said: $out"
done
[[ $out != *etcd/fine.cc* ]] || die "the check flagged a member, a call or a declaration: $out"
echo "base_helpers: ok: copies in an anonymous and a named namespace fail, naming file:line"
rm "$tree/launcher/ops/copy.cc"
python3 "$work/scan.py" "$tree" >/dev/null ||
  die "the check flagged a member function, a call or a declaration (etcd/fine.cc)"
echo "base_helpers: ok: member functions, calls and declarations of the same names pass"
