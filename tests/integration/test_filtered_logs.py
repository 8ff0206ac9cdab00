"""--duplicate-stdout-filters / --duplicate-stderr-filters (torchrun 2.10+), with real Python
ranks: each attempt's directory gets filtered_stdout.log / filtered_stderr.log, created (maybe
empty) whenever filters are given; they collect, with the console prefix, the lines that
contain a filter (plain, case-sensitive substrings; ',,' is a literal comma) from the teed
streams (--tee) of the ranks the console shows (--local-ranks-filter)."""
import glob
import os
import re
import unittest

import gltest

# Attempt 0 prints matching and other lines on both streams; local rank 1 then fails (exit 3),
# which may cut local rank 0 short (only rank 1's lines are checked), and --max-restarts 1
# makes attempt 1, which prints no matching line and succeeds.
RANK = r"""
import os, sys
r = os.environ["LOCAL_RANK"]
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
if attempt == "0":
    print("step 1 loss=0.5 of %s" % r, flush=True)
    print("nothing to see of %s" % r, flush=True)
    print("Loss with a capital of %s" % r, flush=True)
    print("acc=0.9, done of %s" % r, flush=True)
    print("a,b in a line of %s" % r, flush=True)
    print("WARN: low memory on %s" % r, file=sys.stderr, flush=True)
    print("warn in lower case on %s" % r, file=sys.stderr, flush=True)
    sys.exit(3 if r == "1" else 0)
print("attempt %s of %s" % (attempt, r), flush=True)
print("all quiet on %s" % r, file=sys.stderr, flush=True)
"""


def write_script(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def read(path):
    with open(path) as f:
        return f.read()


class DuplicateFilters(unittest.TestCase):
    def test_teed_lines_of_the_shown_ranks_per_attempt(self):
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "rank.py", RANK)
            log_dir = os.path.join(tmp, "logs")
            args = ["--nproc-per-node", "2", "--tee", "3", "--local-ranks-filter", "1",
                    "--log-dir", log_dir, "--run-id", "filters", "--max-restarts", "1",
                    "--restart-backoff", "off", "--python", gltest.PYTHON,
                    "--duplicate-stdout-filters", "loss,acc,a,,b",
                    "--duplicate_stderr_filters", "WARN", script]
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=120), 0, job.stderr)
                stdout, stderr = job.stdout, job.stderr
            dirs = glob.glob(os.path.join(log_dir, "filters_*"))
            self.assertEqual(len(dirs), 1, dirs)
            attempt0 = os.path.join(dirs[0], "attempt_0")
            attempt1 = os.path.join(dirs[0], "attempt_1")
            # Only local rank 1 (the console's), in its order, with the console's prefix.
            self.assertEqual(read(os.path.join(attempt0, "filtered_stdout.log")),
                             "[rank1]: step 1 loss=0.5 of 1\n"
                             "[rank1]: acc=0.9, done of 1\n"
                             "[rank1]: a,b in a line of 1\n")
            self.assertEqual(read(os.path.join(attempt0, "filtered_stderr.log")),
                             "[rank1]: WARN: low memory on 1\n")
            # The attempt without a matching line has both files, empty.
            self.assertEqual(read(os.path.join(attempt1, "filtered_stdout.log")), "")
            self.assertEqual(read(os.path.join(attempt1, "filtered_stderr.log")), "")
            # The rank logs and the console are as without filters.
            self.assertEqual(read(os.path.join(attempt0, "1", "stdout.log")),
                             "step 1 loss=0.5 of 1\nnothing to see of 1\n"
                             "Loss with a capital of 1\nacc=0.9, done of 1\na,b in a line of 1\n")
            self.assertIn("[rank1]: nothing to see of 1", stdout)
            self.assertIn("[rank1]: attempt 1 of 1", stdout)
            self.assertNotIn("[rank0]:", stdout + stderr)
            self.assertEqual(sorted(os.listdir(attempt0)),
                             ["0", "1", "filtered_stderr.log", "filtered_stdout.log"])

    def test_without_log_dir_the_files_go_beside_the_rank_logs(self):
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "rank.py", "print('loss 1', flush=True)\n")
            tmpdir = os.path.join(tmp, "t")
            os.mkdir(tmpdir)
            # No --tee: torchrun still creates the file (empty), and gculaunch warns.
            args = ["--nproc-per-node", "1", "--run-id", "nodir", "--python", gltest.PYTHON,
                    "--duplicate-stdout-filters", "loss", script]
            with gltest.Job(args, extra_env={"TMPDIR": tmpdir}) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                stdout, stderr = job.stdout, job.stderr
            self.assertIn("[rank0]: loss 1", stdout)
            self.assertIn("--duplicate-stdout-filters: no local rank tees its stdout", stderr)
            m = re.search(r"rank logs and error files: (\S+)", stderr)
            self.assertIsNotNone(m, stderr)
            root = m.group(1)
            self.assertRegex(root, r"^%s/torchelastic_\w{6}/nodir_\w{6}$" % re.escape(tmpdir))
            self.assertEqual(read(os.path.join(root, "attempt_0", "filtered_stdout.log")), "")
            self.assertFalse(os.path.exists(os.path.join(root, "attempt_0",
                                                         "filtered_stderr.log")))


if __name__ == "__main__":
    unittest.main()
