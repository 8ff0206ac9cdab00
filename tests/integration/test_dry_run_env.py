"""What `gculaunch --dry-run` prints is exactly what the real ranks get: the
environment in /proc/<pid>/environ and the command line in /proc/<pid>/cmdline."""
import glob
import json
import os
import unittest

import gltest

RANK_SCRIPT = r"""
import os, sys
with open(sys.argv[1]) as f:   # the test holds the FIFO open, so this does not block
    print("ready %d %s" % (os.getpid(), os.environ["LOCAL_RANK"]), flush=True)
    f.read()                   # end of file once the test closes its end
"""


class DryRunMatchesRealEnv(unittest.TestCase):
    def test_dry_run_env_equals_proc_environ(self):
        nproc = 3
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "rank.py")
            with open(script, "w") as f:
                f.write(RANK_SCRIPT)
            fifo = os.path.join(tmp, "release")
            os.mkfifo(fifo)
            holder = os.open(fifo, os.O_RDWR)  # a writer for as long as the ranks must wait
            self.addCleanup(lambda: holder is not None and os.close(holder))
            log_dir = os.path.join(tmp, "logs")
            port = gltest.free_port()
            flags = ["--nproc-per-node", str(nproc), "--device", "cpu", "--master-port",
                     str(port), "--run-id", "dryrun-check", "--log-dir", log_dir,
                     "--python", gltest.PYTHON, "--env", "EXTRA_SETTING=42", script, fifo]
            tag = gltest.new_tag()
            env = gltest.tagged_env(tag)
            dry = gltest.run([gltest.require_binary(), "--dry-run", "--format", "json"] + flags,
                             env)
            self.assertEqual(dry.returncode, 0, dry.stderr)
            plan = json.loads(dry.stdout)
            self.assertEqual(plan["master_port"], port)
            text = json.dumps(plan)
            # Only the run's log directory is random (torchrun's <run_id>_<random>).
            stated_root = os.path.join(log_dir, "dryrun-check_<random>")
            self.assertNotIn("<", text.replace(stated_root, ""),
                             "the dry run still has placeholders: " + text)

            with gltest.Job(flags, tag=tag) as job:
                job.wait_for(lambda out, err: out.count("ready ") == nproc, what="ranks ready")
                ready = {}
                for line in job.stdout.splitlines():
                    if "ready " in line:
                        pid, local_rank = line.split("ready ", 1)[1].split()
                        ready[int(local_rank)] = int(pid)
                self.assertEqual(sorted(ready), list(range(nproc)))
                for entry in plan["ranks"]:
                    pid = ready[entry["local_rank"]]
                    expected = dict(env)
                    expected.update(entry["env"])
                    roots = glob.glob(os.path.join(log_dir, "dryrun-check_*"))
                    self.assertEqual(len(roots), 1, roots)
                    expected["TORCHELASTIC_ERROR_FILE"] = expected[
                        "TORCHELASTIC_ERROR_FILE"].replace(stated_root, roots[0])
                    actual = gltest.read_environ(pid)
                    self.assertEqual(actual, expected,
                                     "rank %d: environ differs from the dry run"
                                     % entry["local_rank"])
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        cmdline = [a.decode() for a in f.read().split(b"\0")[:-1]]
                    self.assertEqual(cmdline, entry["argv"])
                os.close(holder)  # release the ranks: every one of them has the FIFO open
                holder = None  # noqa: F841 (read by the cleanup)
                self.assertEqual(job.wait(), 0, job.stderr)
            # The error-file root the dry run named exists, per attempt and rank.
            for entry in plan["ranks"]:
                err_file = entry["env"]["TORCHELASTIC_ERROR_FILE"]
                self.assertTrue(err_file.startswith(os.path.join(stated_root, "attempt_0")))
                real = err_file.replace(stated_root, roots[0])
                self.assertTrue(os.path.isdir(os.path.dirname(real)), real)


if __name__ == "__main__":
    unittest.main()
