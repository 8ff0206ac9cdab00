"""Supervision without pidfd_open: gculaunch runs under a seccomp filter that
makes pidfd_open(2) fail (ENOSYS as on kernels before 5.3, EPERM as under
some container profiles).  gculaunch must notice at run time, say so, and
supervise through SIGCHLD + waitpid with the same results."""
import json
import os
import signal
import unittest

import gltest


class NoPidfd(unittest.TestCase):
    def setUp(self):
        gltest.require_helpers()

    def run_job(self, errno_name, steps, nproc=2, check_code=0):
        with gltest.TempDir() as tmp:
            summary = os.path.join(tmp, "summary.json")
            args = ["--nproc-per-node", str(nproc), "--summary-json", summary] + \
                gltest.child_args(*steps)
            with gltest.Job(args, prefix=[gltest.NO_PIDFD, "--errno", errno_name]) as job:
                code = job.wait(timeout=60)
                self.assertEqual(code, check_code, job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
                stderr = job.stderr
            with open(summary) as f:
                return json.load(f), stderr

    def test_success_with_enosys(self):
        doc, err = self.run_job("ENOSYS", ["print", "hi", "exit", "0"])
        self.assertEqual(doc["child_watcher"], "sigchld")
        self.assertIn("exit detection: SIGCHLD + waitpid (pidfd_open: Function not implemented)",
                      err)
        self.assertEqual([r["exit_code"] for r in doc["ranks"]], [0, 0])

    def test_failure_teardown_with_eperm(self):
        # local rank 1 fails; local rank 0 must be stopped and reaped.
        with gltest.TempDir() as tmp:
            summary = os.path.join(tmp, "summary.json")
            script = os.path.join(tmp, "rank.sh")
            with open(script, "w") as f:
                f.write('#!/bin/sh\nif [ "$LOCAL_RANK" = 1 ]; then echo failing >&2; exit 7; fi\n'
                        'exec %s print ready pause\n' % gltest.TEST_CHILD)
            os.chmod(script, 0o755)
            with gltest.Job(["--nproc-per-node", "2", "--summary-json", summary, "--no-python",
                             script], prefix=[gltest.NO_PIDFD, "--errno", "EPERM"]) as job:
                self.assertEqual(job.wait(timeout=60), 7, job.stderr)
                self.assertIn("pidfd_open: Operation not permitted", job.stderr)
                self.assertIn("rank 1 failed", job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
            with open(summary) as f:
                doc = json.load(f)
            self.assertEqual(doc["child_watcher"], "sigchld")
            self.assertEqual(doc["root_cause"]["rank"], 1)

    def test_signal_forwarding_without_pidfd(self):
        with gltest.Job(["--nproc-per-node", "2"] + gltest.child_args("print", "ready", "pause"),
                        prefix=[gltest.NO_PIDFD]) as job:
            job.wait_for(lambda out, err: out.count("ready") == 2, what="ranks ready")
            job.signal(signal.SIGTERM)
            self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM, job.stderr)
            self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_real_pytorch_ranks_without_pidfd(self):
        example = os.path.join(gltest.SOURCE_DIR, "examples", "allreduce.py")
        with gltest.Job(["--standalone", "--nproc-per-node", "2", "--device", "cpu",
                         "--python", gltest.PYTHON, example], prefix=[gltest.NO_PIDFD]) as job:
            self.assertEqual(job.wait(timeout=300), 0, job.stderr)
            self.assertIn("exit detection: SIGCHLD + waitpid", job.stderr)
            self.assertEqual(job.stdout.count("ok\n"), 2)


if __name__ == "__main__":
    unittest.main()
