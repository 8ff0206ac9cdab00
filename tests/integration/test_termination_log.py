"""The termination message (issue 41): what `kubectl describe pod` shows after gculaunch
exits.  Kubernetes bind-mounts a file at the container's terminationMessagePath, so these
tests do the same: each gculaunch runs in a private mount namespace (`unshare -m`) where a
file of the test is bind-mounted at the path gculaunch writes (a rename onto a mount point
fails with EBUSY: only an in-place write reaches the file), and the test reads the file
outside.  The default path /dev/termination-log is tested in a namespace whose /dev is a
private tmpfs (the real /dev/null bind-mounted in), and a symbolic link planted there or
given to --termination-log is never written through.

Cases: a Python traceback, a rank killed by a signal, a hang, a usage error; success."""
import os
import shlex
import unittest

import gltest

# Runs "$@" (gculaunch and its arguments) in a private mount namespace after the set-up
# commands in $SETUP (the test's own, quoted).
NAMESPACE = ["unshare", "-m", "--propagation", "private", "sh", "-ec", 'eval "$SETUP"; exec "$@"',
             "sh"]

TRACEBACK = """import sys
def train():
    raise ValueError("loss is nan at step 7")
print("training", flush=True)
train()
"""


class TerminationLog(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        gltest.require_helpers()
        self.tmp = gltest.TempDir(prefix="gltest-termlog-")
        self.dir = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.mount_point = os.path.join(self.dir, "mnt")  # where the "kubelet" mounts it
        self.source = os.path.join(self.dir, "termination-source")
        open(self.mount_point, "w").close()

    def run_mounted(self, args, extra_env=None, setup=None):
        """gculaunch with `args` writing --termination-log at the bind-mounted path; returns
        (exit code, stderr, what the source file holds afterwards)."""
        with open(self.source, "w") as f:
            f.write("stale text from an earlier container, longer than any message " * 80)
        env = dict(extra_env or {})
        env["SETUP"] = setup or "mount --bind %s %s" % (shlex.quote(self.source),
                                                        shlex.quote(self.mount_point))
        with gltest.Job(["--termination-log", self.mount_point] + list(args), extra_env=env,
                        prefix=NAMESPACE) as job:
            code = job.wait(timeout=90)
            err = job.stderr
        with open(self.source) as f:
            return code, err, f.read()

    def test_python_traceback(self):
        script = gltest.write_script(self.dir, "train.py", TRACEBACK)
        code, err, text = self.run_mounted(["--exit-codes", "classes", "--nproc-per-node", "2",
                                            "--python", gltest.PYTHON, script])
        self.assertEqual(code, 80, err)
        lines = text.splitlines()
        self.assertEqual(lines[0], "gculaunch: exit 80 (retry): rank_failed: a rank failed and "
                                   "no restart was left")
        self.assertRegex(lines[1], r"^rank [01] \(local rank [01]\) on node 0 \S+, attempt 0: "
                                   r"exit code 1$")
        self.assertEqual(lines[2], "ValueError: loss is nan at step 7")
        self.assertIn('    raise ValueError("loss is nan at step 7")', lines)
        self.assertEqual(lines[-1], "ValueError: loss is nan at step 7")
        self.assertNotIn("stale text", text)
        self.assertLessEqual(len(text.encode()), 4096)

    def test_a_rank_killed_by_a_signal(self):
        code, err, text = self.run_mounted(gltest.child_args("eprint", "about to crash",
                                                             "kill", "SEGV"))
        self.assertEqual(code, 139, err)
        lines = text.splitlines()
        self.assertEqual(lines[0], "gculaunch: exit 139 (retry): rank_failed: a rank failed "
                                   "and no restart was left")
        self.assertRegex(lines[1], r"^rank 0 \(local rank 0\) on node 0 \S+, attempt 0: "
                                   r"signal 11 \(SIGSEGV\)$")
        self.assertRegex(lines[2], r"^Signal 11 \(SIGSEGV\) received by PID \d+$")
        self.assertEqual(lines[-1], "about to crash")

    def test_a_hang(self):
        code, err, text = self.run_mounted(
            ["--exit-codes", "classes", "--hang-timeout", "1s", "--hang-grace", "1s",
             "--grace-period", "1"] + gltest.child_args("print", "step", "sleep", "60"))
        self.assertEqual(code, 80, err)
        self.assertTrue(text.startswith("gculaunch: exit 80 (retry): hang: the job hung "
                                        "(--hang-timeout) and was stopped\n"), text)

    def test_a_usage_error(self):
        code, err, text = self.run_mounted(["--exit-codes", "classes", "--nnodes", "4:1",
                                            "x.py"])
        self.assertEqual(code, 83, err)
        self.assertEqual(text, "gculaunch: exit 83 (fatal): usage: usage or configuration error "
                               "(a bad flag, variable, file or device)\n" + err)

    def test_success_is_one_short_line(self):
        code, err, text = self.run_mounted(gltest.child_args("exit", 0))
        self.assertEqual(code, 0, err)
        self.assertEqual(text, "gculaunch: exit 0 (success): success: every rank exited 0\n")

    def private_dev(self, last):
        """Set-up commands: /dev becomes a tmpfs holding the real /dev/null, then `last`."""
        old = os.path.join(self.dir, "olddev")
        os.mkdir(old)
        q = shlex.quote
        return ("mount --rbind /dev {old}; mount -t tmpfs tmpfs /dev; touch /dev/null; "
                "mount --bind {old}/null /dev/null; {last}").format(old=q(old), last=last)

    def run_default(self, setup, args):
        with open(self.source, "w") as f:
            f.write("untouched\n")
        with gltest.Job(args, extra_env={"SETUP": setup}, prefix=NAMESPACE) as job:
            code = job.wait(timeout=60)
            err = job.stderr
        with open(self.source) as f:
            return code, err, f.read()

    def test_default_path_is_the_bind_mounted_dev_termination_log(self):
        setup = self.private_dev("touch /dev/termination-log; mount --bind %s "
                                 "/dev/termination-log" % shlex.quote(self.source))
        code, err, text = self.run_default(setup, ["--exit-codes", "classes"]
                                           + gltest.child_args("exit", 5))
        self.assertEqual(code, 80, err)
        self.assertTrue(text.startswith("gculaunch: exit 80 (retry): rank_failed: "), text)

    def test_a_planted_link_is_never_written_through(self):
        q = shlex.quote
        # The default path is a link: no termination message, nothing written, no warning.
        setup = self.private_dev("ln -s %s /dev/termination-log" % q(self.source))
        code, err, text = self.run_default(setup, gltest.child_args("exit", 3))
        self.assertEqual((code, text), (3, "untouched\n"), err)
        self.assertNotIn("termination", err)
        # Named with --termination-log: refused with one warning; the exit code is unchanged.
        link = os.path.join(self.dir, "link")
        os.symlink(self.source, link)
        code, err, text = self.run_default(
            "true", ["--termination-log", link] + gltest.child_args("exit", 3))
        self.assertEqual((code, text), (3, "untouched\n"), err)
        self.assertIn("--termination-log %s: is a symbolic link; not written through it "
                      "(fix: give the file itself" % link, err)


if __name__ == "__main__":
    unittest.main()
