"""Files another user can swap (issue 25, item 1; docs/security.md).

- Every file a rank opens by name (its error file, the stack-dump hook on PYTHONPATH, the
  stacks and heartbeat files) is in gculaunch's private temporary directory, never below
  --log-dir, and the log directory still gets torchrun's layout (error.json copied there).
- A --log-dir that another user could change is refused in one line naming the directory
  and the fix; --allow-shared-log-dir goes on with a warning.
- The attack itself, with a second user (nobody): after the start that user renames the run
  directory and plants a symlink to a directory of theirs holding a sitecustomize.py and the
  next attempt's directories.  After the restart no rank ran that code, and no log file went
  to that user's directory: gculaunch reaches the run directory through its descriptor.
"""
import glob
import json
import os
import time
import unittest

import gltest

NOBODY = 65534

RANK = r"""
import json, os, sys, time
tmp = sys.argv[1]
with open("/proc/self/environ", "rb") as f:  # as exec'd, before the hook tidied it
    start = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
keys = ("TORCHELASTIC_ERROR_FILE", "PYTHONPATH", "GCULAUNCH_STACKS_FILE",
        "GCULAUNCH_HEARTBEAT_FILE")
print("files " + json.dumps({k: start.get(k.encode(), b"").decode() for k in keys}), flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(tmp, "go")) and time.monotonic() < deadline:
    time.sleep(0.05)
if os.environ["LOCAL_RANK"] == "1":  # fails in every attempt; rank 0 is stopped
    from torch.distributed.elastic.multiprocessing.errors import record
    record(lambda: (_ for _ in ()).throw(RuntimeError("planned failure")))()
time.sleep(60)
"""

EVIL_HOOK = """import os
with open(%r, "a") as f:
    f.write("attacker code ran in rank %%s\\n" %% os.environ.get("RANK"))
"""


def files_lines(text):
    return [json.loads(l.split("files ", 1)[1]) for l in text.splitlines() if "files {" in l]


def as_nobody():
    os.setgid(NOBODY)
    os.setuid(NOBODY)


