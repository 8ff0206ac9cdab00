"""`gculaunch store` against torch 2.6 TCPStore clients (Debian trixie's python3-torch
in the cached root that gltest.torch2_python() provides; created on first use).
Same cases as the 1.13 test (store_cases.py), plus the 2.x-only operations: the
VALIDATE + PING handshake on every connection, append, multi_get, multi_set,
check, and CANCEL_WAIT on client-side timeouts.  Debian's 2.6 has no libuv, so
clients pass use_libuv=False and the gloo ranks get a test-only sitecustomize."""
import unittest

import gltest
import store_cases


class StoreWithTorch26(store_cases.StoreCases, unittest.TestCase):
    TORCH_MAJOR = 2

    @classmethod
    def setUpClass(cls):
        cls.PYTHON = gltest.torch2_python()  # raises (a failure) if it cannot be made


if __name__ == "__main__":
    unittest.main()
