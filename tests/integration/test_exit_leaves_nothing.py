"""When gculaunch's exit status is visible, nothing it started is left: its guardian process
is reaped before it exits (issue 11 item 7; docs/runtime.md).  A failing job (one of two
ranks exits 3, the other sleeps in a child of its shell) is run many times; right after
each exit no process carrying the job's tag (ranks, their children, the guardian) may be
alive, and the guardian's pid is no longer a process."""
import os
import time
import unittest

import gltest

RUNS = 10

RANK = """#!/bin/sh
if [ "$LOCAL_RANK" = 1 ]; then sleep 0.5; exit 3; fi
sleep 30
"""


alive = gltest.process_alive


class ExitLeavesNothing(unittest.TestCase):
    def test_nothing_outlives_a_failed_run(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "rank.sh")
            with open(script, "w") as f:
                f.write(RANK)
            os.chmod(script, 0o755)
            for run in range(RUNS):
                with gltest.Job(["--standalone", "--nproc-per-node", "2", "--no-python", script]) as job:
                    guardian = None
                    deadline = time.monotonic() + 10
                    while guardian is None and job.proc.poll() is None \
                            and time.monotonic() < deadline:
                        guardian = gltest.guardian_of(job.pid)
                    self.assertIsNotNone(guardian, "run %d: no guardian seen" % run)
                    # The moment gculaunch's exit status is visible: the guardian first
                    # (one /proc read), then every tagged process.
                    code = job.proc.wait(timeout=60)
                    guardian_alive = alive(guardian)
                    left = gltest.pids_with_tag(job.tag)
                    job.wait(timeout=10)
                    self.assertEqual(code, 3, job.stderr)
                    self.assertEqual(left, [], "run %d: alive after gculaunch exited: %s"
                                     % (run, left))
                    self.assertFalse(guardian_alive, "run %d: the guardian %s outlived gculaunch"
                                     % (run, guardian))


if __name__ == "__main__":
    unittest.main()
