#!/usr/bin/env bash
# checks.catch_test_names: every Catch2 TEST_CASE name must survive catch_discover_tests.
#
# CMake treats ';' as a list separator and an unmatched '[' as the start of a bracket
# argument, so one test name containing ';', '[' or ']' silently merges every later test of
# that binary into a single CTest test that matches nothing and "passes" with "No tests
# ran" (Catch2 exits 0 when no test matches).  A name that starts with '-' is read by the
# test binary as an option, and that CTest test fails with "Unrecognised token".  This check
# fails on such names, naming file and line.  It covers the directories in CATCH_NAME_DIRS (default: every unit-test
# directory: tests/base, tests/rendezvous and tests/launcher).
set -euo pipefail
src=${GCULAUNCH_SOURCE_DIR:-$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd)}
dirs=${CATCH_NAME_DIRS:-base rendezvous etcd launcher}
python3 - "$src/tests" $dirs <<'PY'
import pathlib, re, sys
bad = 0
count = 0
paths = [p for d in sys.argv[2:] for p in sorted((pathlib.Path(sys.argv[1]) / d).rglob("*_test.cc"))]
for path in paths:
    text = path.read_text()
    for m in re.finditer(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"', text):
        count += 1
        line = text.count("\n", 0, m.start()) + 1
        if re.search(r'[;\[\]\\]', m.group(1)):
            print("%s:%d: test name %r contains ';', '[', ']' or '\\'; CTest would merge the tests "
                  "after it into one that runs nothing" % (path, line, m.group(1)))
            bad += 1
        elif m.group(1).startswith("-"):
            print("%s:%d: test name %r starts with '-': the test binary would read it as an "
                  "option" % (path, line, m.group(1)))
            bad += 1
if count == 0:
    sys.exit("catch_test_names: found no TEST_CASE under %s" % sys.argv[2:])
print("catch_test_names: %d test names checked, %d bad" % (count, bad))
sys.exit(1 if bad else 0)
PY
