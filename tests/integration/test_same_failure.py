"""--max-same-failures and --progress-file (issue 45): the same failure stops the restarts.

A script that raises the same error at every start stops after 4 attempts (the default 3)
with the rank's exit code and the outcome same_failure, instead of using all of
--max-restarts; a flaky one, failing differently or fewer times in a row, uses its restarts and
finishes; a progress file that stops advancing stops a loop whose failures all differ; on two
simulated hosts node 0 decides and both nodes stop the same way.  The ranks are plain Python
(no torch): the loop is gculaunch's, not torch's."""
import json
import os
import unittest

import gltest

# Fails in every attempt listed in FAIL (attempt:what; "*": every attempt), succeeds in the
# others.  `what`: "key" raises KeyError('lr'), "value" ValueError(attempt), anything else
# exits 5.  With PROGRESS set, writes that number to the progress file (argv[1]) first; with
# HOLD=1 a rank that does not fail waits until gculaunch stops it.
RANK = r'''
import os, signal, sys
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
print("attempt %d rank %s" % (attempt, os.environ["RANK"]), flush=True)
if os.environ.get("PROGRESS"):
    with open(sys.argv[1], "w") as f:
        f.write(os.environ["PROGRESS"] + "\n")
fail = dict(item.split(":") for item in os.environ.get("FAIL", "").split(",") if item)
what = fail.get(str(attempt), fail.get("*"))
if what == "key":
    cfg = {}
    cfg["lr"]
elif what == "value":
    raise ValueError("bad value in attempt %d" % attempt)
elif what is not None:
    sys.exit(5)
if os.environ.get("HOLD") == "1":
    signal.pause()
'''


def write_rank(tmp):
    path = os.path.join(tmp, "rank.py")
    with open(path, "w") as f:
        f.write(RANK)
    return path


def attempts_started(stdout):
    return sorted({int(line.split()[2]) for line in stdout.splitlines()
                   if line.startswith("[rank") and " attempt " in line})


