"""Real Debian PyTorch (1.13, gloo) ranks started by gculaunch all-reduce and
exit 0; gculaunch exits 0 and every rank's line arrives whole, prefixed."""
import os
import re
import unittest

import gltest

EXAMPLE = os.path.join(gltest.SOURCE_DIR, "examples", "allreduce.py")


class AllReduce(unittest.TestCase):
    def run_allreduce(self, nproc):
        with gltest.Job(["--standalone", "--nproc-per-node", str(nproc), "--device", "cpu",
                         "--python", gltest.PYTHON, EXAMPLE]) as job:
            code = job.wait(timeout=300)
            self.assertEqual(code, 0, job.stderr)
            expected = nproc * (nproc + 1) // 2
            for rank in range(nproc):
                self.assertRegex(
                    job.stdout,
                    r"(?m)^\[rank%d\]: rank %d/%d local_rank %d: all_reduce sum %d "
                    r"\(expected %d\) ok$" % (rank, rank, nproc, rank, expected, expected))
            self.assertEqual(len(re.findall(r"(?m)^\[rank\d\]: ", job.stdout)), nproc)
            self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_two_ranks(self):
        self.run_allreduce(2)

    def test_four_ranks(self):
        self.run_allreduce(4)


if __name__ == "__main__":
    unittest.main()
