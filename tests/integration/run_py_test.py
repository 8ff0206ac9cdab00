"""Runs one integration test file with unittest and fails on anything but a
clean pass: errors, failures, *skips* and expected failures all count as
failures, because a test that did not run proves nothing.

    run_py_test.py tests/integration/test_x.py [-k PATTERN]
"""
import os
import sys
import unittest


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: run_py_test.py TEST_FILE [-k PATTERN]", file=sys.stderr)
        return 2
    path = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.dirname(path))
    loader = unittest.TestLoader()
    if len(sys.argv) >= 4 and sys.argv[2] == "-k":
        loader.testNamePatterns = ["*%s*" % sys.argv[3]]
    module_name = os.path.splitext(os.path.basename(path))[0]
    suite = loader.loadTestsFromName(module_name)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    bad = (len(result.errors) + len(result.failures) + len(result.skipped)
           + len(result.expectedFailures) + len(result.unexpectedSuccesses))
    if result.testsRun == 0:
        print("run_py_test: no tests ran in %s" % path)
        return 1
    if result.skipped:
        for test, why in result.skipped:
            print("run_py_test: SKIPPED counts as failure: %s: %s" % (test, why))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
