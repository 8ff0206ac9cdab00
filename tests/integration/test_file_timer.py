"""torchrun's file-timer watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1): gculaunch serves the
FIFO, and a rank whose timer expires gets the timer's signal, with torch 1.13's own
FileTimerClient in the ranks."""
import os
import signal
import unittest

import gltest

# Rank 1 overruns a 1 s timer (its default signal: SIGKILL); rank 0 keeps within its own.
# Nothing depends on when each rank started (torch's import takes seconds under load): the
# ranks take turns through marker files in MARKERS (the test's directory).  Both acquire a
# long timer for scope "step" (rank 1 once rank 0 holds its own), so both are held at once;
# rank 0 leaves its step once rank 1 is inside its own, prints, and says so; only then does
# rank 1 renew its timer to expire in 1 s.  Rank 0 is thus done before rank 1's timer can
# fire, whatever the load.
TIMERS = r"""
import os, time
from torch.distributed.elastic.timer import FileTimerClient, configure, expires
configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
rank = int(os.environ["RANK"])
markers = os.environ["MARKERS"]

def mark(name):
    open(os.path.join(markers, name + ".tmp"), "w").close()
    os.rename(os.path.join(markers, name + ".tmp"), os.path.join(markers, name))

def wait_for(name):
    for _ in range(3000):  # 60 s at most
        if os.path.exists(os.path.join(markers, name)):
            return
        time.sleep(0.02)
    raise SystemExit("rank %d: no %s within 60 s" % (rank, name))

if rank == 1:
    wait_for("r0_in_step")
with expires(after=120, scope="step"):
    print("rank %d in its step" % rank, flush=True)
    if rank == 0:
        mark("r0_in_step")
        wait_for("r1_in_step")
    else:
        mark("r1_in_step")
        wait_for("r0_released")
        with expires(after=1, scope="step"):  # renews the same timer: 1 s from now
            time.sleep(60)
print("rank %d released its timer" % rank, flush=True)
mark("r%d_released" % rank)
time.sleep(30)
print("rank %d slept out" % rank, flush=True)
"""


class FileTimer(unittest.TestCase):
    def test_an_expired_timer_kills_its_rank(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "timers.py")
            with open(script, "w") as f:
                f.write(TIMERS)
            fifo = os.path.join(tmp, "my_timer_fifo")
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--python",
                             gltest.PYTHON, script],
                            extra_env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1",
                                       "TORCHELASTIC_TIMER_FILE": fifo, "MARKERS": tmp}) as job:
                code = job.wait(timeout=120)
                err = job.stderr
                self.assertEqual(code, 128 + signal.SIGKILL, err)
                self.assertIn("[rank0]: rank 0 released its timer", job.stdout)
                self.assertNotIn("rank 1 released", job.stdout)
                self.assertRegex(err, r"TORCHELASTIC_ENABLE_FILE_TIMER: timer 'step' of pid \d+ "
                                      r"\(rank 1\) expired: sending it SIGKILL")
                self.assertNotIn("slept out", job.stdout)  # rank 0 was stopped with the job
            self.assertFalse(os.path.exists(fifo))

    def test_a_regular_file_named_as_the_fifo_is_left_alone(self):
        # A mistyped TORCHELASTIC_TIMER_FILE naming a file: kept, one warning, the job runs.
        with gltest.TempDir() as tmp:
            script = gltest.write_script(tmp, "ok.sh", "#!/bin/sh\nexit 0\n")
            precious = os.path.join(tmp, "precious.txt")
            with open(precious, "w") as f:
                f.write("keep me\n")
            with gltest.Job(["--no-python", script],
                            extra_env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1",
                                       "TORCHELASTIC_TIMER_FILE": precious}) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                self.assertIn("TORCHELASTIC_TIMER_FILE '%s' is a regular file, not a FIFO of "
                              "this user: gculaunch leaves it alone" % precious, job.stderr)
            with open(precious, encoding="utf-8") as f:
                self.assertEqual(f.read(), "keep me\n")

    def test_off_unless_exactly_1(self):
        res = gltest.run([gltest.require_binary(), "--dry-run", "--device", "cpu", "x.py"],
                         env=gltest.tagged_env(gltest.new_tag(),
                                               {"TORCHELASTIC_ENABLE_FILE_TIMER": "true"}))
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertNotIn("file-timer watchdog", res.stdout)
        res = gltest.run([gltest.require_binary(), "--dry-run", "--device", "cpu", "x.py"],
                         env=gltest.tagged_env(gltest.new_tag(),
                                               {"TORCHELASTIC_ENABLE_FILE_TIMER": "1"}))
        self.assertIn("gculaunch serves torch's file-timer watchdog on <run directory>/"
                      "watchdog_timer", res.stdout)
        self.assertIn("TORCHELASTIC_TIMER_FILE='<temporary directory created at launch>/"
                      "watchdog_timer'", res.stdout)


if __name__ == "__main__":
    unittest.main()