class SharedLogDir(unittest.TestCase):
    def test_rank_files_are_private_and_the_log_dir_keeps_its_layout(self):
        with gltest.TempDir() as tmp:
            rank = gltest.write_script(tmp, "rank.py", RANK)
            open(os.path.join(tmp, "go"), "w").close()
            logs = os.path.join(tmp, "logs")
            with gltest.Job(["--nproc-per-node", "2", "--max-restarts", "1", "--stack-dumps",
                             "--hang-timeout", "600", "--log-dir", logs, "--run-id", "own",
                             "--python", gltest.PYTHON, rank, tmp]) as job:
                self.assertEqual(job.wait(timeout=120), 1)  # rank 1 failed in both attempts
            seen = files_lines(job.stdout)
            self.assertGreaterEqual(len(seen), 4)
            for files in seen:
                for key, path in files.items():
                    self.assertTrue(path, key)
                    for part in path.split(":"):
                        self.assertFalse(part.startswith(logs), "%s=%s" % (key, path))
                error_dir = os.path.dirname(files["TORCHELASTIC_ERROR_FILE"])
                root = error_dir.rsplit("/attempt_", 1)[0]
                self.assertTrue(os.path.basename(root).startswith("gculaunch-"), root)
            # The private directory is gone after the exit; the logs keep torchrun's layout.
            self.assertFalse(os.path.exists(root))
            (run,) = glob.glob(os.path.join(logs, "own_*"))
            with open(os.path.join(run, "attempt_0", "1", "error.json")) as f:
                self.assertIn("planned failure", f.read())
            self.assertFalse(os.path.exists(os.path.join(run, "attempt_0", "0", "error.json")))
            for attempt in ("attempt_0", "attempt_1"):
                with open(os.path.join(run, attempt, "0", "stdout.log")) as f:
                    self.assertIn("files {", f.read())
            # The summary names the copy, which outlives the job.
            self.assertIn("error file " + os.path.join(run, "attempt_1", "1", "error.json"),
                          job.stderr)

    def test_a_log_dir_others_can_change_is_refused_unless_allowed(self):
        with gltest.TempDir() as tmp:
            shared = os.path.join(tmp, "shared")
            os.mkdir(shared)
            os.chmod(shared, 0o777)  # writable by everyone, not sticky
            args = ["--nproc-per-node", "1", "--log-dir", os.path.join(shared, "logs"),
                    "--no-python", "/bin/true"]
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=60), 2)
            lines = [l for l in job.stderr.splitlines() if l.strip()]
            self.assertEqual(len(lines), 1, job.stderr)
            self.assertIn(shared + " is writable by other users and not sticky (mode 0777)",
                          lines[0])
            self.assertIn("--allow-shared-log-dir", lines[0])
            self.assertEqual(os.listdir(shared), [])  # nothing was created
            with gltest.Job(["--allow-shared-log-dir"] + args) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            self.assertIn("warning: --log-dir", job.stderr)
            self.assertEqual(len(glob.glob(os.path.join(shared, "logs", "none_*"))), 1)
            # A sticky directory, as /tmp, is fine.
            os.chmod(shared, 0o1777)
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            self.assertNotIn("warning", job.stderr)

    def test_a_swapped_run_directory_neither_runs_code_nor_receives_logs(self):
        with gltest.TempDir() as tmp:
            os.chmod(tmp, 0o755)  # so that nobody can reach its own directories below
            rank = gltest.write_script(tmp, "rank.py", RANK)
            shared = os.path.join(tmp, "shared")
            evil = os.path.join(tmp, "evil")
            for d in (shared, evil):
                os.mkdir(d)
                os.chown(d, NOBODY, NOBODY)
            pwned = os.path.join(tmp, "pwned")
            with gltest.Job(["--nproc-per-node", "2", "--max-restarts", "1", "--stack-dumps",
                             "--python-shim", "--allow-shared-log-dir", "--log-dir", shared,
                             "--python", gltest.PYTHON, rank, tmp]) as job:
                job.wait_for(lambda out, err: len(files_lines(out)) >= 2, what="attempt 0")
                self.assertIn("is owned by another user (uid %d)" % NOBODY, job.stderr)
                pid = os.fork()
                if pid == 0:  # the other user: swap the run directory for a link to theirs
                    code = 1
                    try:
                        as_nobody()
                        (run,) = glob.glob(os.path.join(shared, "none_*"))
                        for hook_dir in ("stack-hook", "python-shim", "."):
                            os.makedirs(os.path.join(evil, hook_dir), exist_ok=True)
                            with open(os.path.join(evil, hook_dir, "sitecustomize.py"), "w") as f:
                                f.write(EVIL_HOOK % pwned)
                        for lr in ("0", "1"):
                            os.makedirs(os.path.join(evil, "attempt_1", lr))
                        os.rename(run, run + ".moved")
                        os.symlink(evil, run)
                        code = 0
                    finally:
                        os._exit(code)
                self.assertEqual(os.waitpid(pid, 0)[1], 0)
                open(os.path.join(tmp, "go"), "w").close()
                self.assertEqual(job.wait(timeout=120), 1, job.stderr)
            self.assertEqual(len(files_lines(job.stdout)), 4, job.stdout)
            self.assertFalse(os.path.exists(pwned), "the other user's code ran in a rank")
            (moved,) = glob.glob(os.path.join(shared, "none_*.moved"))
            self.assertEqual(sorted(os.listdir(os.path.join(evil, "attempt_1", "0"))), [])
            self.assertEqual(os.listdir(os.path.join(evil, "attempt_1", "1")), [])
            self.assertFalse(os.path.exists(os.path.join(evil, "events.jsonl")))
            with open(os.path.join(moved, "attempt_1", "0", "stdout.log")) as f:
                self.assertIn("files {", f.read())
            with open(os.path.join(moved, "attempt_0", "1", "error.json")) as f:
                self.assertIn("planned failure", f.read())


if __name__ == "__main__":
    unittest.main()
