"""`gculaunch store` against Debian's torch 1.13 TCPStore clients (host python3):
every store operation, wait timeouts and the 1.x stale-WAIT behaviour, multi-client
wait/wake, hostile bytes, and a 3-rank gloo job whose ranks all use the store
through the agent-store path (TORCHELASTIC_USE_AGENT_STORE=True).  The cases
live in store_cases.py."""
import subprocess
import unittest

import gltest
import store_cases

# A key of exactly the documented default limit (1 MiB), set and read back by torch's own
# client, which sends it with a '/' in front (issue 11 item 11).
LIMIT_KEY = r"""
import datetime, sys
import torch.distributed as dist
store = dist.TCPStore(sys.argv[1], int(sys.argv[2]), is_master=False,
                      timeout=datetime.timedelta(seconds=20))
key = "k" * (1 << 20)
store.set(key, b"limit")
assert store.get(key) == b"limit", "value read back differs"
print("ok", flush=True)
"""


class StoreWithTorch113(store_cases.StoreCases, unittest.TestCase):
    PYTHON = [gltest.PYTHON]
    TORCH_MAJOR = 1

    def test_a_key_of_exactly_the_default_limit(self):
        out = subprocess.run([gltest.PYTHON, "-c", LIMIT_KEY, self.store.host,
                              str(self.store.port)], env=gltest.tagged_env(self.tag),
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:] + "\n--- store log:\n"
                         + self.store.log_text()[-3000:])
        self.assertEqual(out.stdout.strip(), "ok")


if __name__ == "__main__":
    unittest.main()
