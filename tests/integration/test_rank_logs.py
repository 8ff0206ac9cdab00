"""Rank logs as torchrun keeps them, with real Python ranks:
--tee shows a stream on the console and files it, --redirects alone only files it
(torchrun's redirects |= tee); --redirects/--tee without --log-dir write to a new
kept torchelastic_ temporary directory; every run gets its own
<log_dir>/<run_id>_<random>/attempt_<n>/<local_rank>/ directory, so the same
--log-dir twice never overwrites a run; a progress bar ('\\r' updates) does not
flood a pipe or a terminal, while the log files keep every byte."""
import glob
import os
import pty
import re
import select
import subprocess
import sys
import time
import unittest

import gltest

RANK = r"""
import os, sys
r = os.environ["LOCAL_RANK"]
print("out of %s %s" % (r, sys.argv[1]), flush=True)
print("err of %s %s" % (r, sys.argv[1]), file=sys.stderr, flush=True)
"""

BAR = r"""
import sys, time
steps, pause = int(sys.argv[1]), float(sys.argv[2])
sys.stderr.write("before\n")
for i in range(steps + 1):
    sys.stderr.write("\rtraining: %3d%%|%-20s| %d/%d" % (100 * i // steps, "#" * i, i, steps))
    sys.stderr.flush()
    if i < steps:
        time.sleep(pause)
sys.stderr.write("\nafter\n")
"""


def write_script(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def rank_lines(text):
    return sorted(l for l in text.splitlines() if l.startswith("[rank"))


def run_dirs(log_dir, run_id):
    return sorted(glob.glob(os.path.join(log_dir, run_id + "_*")))


class TeeAndRedirects(unittest.TestCase):
    def test_console_and_files_for_redirects_and_tee(self):
        # (redirects, tee) -> streams shown on the console for local ranks 0 and 1
        cases = [("3", "3", {0: "oe", 1: "oe"}),
                 ("3", "1", {0: "o", 1: "o"}),
                 ("3", "2", {0: "e", 1: "e"}),
                 ("3", "0", {0: "", 1: ""}),
                 ("1", "0", {0: "e", 1: "e"}),
                 ("3", "0:1,1:2", {0: "o", 1: "e"})]
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "rank.py", RANK)
            for redirects, tee, shown in cases:
                with self.subTest(redirects=redirects, tee=tee):
                    log_dir = os.path.join(tmp, "logs-%s-%s" % (redirects, tee.replace(",", "_")))
                    args = ["--nproc-per-node", "2", "--python", gltest.PYTHON, "--log-dir",
                            log_dir, "--run-id", "teerun", "-r", redirects, "-t", tee,
                            script, "x"]
                    with gltest.Job(args) as job:
                        self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                        out, err = rank_lines(job.stdout), rank_lines(job.stderr)
                    want_out = sorted("[rank%d]: out of %d x" % (r, r)
                                      for r in (0, 1) if "o" in shown[r])
                    want_err = sorted("[rank%d]: err of %d x" % (r, r)
                                      for r in (0, 1) if "e" in shown[r])
                    self.assertEqual(out, want_out)
                    self.assertEqual(err, want_err)
                    dirs = run_dirs(log_dir, "teerun")
                    self.assertEqual(len(dirs), 1, dirs)
                    for r in (0, 1):
                        d = os.path.join(dirs[0], "attempt_0", str(r))
                        with open(os.path.join(d, "stdout.log")) as f:
                            self.assertEqual(f.read(), "out of %d x\n" % r)
                        with open(os.path.join(d, "stderr.log")) as f:
                            self.assertEqual(f.read(), "err of %d x\n" % r)

    def test_maps_written_for_eight_cards_run_on_two(self):
        # MLCommons AlgoPerf's launch line for 8 cards (--redirects 1:0,...,7:0: rank 0's output
        # stays as it is) and a --tee map of the same shape, on a node with 2 cards: torchrun
        # ignores the entries of the ranks the node does not run, and so does gculaunch, with
        # one warning per flag; the entries of local rank 1 still count.
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "rank.py", RANK)
            log_dir = os.path.join(tmp, "logs")
            args = ["--nproc-per-node", "2", "--python", gltest.PYTHON, "--log-dir", log_dir,
                    "--run-id", "eight", "--redirects", "1:3,2:0,3:0,4:0,5:0,6:0,7:0",
                    "--tee", "1:1,2:1,3:1,4:1,5:1,6:1,7:1", script, "z"]
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                out, err, stderr = rank_lines(job.stdout), rank_lines(job.stderr), job.stderr
            # Rank 0: nothing redirected; rank 1: both redirected, stdout teed back.
            self.assertEqual(out, ["[rank0]: out of 0 z", "[rank1]: out of 1 z"])
            self.assertEqual(err, ["[rank0]: err of 0 z"])
            for flag, ranks in (("--redirects", "2,3,4,5,6,7"), ("--tee", "2,3,4,5,6,7")):
                self.assertEqual(stderr.count("%s: ignored the entries for local ranks %s, "
                                              "which this node does not run (nproc-per-node "
                                              "is 2), as torchrun does" % (flag, ranks)), 1,
                                 stderr)
            dirs = run_dirs(log_dir, "eight")
            self.assertEqual(len(dirs), 1, dirs)
            with open(os.path.join(dirs[0], "attempt_0", "1", "stderr.log")) as f:
                self.assertEqual(f.read(), "err of 1 z\n")

    def test_redirects_without_log_dir_keep_a_torchelastic_directory(self):
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "rank.py", RANK)
            tmpdir = os.path.join(tmp, "t")
            os.mkdir(tmpdir)
            args = ["--nproc-per-node", "1", "--python", gltest.PYTHON, "--run-id", "nodir",
                    "--redirects", "3", script, "y"]
            with gltest.Job(args, extra_env={"TMPDIR": tmpdir}) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                self.assertEqual(rank_lines(job.stdout + job.stderr), [])
                stderr = job.stderr
            m = re.search(r"rank logs and error files: (\S+)", stderr)
            self.assertIsNotNone(m, stderr)
            root = m.group(1)
            self.assertRegex(root, r"^%s/torchelastic_\w{6}/nodir_\w{6}$" % re.escape(tmpdir))
            # Kept after gculaunch (and its guardian) are gone; no scratch directory is left.
            time.sleep(0.5)
            with open(os.path.join(root, "attempt_0", "0", "stdout.log")) as f:
                self.assertEqual(f.read(), "out of 0 y\n")
            with open(os.path.join(root, "attempt_0", "0", "stderr.log")) as f:
                self.assertEqual(f.read(), "err of 0 y\n")
            self.assertEqual(sorted(os.listdir(tmpdir)), [os.path.basename(os.path.dirname(root))])


