"""Every case of store_cases.py with the torch of the interpreter that runs this file, against
`gculaunch store` directly and through `gculaunch store --upstream` (the store proxy).  Not a
CTest test (CI's torch versions have their own, test_store_*.py): a way to check a torch that
CI does not have, e.g. on a machine with the newest release:

    GCULAUNCH_BIN=build/launcher/gculaunch GCULAUNCH_SOURCE_DIR=$PWD \\
        python3 tests/integration/store_cases_any_torch.py

The tests give every process a plain PATH, so the interpreter is named by its full path."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import store_cases  # noqa: E402

MAJOR = int(__import__("torch").__version__.split(".")[0])


class ThisTorchDirect(store_cases.StoreCases, unittest.TestCase):
    PYTHON = [sys.executable]
    TORCH_MAJOR = MAJOR


class ThisTorchThroughProxy(store_cases.StoreCases, unittest.TestCase):
    PYTHON = [sys.executable]
    TORCH_MAJOR = MAJOR
    THROUGH_PROXY = True


if __name__ == "__main__":
    unittest.main(verbosity=2)
