"""--hang-timeout: a job that stops progressing is reported within seconds, with every rank's
Python stack and the odd rank named, then --on-hang stop|restart|report (real gloo ranks with
Debian torch 1.13 where a collective is involved)."""
import json
import os
import re
import time
import unittest

import gltest

# 4 ranks; in attempt 0 rank 1 never enters the all_reduce the others wait in (gloo's own
# timeout: 30 minutes).  In later attempts everyone takes part.
HANG = gltest.hang_script(stuck_rank=1)

# Rank 0 only touches its heartbeat (prints nothing); rank 1 touches it twice and then stops.
HEARTBEAT = r"""
import os, time
path = os.environ["GCULAUNCH_HEARTBEAT_FILE"]
rank = int(os.environ["RANK"])
def touch():
    with open(path, "a"):
        os.utime(path)
for i in range(60):
    if rank == 0 or i < 2:
        touch()
    time.sleep(0.1)
"""

# Rank 0 prints every 0.3 s for 5 s; rank 1 says nothing at all.
ONE_PRINTER = r"""
import os, time
if os.environ["RANK"] == "0":
    for i in range(17):
        print("step %d" % i, flush=True)
        time.sleep(0.3)
else:
    time.sleep(5)
"""

# One rank: output, silence, output, silence, output.
TWO_PAUSES = r"""
import time
print("first", flush=True)
time.sleep(3)
print("second", flush=True)
time.sleep(3)
print("third", flush=True)
"""


class Hang(unittest.TestCase):
    def write(self, tmp, name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def launch(self, args, script):
        return gltest.Job(["--device", "cpu", "--python", gltest.PYTHON] + args + [script])

    def test_stuck_rank_reported_named_and_stopped(self):
        with gltest.TempDir() as tmp:
            script = self.write(tmp, "hang.py", HANG)
            log_dir = os.path.join(tmp, "logs")
            with self.launch(["--standalone", "--nproc-per-node", "4", "--hang-timeout", "3s",
                              "--log-dir", log_dir], script) as job:
                job.wait_for(lambda out, err: out.count("enters all_reduce") == 3
                             and "rank 1 is stuck" in out, timeout=120, what="4 ranks up")
                silent_since = time.monotonic()
                job.wait_for(lambda out, err: "differs from the majority" in err
                             or "every dumped rank" in err, timeout=60, what="the hang report")
                latency = time.monotonic() - silent_since
                code = job.wait(timeout=60)
                err = job.stderr
                gltest.eprint("hang reported %.2f s after the last output (timeout 3 s)"
                              % latency)
                self.assertLess(latency, 3 + 4, err)
                self.assertEqual(code, 6, err)
                self.assertRegex(err, r"gculaunch: hang \(no progress from any rank for 3\.\d s "
                                      r"\(--hang-timeout 3\.0 s\)\): stacks of attempt 0")
                for rank in range(4):
                    self.assertRegex(err, r"---- rank %d \(local rank %d, pid \d+\) ----\n"
                                     % (rank, rank))
                self.assertRegex(err, r"rank 1 differs from the majority: in "
                                      r"stuck_in_my_own_function \(.*hang\.py:\d+\)")
                self.assertEqual(err.count(" in all_reduce\n"), 3, err)
                self.assertIn("stopped because the job hung", err)
                self.assertIn("exit code 6", err)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
            reports = [os.path.join(d, f) for d, _, files in os.walk(log_dir) for f in files
                       if f.startswith("hang_")]
            self.assertEqual(len(reports), 1, reports)
            with open(reports[0]) as f:
                self.assertIn("rank 1 differs from the majority", f.read())
            # events.jsonl: one `hang` event with the timeout, the silence, the action and the
            # odd rank.
            events = [os.path.join(d, f) for d, _, files in os.walk(log_dir) for f in files
                      if f == "events.jsonl"]
            self.assertEqual(len(events), 1, events)
            with open(events[0]) as f:
                hangs = [e for e in map(json.loads, f) if e["event"] == "hang"]
            self.assertEqual(len(hangs), 1, hangs)
            self.assertEqual((hangs[0]["epoch"], hangs[0]["timeout_s"], hangs[0]["action"],
                              hangs[0]["odd_ranks"]), (0, 3.0, "stop", [1]), hangs)
            self.assertGreaterEqual(hangs[0]["silent_s"], 3.0)
            self.assertLess(hangs[0]["silent_s"], 3.0 + 4)
            self.assertRegex(hangs[0]["reason"], r"^no progress from any rank for 3\.\d s")

    def test_on_hang_restart_runs_the_next_attempt(self):
        with gltest.TempDir() as tmp:
            script = self.write(tmp, "hang.py", HANG)
            with self.launch(["--standalone", "--nproc-per-node", "4", "--hang-timeout", "3s",
                              "--on-hang", "restart", "--max-restarts", "1"], script) as job:
                code = job.wait(timeout=240)
                self.assertEqual(code, 0, job.stderr)
                self.assertIn("rank 1 differs from the majority", job.stderr)
                self.assertIn("restarting all ranks (restart 1 of 1) after a hang "
                              "(--hang-timeout)", job.stderr)
                for rank in range(4):
                    self.assertIn("[rank%d]: rank %d done: 4" % (rank, rank), job.stdout)

    def test_a_rank_whose_heartbeat_stops_is_flagged_alone(self):
        with gltest.TempDir() as tmp:
            script = self.write(tmp, "beat.py", HEARTBEAT)
            with self.launch(["--nproc-per-node", "2", "--hang-timeout", "2s"], script) as job:
                code = job.wait(timeout=60)
                err = job.stderr
                self.assertEqual(code, 6, err)
                self.assertIn("hang (rank 1 stopped touching GCULAUNCH_HEARTBEAT_FILE", err)
                self.assertNotIn("rank 0 stopped", err)
                self.assertNotIn("ranks 0", err)

    def test_rank_0_alone_printing_is_progress(self):
        with gltest.TempDir() as tmp:
            script = self.write(tmp, "one.py", ONE_PRINTER)
            with self.launch(["--nproc-per-node", "2", "--hang-timeout", "2s"], script) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                self.assertNotIn("hang", job.stderr)
                self.assertIn("[rank0]: step 16", job.stdout)

    def test_on_hang_report_keeps_running_and_reports_each_hang_once(self):
        with gltest.TempDir() as tmp:
            script = self.write(tmp, "pauses.py", TWO_PAUSES)
            with self.launch(["--nproc-per-node", "1", "--hang-timeout", "1.5s", "--on-hang",
                              "report"], script) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                self.assertEqual(len(re.findall(r"gculaunch: hang \(", job.stderr)), 2,
                                 job.stderr)
                self.assertIn("[rank0]: third", job.stdout)

    def test_flag_errors(self):
        env = gltest.tagged_env(gltest.new_tag())
        res = gltest.run([gltest.require_binary(), "--on-hang", "restart", "x.py"], env=env)
        self.assertEqual(res.returncode, 2)
        self.assertEqual(res.stderr, "gculaunch: --on-hang only applies with --hang-timeout "
                         "(fix: add --hang-timeout DURATION, or drop --on-hang)\n")
        res = gltest.run([gltest.require_binary(), "--hang-timeout", "soon", "x.py"], env=env)
        self.assertEqual(res.returncode, 2)
        self.assertIn("--hang-timeout 'soon'", res.stderr)


if __name__ == "__main__":
    unittest.main()
