"""--restart-backoff (issue 24): a crash loop backs off.  A rank that fails at once under a
large --max-restarts restarts 1 (at once), then waits 1, 2, 4 ... s (default 1:60); the log,
events.jsonl and `gculaunch status` tell the wait; a SIGTERM during the wait ends gculaunch at
once with 143; --restart-backoff off restarts at once every time.  Two simulated nodes: node 0
decides the wait, every node waits the same (its plan carries it).

No wall-clock assertion: the counts of attempts and the logged waits are checked; the one
bound on time (a SIGTERM answered while a 300 s wait runs) has a 60 s margin.

/bin/false fails the same way every time, which --max-same-failures (issue 45) would stop
after 4 attempts: the crash loops here turn it off, to look at the back-off alone."""
import glob
import json
import os
import re
import signal
import subprocess
import time
import unittest

import gltest

FALSE = "/bin/false"


def run_dir(log_dir, run_id):
    roots = glob.glob(os.path.join(log_dir, run_id + "_*"))
    if len(roots) != 1:
        raise AssertionError("expected one run directory, got %r" % roots)
    return roots[0]


def attempts(root):
    return sorted(int(p.rsplit("_", 1)[1]) for p in glob.glob(os.path.join(root, "attempt_*")))


def read_events(root):
    with open(os.path.join(root, "events.jsonl")) as f:
        return [json.loads(line) for line in f]


class RestartBackoff(unittest.TestCase):
    def test_default_backoff_grows_1_2_4_and_sigterm_ends_the_wait(self):
        with gltest.TempDir() as tmp:
            log_dir = os.path.join(tmp, "logs")
            args = ["--nproc-per-node", "1", "--device", "cpu", "--master-port", "0",
                    "--max-restarts", "100000", "--max-same-failures", "0", "--log-dir", log_dir,
                    "--run-id", "loop",
                    "--no-python", FALSE]
            with gltest.Job(args) as job:
                # restart 1 at once, restart 2 after 1 s, 3 after 2 s; then the 4 s wait.
                job.wait_for(lambda out, err: "waiting 4 s first" in err, timeout=120,
                             what="the third back-off")
                job.signal(signal.SIGTERM)
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM, job.stderr)
                err = job.stderr
            lines = [l for l in err.splitlines() if "restarting all ranks" in l]
            self.assertEqual(len(lines), 4, err)
            self.assertRegex(lines[0], r"\(restart 1 of 100000\) after rank 0 failed with exit "
                                       r"code 1 in \d+\.\d s$")
            waits = [re.search(r"waiting (\S+) s first", l) for l in lines[1:]]
            self.assertTrue(all(waits), lines)
            self.assertEqual([w.group(1) for w in waits], ["1", "2", "4"])
            self.assertIn("(quick failures back off; --restart-backoff)", lines[1])
            self.assertIn("received SIGTERM while waiting to restart the ranks", err)
            root = run_dir(log_dir, "loop")
            # Attempts 0-3 ran; restart 4 never started (without the back-off: thousands).
            self.assertEqual(attempts(root), [0, 1, 2, 3])
            events = read_events(root)
        backoffs = [(e["epoch"], e["backoff_s"]) for e in events
                    if e["event"] == "restart_backoff"]
        self.assertEqual(backoffs, [(2, 1.0), (3, 2.0), (4, 4.0)])
        restarts = [(e["epoch"], e["backoff_s"]) for e in events if e["event"] == "restart"]
        self.assertEqual(restarts, [(1, 0.0), (2, 1.0), (3, 2.0)])
        for e in events:
            if e["event"] == "restart" and e["backoff_s"] > 0:
                self.assertGreaterEqual(e["since_stop_s"], e["backoff_s"], e)
        self.assertEqual(events[-1]["event"], "stop")
        self.assertEqual(events[-1]["exit_code"], 128 + signal.SIGTERM)

    def test_off_restarts_at_once(self):
        with gltest.TempDir() as tmp:
            log_dir = os.path.join(tmp, "logs")
            args = ["--nproc-per-node", "1", "--device", "cpu", "--master-port", "0",
                    "--max-restarts", "20", "--max-same-failures", "0", "--restart-backoff", "off",
                    "--log-dir", log_dir,
                    "--run-id", "fast", "--no-python", FALSE]
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=120), 1, job.stderr)
                err = job.stderr
            self.assertEqual(err.count("restarting all ranks"), 20, err)
            self.assertNotIn("quick failures back off", err)
            self.assertEqual(attempts(run_dir(log_dir, "fast")), list(range(21)))

    def test_status_shows_the_wait_and_sigint_does_not_wait_it_out(self):
        with gltest.TempDir() as tmp:
            runtime = os.path.join(tmp, "xdg")
            os.mkdir(runtime, 0o700)
            args = ["--nproc-per-node", "2", "--device", "cpu", "--master-port", "0",
                    "--max-restarts", "5", "--restart-backoff", "300:600", "--run-id", "slow",
                    "--no-python", FALSE]
            with gltest.Job(args, extra_env={"XDG_RUNTIME_DIR": runtime}) as job:
                job.wait_for(lambda out, err: "waiting 300 s first" in err, timeout=120,
                             what="the first back-off")
                env = gltest.tagged_env("none", extra={"XDG_RUNTIME_DIR": runtime})
                doc = None
                for _ in range(50):
                    out = subprocess.run([gltest.require_binary(), "status", "--format", "json",
                                          "--pid", str(job.pid)],
                                         env=env, capture_output=True, text=True, timeout=30)
                    if out.returncode == 0:
                        doc = json.loads(out.stdout)
                        if doc["restart_backoff_s"] is not None:
                            break
                    time.sleep(0.2)
                self.assertIsNotNone(doc)
                self.assertEqual(doc["restart_backoff_s"], 300.0, doc)
                self.assertGreater(doc["next_restart_in_s"], 0, doc)
                self.assertLessEqual(doc["next_restart_in_s"], 300, doc)
                self.assertEqual(doc["restarts_used"], 1, doc)
                text = subprocess.run([gltest.require_binary(), "status", "--pid", str(job.pid)],
                                      env=env,
                                      capture_output=True, text=True, timeout=30).stdout
                self.assertRegex(text, r"; next restart in \d+\.\d s \(backing off 300\.0 s: "
                                       r"--restart-backoff\)")
                job.signal(signal.SIGINT)
                # The wait has ~300 s left: gculaunch ends at once (60 s margin for a busy box).
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGINT, job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 10), [])


