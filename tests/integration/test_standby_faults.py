"""Warm-rank standbys that cannot take their go (issue 37 item 2, issue 40 item 2).

A standby is a rank in waiting (--warm-ranks).  Before gculaunch hands it the next attempt's
environment it checks that the standby can run at all (/proc: not stopped, not traced), and
after the go it expects the standby to confirm within a short bound.  A standby that fails
either is dismissed (its group killed) with one line naming it and why, and its rank starts
cold; the attempt never waits for it.  Real gculaunch, real Python ranks (`--preload json`:
the mechanism, not torch's import, is under test here).

  * a SIGSTOPped standby: the restart's rank 0 starts cold, the attempt ends, exit 0;
  * a standby traced by another process (ptrace): the same;
  * a standby that never reads its go (its stdin stays full): another rank's failure on the
    same node is detected first; the standby is given up after it, never before.
"""
import ctypes
import os
import re
import threading
import time
import unittest

import gltest

RANK_PROGRAM = r'''
import glob, os, signal, sys, time
out = sys.argv[1]
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
local = int(os.environ["LOCAL_RANK"])
fault = os.environ.get("GL_FAULT", "")

def started_as_standby():
    with open("/proc/self/environ", "rb") as f:
        return b"GCULAUNCH_STANDBY_PARENT=" in f.read()

def standby_of(local_rank):
    """The pid of this gculaunch's standby for `local_rank` (its environment at exec)."""
    parent = b"GCULAUNCH_STANDBY_PARENT=%d" % os.getppid()
    mine = b"/standby-%d-" % local_rank
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if parent in env and any(i.startswith(b"GCULAUNCH_STANDBY_READY=") and mine in i
                                 for i in env):
            return int(name)
    return None

def wait_for(check, what):
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    sys.exit("timed out waiting for " + what)

with open(os.path.join(out, "a%s_r%d" % (attempt, local)), "w") as f:
    f.write("warm" if started_as_standby() else "cold")

if attempt == "0":
    root = os.environ["TORCHELASTIC_ERROR_FILE"].split("/attempt_")[0]
    wait_for(lambda: len([p for p in glob.glob(os.path.join(root, "standbys", "standby-*"))
                          if not p.endswith(".failed")]) >= 2, "both standbys ready")
    marker = os.path.join(out, "faulted")
    if local == 0:
        pid = standby_of(0)
        if fault == "stop":
            os.kill(pid, signal.SIGSTOP)
            stat = "/proc/%d/stat" % pid
            wait_for(lambda: open(stat).read().rsplit(")", 1)[1].split()[0] == "T",
                     "the standby to stop")
        with open(os.path.join(out, "standby0.tmp"), "w") as f:
            f.write(str(pid))
        os.rename(os.path.join(out, "standby0.tmp"), os.path.join(out, "standby0"))
        if fault == "trace":  # the test traces it, then says so
            wait_for(lambda: os.path.exists(os.path.join(out, "traced")), "the tracer")
        open(marker, "w").close()
    else:
        wait_for(lambda: os.path.exists(marker), "the fault")
    sys.exit(3)
if fault == "deaf":
    if local == 0:
        sys.exit(1)  # the failure whose detection must not wait for standby 1
    time.sleep(120)   # a cold rank 1 waits to be stopped
sys.exit(0)
'''

# A preload module that makes local rank 1's standby deaf: the hook reads a pipe nobody writes,
# while its real stdin (gculaunch's socket) stays open and fills up with the go.
DEAF_MODULE = r'''
import os
if os.environ.get("LOCAL_RANK") == "1":
    _real_stdin = os.dup(0)
    _never, _writer = os.pipe()
    os.dup2(_never, 0)
'''

PTRACE_SEIZE = 0x4206
WALL = 0x40000000


