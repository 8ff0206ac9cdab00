"""Numbers are checked, never wrapped (issue 24): a --grace-period of 1e7 s (the limit) is a real grace
period (a rank that ignores SIGTERM is not SIGKILLed at once, as it was when 1e10 s wrapped
std::chrono::milliseconds), and anything above 1e7 s, or a count above its limit, is refused
with exit code 2 and one line naming the flag and the limit."""
import os
import signal
import time
import unittest

import gltest

RANKS = r"""
import os, signal, sys, time
d = sys.argv[1]
if os.environ["RANK"] == "0":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(os.path.join(d, "pid0.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(d, "pid0.tmp"), os.path.join(d, "pid0"))
    while True:
        time.sleep(1)
while not os.path.exists(os.path.join(d, "pid0")):
    time.sleep(0.05)
sys.exit(1)
"""


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


class DurationLimits(unittest.TestCase):
    def test_a_huge_grace_period_is_honoured_not_wrapped(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "ranks.py")
            with open(script, "w") as f:
                f.write(RANKS)
            args = ["--nproc-per-node", "2", "--device", "cpu", "--master-port", "0",
                    "--python", gltest.PYTHON, "--grace-period", "1e7", script, tmp]
            with gltest.Job(args) as job:
                job.wait_for(lambda out, err: "stopping the other ranks (SIGTERM, SIGKILL after "
                             "1e+07 s)" in err, timeout=120, what="rank 1's failure")
                with open(os.path.join(tmp, "pid0")) as f:
                    pid0 = int(f.read())
                time.sleep(1)
                # The SIGTERM-ignoring rank waits for its grace period: not SIGKILLed at once.
                self.assertTrue(alive(pid0), job.stderr)
                self.assertNotIn("sent SIGKILL", job.stderr)
                # End the job ourselves: SIGKILL to the process group this test started
                # (gculaunch's; the guardian then kills the ranks' groups).
                os.killpg(job.pid, signal.SIGKILL)
                self.assertEqual(job.wait(timeout=60), -signal.SIGKILL)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 15), [])

    def test_values_above_the_limits_are_refused_in_one_line(self):
        cases = [
            (["--grace-period", "1e10"],
             "gculaunch: --grace-period '1e10': at most 10000000 seconds (about 115 days) "
             "(fix: e.g. --grace-period 25)"),
            (["--rdzv-timeout", "1e10"],
             "gculaunch: --rdzv-timeout '1e10': at most 10000000 seconds (about 115 days) "
             "(fix: e.g. --rdzv-timeout 900)"),
            (["--max-restarts", "2147483646"],
             "gculaunch: --max-restarts '2147483646': at most 1000000 (fix: e.g. "
             "--max-restarts 3)"),
        ]
        for flags, message in cases:
            with self.subTest(flags=flags):
                tag = gltest.new_tag()
                out = gltest.run([gltest.require_binary()] + flags
                                 + ["--device", "cpu", "--no-python", "/bin/true"],
                                 gltest.tagged_env(tag), timeout=60)
                self.assertEqual(out.returncode, 2, out.stderr)
                self.assertEqual(out.stderr, message + "\n")
                self.assertEqual(gltest.wait_no_tagged(tag, 5), [])


if __name__ == "__main__":
    unittest.main()