class RestartBackoffNodes(unittest.TestCase):
    def test_node_0_decides_the_wait_for_every_node(self):
        tag = gltest.new_tag()
        hosts = gltest.SimulatedHosts(2)
        self.addCleanup(hosts.close)
        self.addCleanup(gltest.kill_tagged, tag)

        def node(i):
            args = ["--nproc-per-node", "1", "--device", "cpu", "--grace-period", "5",
                    "--max-restarts", "10", "--max-same-failures", "0", "--rdzv-timeout", "60",
                    "--run-id", "loopnodes",
                    "--no-python", FALSE]
            job = gltest.NodeJob(hosts, i, 2, 29500, args, tag)
            self.addCleanup(job.__exit__, None, None, None)
            return job

        node0, node1 = node(0), node(1)
        node0.wait_for(lambda out, err: "every node waits 2 s before it restarts its ranks" in err,
                       timeout=120, what="node 0's second back-off")
        self.assertIn("restart 2 of 10: every node waits 1 s before it restarts its ranks "
                      "(quick failures back off; --restart-backoff)", node0.stderr)
        self.assertNotIn("restart 1 of 10: every node waits", node0.stderr)
        node1.wait_for(lambda out, err: "of which 1 s back-off (--restart-backoff)" in err,
                       timeout=60, what="node 1 to follow node 0's wait")
        self.assertRegex(node1.stderr, r"restart 2 of 10: starting rank 1 again "
                                       r"\(TORCHELASTIC_RESTART_COUNT=2, \d+ ms after the stop, "
                                       r"of which 1 s back-off \(--restart-backoff\)\)")
        for job in (node0, node1):
            job.signal(signal.SIGTERM)
        codes = [node0.wait(timeout=90), node1.wait(timeout=90)]
        self.assertEqual(codes[0], 128 + signal.SIGTERM, node0.stderr[-3000:])
        self.assertEqual(gltest.wait_no_tagged(tag, 15), [])


if __name__ == "__main__":
    unittest.main()