class SameLogDirTwice(unittest.TestCase):
    def test_a_second_run_never_overwrites_the_first(self):
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "rank.py", RANK)
            log_dir = os.path.join(tmp, "logs")
            for run in ("first", "second"):
                args = ["--nproc-per-node", "2", "--python", gltest.PYTHON, "--log-dir", log_dir,
                        "--run-id", "same", script, run]
                with gltest.Job(args) as job:
                    self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            dirs = run_dirs(log_dir, "same")
            self.assertEqual(len(dirs), 2, dirs)
            contents = set()
            for d in dirs:
                with open(os.path.join(d, "attempt_0", "1", "stdout.log")) as f:
                    contents.add(f.read())
            self.assertEqual(contents, {"out of 1 first\n", "out of 1 second\n"})

    def test_error_files_of_each_run_stay(self):
        fail = ("import os, sys\n"
                "open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w').write("
                "'{\"message\": \"run %s\"}' % sys.argv[1])\n"
                "sys.exit(3)\n")
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "fail.py", fail)
            log_dir = os.path.join(tmp, "logs")
            for run in ("one", "two"):
                args = ["--nproc-per-node", "1", "--python", gltest.PYTHON, "--log-dir", log_dir,
                        "--run-id", "err", script, run]
                with gltest.Job(args) as job:
                    self.assertNotEqual(job.wait(timeout=60), 0, job.stderr)
            found = set()
            for d in run_dirs(log_dir, "err"):
                with open(os.path.join(d, "attempt_0", "0", "error.json")) as f:
                    found.add(f.read())
            self.assertEqual(found, {'{"message": "run one"}', '{"message": "run two"}'})


