"""SIGKILL of gculaunch leaves nothing behind: the ranks die of
PR_SET_PDEATHSIG, and what they started (a grandchild that stays in the
rank's process group) is killed by the guardian process (docs/runtime.md)."""
import os
import signal
import time
import unittest

import gltest


class Guardian(unittest.TestCase):
    def kill_launcher_and_check(self, extra_args, nproc):
        with gltest.TempDir() as tmp:
            gc = os.path.join(tmp, "grandchild")
            args = ["--nproc-per-node", str(nproc)] + extra_args + gltest.child_args(
                "grandchild", gc + ".${local_rank}", "print", "ready", "pause")
            with gltest.Job(args) as job:
                job.wait_for(lambda out, err: out.count("ready") == nproc, what="ranks ready")
                grandchildren = []
                for rank in range(nproc):
                    with open("%s.%d" % (gc, rank)) as f:
                        grandchildren.append(int(f.read()))
                # ranks and their grandchildren carry the tag, and so does the guardian
                tagged = gltest.pids_with_tag(job.tag)
                self.assertEqual(len(gltest.pids_of_ranks(job.tag, gltest.CHILD_COMM)),
                                 2 * nproc)
                for pid in grandchildren:
                    self.assertIn(pid, tagged)
                guardian = gltest.wait_guardian_of(job.pid)
                self.assertIsNotNone(guardian)
                job.signal(signal.SIGKILL)
                job.proc.wait(timeout=10)
                survivors = gltest.wait_no_tagged(job.tag, 1.0)
                self.assertEqual(survivors, [], "alive 1 s after SIGKILL of gculaunch")
                deadline = time.monotonic() + 1.0
                while gltest.process_alive(guardian) and time.monotonic() < deadline:
                    time.sleep(0.01)
                self.assertFalse(gltest.process_alive(guardian),
                                 "the guardian was alive 1 s after it killed the job")

    def test_sigkill_of_gculaunch_leaves_no_process(self):
        self.kill_launcher_and_check([], 2)

    def test_sigkill_leaves_no_process_with_many_ranks(self):
        self.kill_launcher_and_check([], 8)

    def test_sigkill_leaves_no_process_on_the_sigchld_path(self):
        # The same with exit detection forced onto SIGCHLD + waitpid.
        with gltest.TempDir() as tmp:
            gc = os.path.join(tmp, "grandchild")
            args = ["--nproc-per-node", "2"] + gltest.child_args(
                "grandchild", gc + ".${local_rank}", "print", "ready", "pause")
            with gltest.Job(args, extra_env={"GCULAUNCH_CHILD_WATCHER": "sigchld"}) as job:
                job.wait_for(lambda out, err: out.count("ready") == 2, what="ranks ready")
                job.signal(signal.SIGKILL)
                job.proc.wait(timeout=10)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 1.0), [])


if __name__ == "__main__":
    unittest.main()