def read_summary(path):
    """The --summary-json document, or None when gculaunch wrote none (it refused the flags)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


class SameFailure(unittest.TestCase):
    def launch(self, tmp, env, *extra, max_restarts="10"):
        summary = os.path.join(tmp, "summary.json")
        args = ["--nproc-per-node", "2", "--device", "cpu", "--max-restarts", max_restarts,
                "--summary-json", summary, "--python", gltest.PYTHON] + list(extra) + \
               [write_rank(tmp), os.path.join(tmp, "progress")]
        with gltest.Job(args, extra_env=env) as job:
            code = job.wait(timeout=180)
            return code, job.stdout, job.stderr, read_summary(summary)

    def test_the_same_error_at_every_start_stops_after_4_attempts(self):
        with gltest.TempDir() as tmp:
            # The default back-off waits 1 s, then 2 s: the stop comes before the third wait.
            code, out, err, summary = self.launch(tmp, {"FAIL": "*:key"}, max_restarts="6")
        self.assertEqual(code, 1, err)
        self.assertEqual(attempts_started(out), [0, 1, 2, 3], out)
        self.assertEqual(err.count("restarting all ranks"), 3, err)
        self.assertIn("gculaunch: the same failure 4 times in a row: exit code 1: KeyError: "
                      "'lr'; not restarting (--max-same-failures)\n", err)
        self.assertIn("gculaunch: exit code 1 (same_failure)\n", err)
        self.assertEqual(summary["outcome"], "same_failure")
        self.assertEqual(summary["exit_code"], 1)
        self.assertEqual(summary["restarts"], 3)

    def test_off_with_0_and_the_back_off_does_not_matter(self):
        with gltest.TempDir() as tmp:
            code, out, err, summary = self.launch(tmp, {"FAIL": "*:key"}, "--max-same-failures",
                                                  "0", "--restart-backoff", "off",
                                                  max_restarts="6")
        self.assertEqual(code, 1, err)
        self.assertEqual(attempts_started(out), list(range(7)), out)
        self.assertEqual(summary["outcome"], "rank_failed")
        with gltest.TempDir() as tmp:
            code, out, err, summary = self.launch(tmp, {"FAIL": "*:key"}, "--max-same-failures",
                                                  "1", "--restart-backoff", "off")
        self.assertEqual(code, 1, err)
        self.assertEqual(attempts_started(out), [0, 1], out)
        self.assertIn("the same failure 2 times in a row: exit code 1: KeyError: 'lr'", err)

    def test_a_flaky_script_uses_its_restarts_and_finishes(self):
        # The same error three times (one short of the stop), another, the same again twice,
        # then success: every restart is used.
        with gltest.TempDir() as tmp:
            fail = "0:key,1:key,2:key,3:value,4:key,5:key"
            code, out, err, summary = self.launch(tmp, {"FAIL": fail}, "--max-same-failures",
                                                  "3", max_restarts="6")
        self.assertEqual(code, 0, err)
        self.assertEqual(attempts_started(out), list(range(7)), out)
        self.assertEqual(summary["outcome"], "success")
        self.assertEqual(summary["restarts"], 6)
        self.assertNotIn("not restarting", err)

    def test_a_progress_file_that_stops_advancing_stops_the_loop(self):
        # Every failure differs (ValueError names its attempt): only the progress rule stops it.
        with gltest.TempDir() as tmp:
            code, out, err, summary = self.launch(tmp, {"FAIL": "*:value", "PROGRESS": "120"},
                                                  "--progress-file",
                                                  os.path.join(tmp, "progress"),
                                                  "--restart-backoff", "off")
            progress = os.path.join(tmp, "progress")
        self.assertEqual(code, 1, err)
        self.assertEqual(attempts_started(out), [0, 1, 2, 3], out)
        self.assertIn("gculaunch: the progress file %s did not advance in 4 failed attempts in "
                      "a row (no number above 120); not restarting (--max-same-failures, "
                      "--progress-file)\n" % progress, err)
        self.assertEqual(summary["outcome"], "same_failure")


class SameFailureNodes(unittest.TestCase):
    def test_node_0_stops_the_job_and_both_nodes_agree(self):
        tag = gltest.new_tag()
        hosts = gltest.SimulatedHosts(2)
        self.addCleanup(hosts.close)
        self.addCleanup(gltest.kill_tagged, tag)
        temp = gltest.TempDir()
        self.addCleanup(temp.__exit__, None, None, None)
        tmp = temp.path
        script = write_rank(tmp)

        def node(i, env):
            summary = os.path.join(tmp, "summary%d.json" % i)
            args = ["--nproc-per-node", "1", "--device", "cpu", "--grace-period", "5",
                    "--max-restarts", "10", "--restart-backoff", "off", "--rdzv-timeout", "60",
                    "--run-id", "samenodes", "--summary-json", summary, "--python",
                    gltest.PYTHON, script, os.path.join(tmp, "progress%d" % i)]
            job = gltest.NodeJob(hosts, i, 2, 29500, args, tag, extra_env=env)
            self.addCleanup(job.__exit__, None, None, None)
            return job, summary

        # Node 1's rank raises the same error every time; node 0's rank waits to be stopped.
        node0, summary0 = node(0, {"HOLD": "1"})
        node1, summary1 = node(1, {"FAIL": "*:key"})
        codes = [node0.wait(timeout=240), node1.wait(timeout=240)]
        line = ("the same failure 4 times in a row: exit code 1: KeyError: 'lr'; not "
                "restarting (--max-same-failures)")
        for job, code, path in ((node0, codes[0], summary0), (node1, codes[1], summary1)):
            self.assertEqual(code, 1, job.stderr[-4000:])
            self.assertIn(line, job.stderr)
            summary = read_summary(path)
            self.assertEqual(summary["outcome"], "same_failure", summary)
            self.assertEqual(summary["job"]["kind"], "same_failure", summary)
        self.assertEqual(attempts_started(node1.stdout), [0, 1, 2, 3], node1.stdout)
        self.assertEqual(gltest.wait_no_tagged(tag, 15), [])


if __name__ == "__main__":
    unittest.main()
