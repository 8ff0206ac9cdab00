"""A rank that dies of SIGSEGV in C code shows its Python stack: gculaunch gives ranks
PYTHONFAULTHANDLER=1 (unless the user set it), and --no-python-faulthandler turns it off."""
import os
import signal
import unittest

import gltest

CRASH = r"""
import ctypes, os

def read_null_pointer():
    ctypes.string_at(0)  # SIGSEGV inside C code

def train_step():
    read_null_pointer()

print("rank %s starting" % os.environ["RANK"], flush=True)
train_step()
"""


class FaultHandler(unittest.TestCase):
    def run_crash(self, extra_flags):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "crash.py")
            with open(script, "w") as f:
                f.write(CRASH)
            with gltest.Job(["--nproc-per-node", "1", "--device", "cpu", "--python",
                             gltest.PYTHON] + extra_flags + [script]) as job:
                code = job.wait(timeout=60)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
                return code, job.stdout, job.stderr

    def test_segfault_prints_the_python_stack(self):
        code, out, err = self.run_crash([])
        self.assertEqual(code, 128 + signal.SIGSEGV, err)
        self.assertIn("signal 11 (SIGSEGV)", err)
        self.assertIn("Fatal Python error: Segmentation fault", err)
        # The stack names the functions the rank was in, innermost first.
        inner = err.find("in read_null_pointer")
        outer = err.find("in train_step")
        self.assertGreaterEqual(inner, 0, err)
        self.assertGreater(outer, inner, err)
        # The summary at the end shows it too (the rank's last stderr lines).
        self.assertIn("gculaunch:   | ", err)
        summary = err[err.find("gculaunch: rank 0 failed"):]
        self.assertIn("in read_null_pointer", summary)

    def test_opt_out(self):
        code, out, err = self.run_crash(["--no-python-faulthandler"])
        self.assertEqual(code, 128 + signal.SIGSEGV, err)
        self.assertNotIn("Fatal Python error", err)
        self.assertNotIn("in read_null_pointer", err)


if __name__ == "__main__":
    unittest.main()
