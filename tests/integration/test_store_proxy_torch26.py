"""The store proxy (`gculaunch store --upstream`) in front of `gculaunch store`, against
torch 2.6 TCPStore clients (the trixie root of gltest.torch2_python()): every case of
store_cases.py, with 2.x's VALIDATE + PING handshake, append, multi_get, multi_set and
CANCEL_WAIT, passes through the proxy as it does against the store directly."""
import unittest

import gltest
import store_cases


class StoreProxyWithTorch26(store_cases.StoreCases, unittest.TestCase):
    TORCH_MAJOR = 2
    THROUGH_PROXY = True

    @classmethod
    def setUpClass(cls):
        cls.PYTHON = gltest.torch2_python()  # raises (a failure) if it cannot be made


if __name__ == "__main__":
    unittest.main()
