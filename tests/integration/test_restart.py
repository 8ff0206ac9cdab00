"""--max-restarts: the whole group restarts after a failure, with
TORCHELASTIC_RESTART_COUNT incremented and a fresh attempt directory."""
import glob
import json
import os
import unittest

import gltest

FLAKY = r"""
import os, sys
count = os.environ["TORCHELASTIC_RESTART_COUNT"]
print("rank %s sees TORCHELASTIC_RESTART_COUNT=%s" % (os.environ["RANK"], count), flush=True)
if count == "0" and os.environ["RANK"] == "1":
    import json
    with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
        json.dump({"message": "flaky first attempt", "timestamp": 1}, f)
    sys.exit(3)
"""


class Restart(unittest.TestCase):
    def test_rank_failing_only_in_attempt_0_restarts_and_succeeds(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "flaky.py")
            with open(script, "w") as f:
                f.write(FLAKY)
            log_dir = os.path.join(tmp, "logs")
            summary = os.path.join(tmp, "summary.json")
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--python",
                             gltest.PYTHON, "--max-restarts", "1", "--log-dir", log_dir,
                             "--run-id", "flaky", "--summary-json", summary, script]) as job:
                self.assertEqual(job.wait(timeout=120), 0, job.stderr)
                self.assertIn("[rank0]: rank 0 sees TORCHELASTIC_RESTART_COUNT=1", job.stdout)
                self.assertIn("[rank1]: rank 1 sees TORCHELASTIC_RESTART_COUNT=1", job.stdout)
                self.assertIn("restarting all ranks (restart 1 of 1) after rank 1 failed with "
                              "exit code 3", job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
            roots = glob.glob(os.path.join(log_dir, "flaky_*"))  # <run_id>_<random>
            self.assertEqual(len(roots), 1, roots)
            root = roots[0]
            self.assertEqual(sorted(os.listdir(root)),
                             ["attempt_0", "attempt_1", "events.jsonl"])  # docs/operations.md
            self.assertTrue(os.path.exists(os.path.join(root, "attempt_0", "1", "error.json")))
            self.assertFalse(os.path.exists(os.path.join(root, "attempt_1", "1", "error.json")))
            with open(os.path.join(root, "attempt_1", "1", "stdout.log")) as f:
                self.assertEqual(f.read(), "rank 1 sees TORCHELASTIC_RESTART_COUNT=1\n")
            with open(summary) as f:
                doc = json.load(f)
            self.assertEqual(doc["restarts"], 1)
            self.assertEqual(doc["outcome"], "success")

    def test_stale_error_file_is_not_taken_for_a_new_one(self):
        # A leftover error.json from an earlier run with the same --log-dir and
        # run id must not become the root cause of a failure that wrote none.
        with gltest.TempDir() as tmp:
            log_dir = os.path.join(tmp, "logs")
            stale = os.path.join(log_dir, "same", "attempt_0", "0", "error.json")
            os.makedirs(os.path.dirname(stale))
            with open(stale, "w") as f:
                json.dump({"message": "stale from last week", "timestamp": 1}, f)
            summary = os.path.join(tmp, "summary.json")
            with gltest.Job(["--nproc-per-node", "1", "--log-dir", log_dir, "--run-id", "same",
                             "--summary-json", summary] +
                            gltest.child_args("eprint", "fresh failure", "exit", "4")) as job:
                self.assertEqual(job.wait(timeout=60), 4, job.stderr)
                self.assertNotIn("stale from last week", job.stderr)
            with open(summary) as f:
                doc = json.load(f)
            self.assertEqual(doc["root_cause"]["message"], "fresh failure")
            self.assertIsNone(doc["root_cause"]["error_file"])


if __name__ == "__main__":
    unittest.main()