class StandbyFaults(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tmp = gltest.TempDir(prefix="gltest-standby-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.program = gltest.write_script(self.work, "rank.py", RANK_PROGRAM)
        self.lib = os.path.join(self.work, "lib")
        os.mkdir(self.lib)
        gltest.write_script(self.lib, "gl_deaf.py", DEAF_MODULE)
        self.tag = gltest.new_tag()
        self.addCleanup(gltest.kill_tagged, self.tag)

    def run_job(self, fault, preload="json", extra_env=None, during=None):
        out = os.path.join(self.work, fault)
        os.mkdir(out)
        args = ["--nproc-per-node", "2", "--device", "cpu", "--max-restarts", "1",
                "--restart-backoff", "off", "--warm-ranks", "--preload", preload,
                "--python", gltest.PYTHON, "--env", "GL_FAULT=" + fault,
                "--env", "PYTHONPATH=" + self.lib, self.program, out]
        with gltest.Job(args, tag=self.tag, extra_env=extra_env) as job:
            if during is not None:
                during(job, out)
            code = job.wait(timeout=120)
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "processes outlived the run")
        return code, job.stderr, out

    def read(self, out, name):
        with open(os.path.join(out, name)) as f:
            return f.read()

    def assert_dismissed_once(self, err, pid, reason):
        lines = [l for l in err.splitlines() if "standby" in l and "(pid %d)" % pid in l]
        self.assertEqual(len(lines), 1, err[-4000:])
        self.assertIn("local rank 0 starts cold: " + reason, lines[0])
        self.assertIn("was dismissed", lines[0])

    def test_a_stopped_standby_means_a_cold_start_named_in_one_line(self):
        code, err, out = self.run_job("stop")
        self.assertEqual(code, 0, err[-4000:])
        pid = int(self.read(out, "standby0"))
        self.assert_dismissed_once(err, pid, "its standby is stopped (state T")
        self.assertEqual(self.read(out, "a1_r0"), "cold")
        self.assertEqual(self.read(out, "a1_r1"), "warm")
        self.assertIn("attempt 1: local rank 1 started warm (--warm-ranks)", err)

    def test_a_traced_standby_means_a_cold_start_named_in_one_line(self):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        traced = {}

        def trace(job, out):
            path = os.path.join(out, "standby0")
            deadline = time.monotonic() + 90
            while not os.path.exists(path) and time.monotonic() < deadline:
                time.sleep(0.02)
            pid = int(self.read(out, "standby0"))
            if libc.ptrace(PTRACE_SEIZE, pid, None, None) != 0:
                self.fail("ptrace(PTRACE_SEIZE): errno %d" % ctypes.get_errno())
            traced["pid"] = pid
            # A traced zombie reaches its real parent only once the tracer waited for it.
            threading.Thread(target=os.waitpid, args=(pid, WALL), daemon=True).start()
            open(os.path.join(out, "traced"), "w").close()

        code, err, out = self.run_job("trace", during=trace)
        self.assertEqual(code, 0, err[-4000:])
        self.assert_dismissed_once(err, traced["pid"],
                                   "its standby is traced by pid %d" % os.getpid())
        self.assertEqual(self.read(out, "a1_r0"), "cold")
        self.assertEqual(self.read(out, "a1_r1"), "warm")

    def test_a_standby_with_a_full_stdin_does_not_delay_another_ranks_failure(self):
        # An environment far larger than a socket buffers (about 200 KiB): the go to standby
        # 1 cannot be written whole, and its hook reads something else.
        big = {"GL_BIG_%d" % i: "x" * 120000 for i in range(6)}
        code, err, out = self.run_job("deaf", preload="json,gl_deaf", extra_env=big)
        self.assertEqual(code, 1, err[-4000:])
        failed = re.search(r"rank 0 \(local rank 0, pid \d+\) failed with exit code 1", err)
        self.assertIsNotNone(failed, err[-4000:])
        # Any line about standby 1 (the binary before this change said "could not be told to
        # go", 2 s later, with the loop blocked meanwhile).
        given_up = re.search(r"local rank 1 .*standby", err)
        self.assertIsNotNone(given_up, err[-4000:])
        # The order of the two events: the failure was seen while the go still waited.
        self.assertLess(failed.start(), given_up.start(), err[-4000:])
        line = err[given_up.start():].splitlines()[0]
        self.assertRegex(line, r"local rank 1 (starts cold|does not start \(the attempt is "
                               r"stopping\)): its standby .*; its standby \(pid \d+\) was "
                               r"dismissed")
        self.assertEqual(self.read(out, "a1_r0"), "warm")


if __name__ == "__main__":
    unittest.main()