class ProgressBars(unittest.TestCase):
    STEPS, PAUSE = 20, 0.3  # refreshes further apart than the 250 ms idle flush

    def test_a_pipe_gets_the_first_and_final_state_and_the_log_every_byte(self):
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "bar.py", BAR)
            log_dir = os.path.join(tmp, "logs")
            args = ["--nproc-per-node", "1", "--python", gltest.PYTHON, "--log-dir", log_dir,
                    "--run-id", "bar", "-t", "3", script, str(self.STEPS),
                    str(self.PAUSE)]
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                lines = rank_lines(job.stderr)
                ordered = [l for l in job.stderr.splitlines() if l.startswith("[rank0]")]
            bar_lines = [l for l in ordered if "training:" in l]
            # The first state, then nothing within the 30 s interval, then the final state.
            self.assertLessEqual(len(bar_lines), 3, "\n".join(ordered))
            self.assertEqual(ordered[0], "[rank0]: before")
            self.assertEqual(ordered[-2], "[rank0]: training: 100%%|%-20s| %d/%d"
                             % ("#" * self.STEPS, self.STEPS, self.STEPS))
            self.assertEqual(ordered[-1], "[rank0]: after")
            self.assertEqual(len(lines), len(ordered))
            with open(os.path.join(run_dirs(log_dir, "bar")[0], "attempt_0", "0",
                                   "stderr.log"), newline="") as f:
                raw = f.read()
            self.assertEqual(raw.count("\r"), self.STEPS + 1)
            self.assertTrue(raw.startswith("before\n\rtraining:   0%"), raw[:80])
            self.assertTrue(raw.endswith("%d/%d\nafter\n" % (self.STEPS, self.STEPS)), raw[-80:])

    def test_progress_interval_sets_how_often_a_pipe_gets_the_bar(self):
        # --progress-interval 0: every update reaches the pipe; 1 s: one per second at most.
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "bar.py", BAR)
            counts = {}
            for interval in ("0", "1"):
                args = ["--nproc-per-node", "1", "--python", gltest.PYTHON,
                        "--progress-interval", interval, script, str(self.STEPS),
                        str(self.PAUSE)]
                with gltest.Job(args) as job:
                    self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                    counts[interval] = len([l for l in job.stderr.splitlines()
                                            if l.startswith("[rank0]") and "training:" in l])
            # Updates 0.3 s apart: some may coalesce in one read, most arrive on their own.
            self.assertGreaterEqual(counts["0"], self.STEPS // 2, counts)
            self.assertLess(counts["1"], counts["0"], counts)
            self.assertLessEqual(counts["1"], self.STEPS * self.PAUSE + 2, counts)

    def test_a_terminal_redraws_the_bar_in_place(self):
        steps = 8
        with gltest.TempDir() as tmp:
            script = write_script(tmp, "bar.py", BAR)
            master, slave = pty.openpty()
            tag = gltest.new_tag()
            cmd = [gltest.require_binary(), "--master-port", "0", "--nproc-per-node", "1",
                   "--python", gltest.PYTHON, script, str(steps), str(self.PAUSE)]
            proc = subprocess.Popen(cmd, env=gltest.tagged_env(tag), stdin=subprocess.DEVNULL,
                                    stdout=slave, stderr=slave, start_new_session=True)
            os.close(slave)
            self.addCleanup(gltest.kill_tagged, tag)
            out = b""
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.5)
                if ready:
                    try:
                        data = os.read(master, 65536)
                    except OSError:  # EIO: every writer closed the terminal
                        break
                    if not data:
                        break
                elif proc.poll() is not None:
                    break
                else:
                    continue
                out += data
            os.close(master)
            self.assertEqual(proc.wait(timeout=30), 0, out.decode(errors="replace"))
            text = out.decode(errors="replace").replace("\r\n", "\n")  # the tty's ONLCR
            bar = [l for l in text.split("\n") if "training:" in l]
            # One terminal line for the whole bar: redrawn in place ("\r" + clear line).
            self.assertEqual(len(bar), 1, repr(text))
            self.assertGreaterEqual(bar[0].count("\r\x1b[K[rank0]: training:"), steps, repr(text))
            self.assertTrue(bar[0].endswith("[rank0]: training: 100%%|%-20s| %d/%d"
                                            % ("#" * steps, steps, steps)), repr(bar[0]))
            self.assertIn("[rank0]: before\n", text)
            self.assertIn("[rank0]: after\n", text)


if __name__ == "__main__":
    unittest.main()
