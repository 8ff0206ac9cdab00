"""`gculaunch store` against Debian's torch 1.13 TCPStore clients (host python3):
every store operation, wait timeouts and the 1.x stale-WAIT behaviour, multi-client
wait/wake, hostile bytes, and a 3-rank gloo job whose ranks all use the store
through the agent-store path (TORCHELASTIC_USE_AGENT_STORE=True).  The cases
live in store_cases.py."""
import unittest

import gltest
import store_cases


class StoreWithTorch113(store_cases.StoreCases, unittest.TestCase):
    PYTHON = [gltest.PYTHON]
    TORCH_MAJOR = 1


if __name__ == "__main__":
    unittest.main()
