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


# torchrun's per-rank variables and gculaunch's defaults: always in the dry run.  The NCCL
# error-handling name is torch 1.13's (/usr/bin/python3): torch 2.2 and later would get
# TORCH_NCCL_ASYNC_ERROR_HANDLING instead (test_nccl_error_handling.py).
CONTRACT = ["LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
            "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
            "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "PYTHONUNBUFFERED",
            "OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING", "GCULAUNCH_BACKEND"]


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
            # Values the ranks get anyway, already in gculaunch's environment (as on a
            # platform node): the dry run must still list them.
            same = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                    "PYTHONUNBUFFERED": "1"}
            env = gltest.tagged_env(tag, extra=same)
            dry = gltest.run([gltest.require_binary(), "--dry-run", "--format", "json"] + flags,
                             env)
            self.assertEqual(dry.returncode, 0, dry.stderr)
            plan = json.loads(dry.stdout)
            self.assertEqual(plan["master_port"], port)
            text = json.dumps(plan)
            # Only the directories are random: the run's log directory (torchrun's
            # <run_id>_<random>) and gculaunch's private one for the ranks' files.
            stated_root = os.path.join(log_dir, "dryrun-check_<random>")
            private = "<temporary directory created at launch>"
            self.assertEqual(plan["log_dir"], stated_root)
            self.assertNotIn("<", text.replace(stated_root, "").replace(private, ""),
                             "the dry run still has placeholders: " + text)
            for entry in plan["ranks"]:
                missing = [v for v in CONTRACT if v not in entry["env"]]
                self.assertEqual(missing, [], "rank %d: the dry run leaves out %s"
                                 % (entry["local_rank"], missing))
                for key, value in same.items():
                    self.assertEqual(entry["env"][key], value)
            self.assertTrue(any(n.startswith("from gculaunch's environment unchanged")
                                and "MASTER_ADDR" in n for n in plan["notes"]), plan["notes"])
            # --format env holds every one of them for each rank, too.
            env_text = gltest.run([gltest.require_binary(), "--dry-run", "--format", "env"]
                                  + flags, env)
            self.assertEqual(env_text.returncode, 0, env_text.stderr)
            for rank_text in env_text.stdout.split("\n# rank ")[1:]:
                exported = {line.split("=", 1)[0][len("export "):]
                            for line in rank_text.splitlines() if line.startswith("export ")}
                self.assertEqual([v for v in CONTRACT if v not in exported], [], rank_text)

            with gltest.Job(flags, tag=tag, extra_env=same) as job:
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
                    actual = gltest.read_environ(pid)
                    made = actual["TORCHELASTIC_ERROR_FILE"].rsplit("/attempt_", 1)[0]
                    self.assertRegex(os.path.basename(made), r"^gculaunch-dryrun-c-\w{6}$")
                    expected["TORCHELASTIC_ERROR_FILE"] = expected[
                        "TORCHELASTIC_ERROR_FILE"].replace(private, made)
                    self.assertEqual(actual, expected,
                                     "rank %d: environ differs from the dry run"
                                     % entry["local_rank"])
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        cmdline = [a.decode() for a in f.read().split(b"\0")[:-1]]
                    self.assertEqual(cmdline, entry["argv"])
                os.close(holder)  # release the ranks: every one of them has the FIFO open
                holder = None  # noqa: F841 (read by the cleanup)
                self.assertEqual(job.wait(), 0, job.stderr)
            # The log directory the dry run named exists, per attempt and rank; the private
            # directory of the ranks' files is gone.
            self.assertFalse(os.path.exists(made))
            for entry in plan["ranks"]:
                err_file = entry["env"]["TORCHELASTIC_ERROR_FILE"]
                self.assertTrue(err_file.startswith(os.path.join(private, "attempt_0")))
                real = os.path.join(roots[0], "attempt_0", str(entry["local_rank"]))
                self.assertTrue(os.path.isfile(os.path.join(real, "stdout.log")), real)


if __name__ == "__main__":
    unittest.main()
