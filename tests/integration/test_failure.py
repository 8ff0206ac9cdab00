"""A failing rank: gculaunch stops the others, exits with the rank's code,
names the rank and shows its traceback, writes --summary-json and, when
nested under another launcher, that launcher's TORCHELASTIC_ERROR_FILE.
Nothing is left running."""
import glob
import json
import os
import signal
import unittest

import gltest

FAILING = r"""
import os, sys, time
rank = int(os.environ["RANK"])
if rank == 1:
    def inner():
        raise ValueError("rank one cannot go on")
    inner()
print("rank %d waiting" % rank, flush=True)
time.sleep(120)
"""

RECORDED = r"""
import os, sys, time
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    if int(os.environ["RANK"]) == 2:
        raise KeyError("recorded failure")
    time.sleep(120)

main()
"""


class Failure(unittest.TestCase):
    def test_failing_rank_code_summary_and_no_survivor(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "fail.py")
            with open(script, "w") as f:
                f.write(FAILING)
            summary = os.path.join(tmp, "summary.json")
            with gltest.Job(["--nproc-per-node", "3", "--device", "cpu", "--python",
                             gltest.PYTHON, "--summary-json", summary, script]) as job:
                code = job.wait(timeout=60)
                self.assertEqual(code, 1, job.stderr)
                err = job.stderr
                self.assertIn("gculaunch: rank 1 failed (local rank 1, node 0", err)
                self.assertIn("exit code 1", err)
                self.assertIn("gculaunch:   | ValueError: rank one cannot go on", err)
                self.assertIn("gculaunch:   | Traceback (most recent call last):", err)
                self.assertTrue(err.rstrip().endswith("gculaunch: exit code 1 (rank_failed)"),
                                err)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
            with open(summary) as f:
                doc = json.load(f)
            self.assertEqual(doc["exit_code"], 1)
            self.assertEqual(doc["outcome"], "rank_failed")
            self.assertEqual(doc["root_cause"]["rank"], 1)
            self.assertEqual(doc["root_cause"]["message"], "ValueError: rank one cannot go on")
            self.assertEqual(len(doc["ranks"]), 3)
            others = [r for r in doc["ranks"] if r["rank"] != 1]
            self.assertTrue(all(r["signal"] == "SIGTERM" for r in others), doc["ranks"])

    def test_signal_death_gives_128_plus_signal(self):
        with gltest.Job(gltest.child_args("eprint", "about to crash", "kill", "SEGV")
                        + []) as job:
            code = job.wait(timeout=60)
            self.assertEqual(code, 128 + signal.SIGSEGV, job.stderr)
            self.assertIn("signal 11 (SIGSEGV)", job.stderr)
            self.assertIn("gculaunch:   | about to crash", job.stderr)

    def test_error_file_is_honoured_and_forwarded_to_a_parent_launcher(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "recorded.py")
            with open(script, "w") as f:
                f.write(RECORDED)
            parent = os.path.join(tmp, "parent", "error.json")
            summary = os.path.join(tmp, "summary.json")
            log_dir = os.path.join(tmp, "logs")
            with gltest.Job(["--nproc-per-node", "3", "--device", "cpu", "--python",
                             gltest.PYTHON, "--log-dir", log_dir, "--run-id", "rec",
                             "--summary-json", summary, script],
                            extra_env={"TORCHELASTIC_ERROR_FILE": parent}) as job:
                code = job.wait(timeout=120)
                self.assertEqual(code, 1, job.stderr)
                roots = glob.glob(os.path.join(log_dir, "rec_*"))  # <run_id>_<random>
                self.assertEqual(len(roots), 1, roots)
                rank_file = os.path.join(roots[0], "attempt_0", "2", "error.json")
                self.assertIn("error file %s: KeyError: 'recorded failure'" % rank_file,
                              job.stderr)
                self.assertIn("traceback from the error file:", job.stderr)
            with open(parent) as f:
                nested = json.load(f)
            self.assertEqual(nested["message"]["errorCode"], 1)
            self.assertEqual(nested["message"]["message"], "KeyError: 'recorded failure'")
            self.assertIn("raise KeyError", nested["message"]["extraInfo"]["py_callstack"])
            with open(summary) as f:
                doc = json.load(f)
            self.assertEqual(doc["root_cause"]["rank"], 2)
            self.assertEqual(doc["root_cause"]["error_file"], rank_file)

    def test_exit_codes_survive_an_inherited_ignored_sigchld(self):
        # A parent that starts gculaunch with SIGCHLD ignored would make the
        # kernel reap the ranks itself and lose their exit codes.
        import subprocess
        tag = gltest.new_tag()
        out = subprocess.run([gltest.require_binary(), "--master-port", "0", "--nproc-per-node", "2"] +
                             gltest.child_args("exit", "6"), env=gltest.tagged_env(tag),
                             capture_output=True, text=True, timeout=60,
                             preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
        self.assertEqual(gltest.wait_no_tagged(tag, 5), [])
        self.assertEqual(out.returncode, 6, out.stderr)
        self.assertIn("exit code 6", out.stderr)

    def test_binary_garbage_on_stderr_still_gives_a_summary(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "garbage.sh")
            with open(script, "w") as f:
                f.write("#!/bin/sh\nprintf 'bad \\377\\376 bytes\\n' >&2\nexit 3\n")
            os.chmod(script, 0o755)
            summary = os.path.join(tmp, "summary.json")
            with gltest.Job(["--summary-json", summary, "--no-python", script]) as job:
                self.assertEqual(job.wait(timeout=60), 3, job.stderr)
            with open(summary, encoding="utf-8") as f:
                doc = json.load(f)
            self.assertEqual(doc["exit_code"], 3)
            self.assertTrue(doc["root_cause"]["message"].startswith("bad "))

    def test_summary_json_never_follows_a_planted_symlink(self):
        # Another user plants PATH.tmp (the old temporary name) and PATH as symlinks to a
        # file of ours: neither is followed, the victim keeps its content.
        with gltest.TempDir() as tmp:
            script = gltest.write_script(tmp, "ok.sh", "#!/bin/sh\nexit 0\n")
            victim = os.path.join(tmp, "victim")
            with open(victim, "w") as f:
                f.write("victim content\n")
            summary = os.path.join(tmp, "summary.json")
            os.symlink(victim, summary + ".tmp")
            os.symlink(victim, summary)
            with gltest.Job(["--summary-json", summary, "--no-python", script]) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            with open(victim, encoding="utf-8") as f:
                self.assertEqual(f.read(), "victim content\n")
            self.assertFalse(os.path.islink(summary))
            with open(summary, encoding="utf-8") as f:
                self.assertEqual(json.load(f)["exit_code"], 0)

    def test_taken_master_port_is_named_with_the_flag(self):
        # --no-agent-store: rank 0 hosts the store (torch 1.13 --standalone
        # style); the port is already taken by a loopback listener of this test.
        import socket
        example = os.path.join(gltest.SOURCE_DIR, "examples", "allreduce.py")
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--no-agent-store",
                             "--master-port", str(port), "--python", gltest.PYTHON,
                             example]) as job:
                self.assertEqual(job.wait(timeout=120), 1, job.stderr)
                self.assertIn("gculaunch: hint: MASTER_PORT %d was already in use when rank 0 "
                              "tried to host the store: pass a free --master-port" % port,
                              job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_taken_store_port_stops_before_any_rank_starts(self):
        # The agent store (the default): gculaunch binds MASTER_PORT itself,
        # before any rank exists, and names the port and the flag.
        import socket
        example = os.path.join(gltest.SOURCE_DIR, "examples", "allreduce.py")
        with socket.socket(socket.AF_INET6) as busy:
            busy.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            busy.bind(("::", 0))
            busy.listen()
            port = busy.getsockname()[1]
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--master-port",
                             str(port), "--python", gltest.PYTHON, example]) as job:
                self.assertEqual(job.wait(timeout=60), 2, job.stderr)
                self.assertIn("cannot host the ranks' store on all interfaces port %d" % port,
                              job.stderr)
                self.assertIn("(fix: pick a free --master-port", job.stderr)
                self.assertNotIn("[rank", job.stderr + job.stdout)


if __name__ == "__main__":
    unittest.main()
