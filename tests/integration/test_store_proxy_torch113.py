"""The store proxy (`gculaunch store --upstream`, what --store-proxy runs on every node but
node 0) in front of `gculaunch store`, against Debian's torch 1.13 TCPStore clients: every
case of store_cases.py (every operation, wait timeouts, multi-client wait/wake, hostile
bytes, a 3-rank gloo job) passes through the proxy as it does against the store directly."""
import unittest

import test_store_torch113


class StoreProxyWithTorch113(test_store_torch113.StoreWithTorch113):
    THROUGH_PROXY = True


# The direct cases run in test_store_torch113.py: only the proxied class runs here.
del test_store_torch113

if __name__ == "__main__":
    unittest.main()
