"""What the platform sees (issue 41): every outcome of the table in base/outcome.h, each with
real processes under both --exit-codes schemes: the exit status, --summary-json's "outcome",
"exit_class", "exit_code" and "rank_exit_code", the stop event of events.jsonl, and the
termination message written to --termination-log.

Rows that need one cheap process run once per scheme.  The multi-node rows (nodes that
disagree (job_error), a rendezvous that fails, a node lost, a node that left) run once, under
classes, with loopback nodes, and read the rank scheme's code from "rank_exit_code".  The
row no test can cause, internal (a bug), is checked by the unit tests
(tests/launcher/run/exit_summary_test.cc).  no_resources runs 40 ranks under a 60-descriptor
limit; unhealthy (issue 44's health gate) runs with a
--health-check that fails.  stuck (5,
reschedule) runs test_stuck.py's FUSE rank under classes (StuckOutcome)."""
import json
import os
import signal
import unittest

import gltest

CLASS_CODES = {"success": 0, "retry": 80, "preempted": 81, "reschedule": 82, "fatal": 83}


class Outcomes(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        gltest.require_helpers()
        self.tmp = gltest.TempDir(prefix="gltest-outcome-")
        self.dir = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.runs = 0

    def files(self):
        """A fresh summary path and an existing, empty termination log."""
        self.runs += 1
        summary = os.path.join(self.dir, "summary.%d.json" % self.runs)
        term = os.path.join(self.dir, "termination.%d" % self.runs)
        open(term, "w").close()
        return summary, term

    def launch(self, args, scheme, extra_env=None, after_start=None, prefix=None):
        """Runs gculaunch; returns (code, summary or None, termination text, stderr)."""
        summary, term = self.files()
        flags = ["--summary-json", summary, "--termination-log", term]
        if scheme:
            flags += ["--exit-codes", scheme]
        with gltest.Job(flags + list(args), extra_env=extra_env, prefix=prefix) as job:
            if after_start:
                after_start(job)
            code = job.wait(timeout=60)
            err = job.stderr
        doc = None
        if os.path.exists(summary):
            with open(summary) as f:
                doc = json.load(f)
        with open(term) as f:
            text = f.read()
        return code, doc, text, err

    def check_row(self, args, outcome, exit_class, rank_code, extra_env=None, after_start=None,
                  summary=True, prefix=None):
        """One outcome under both schemes: the status, the summary and the message."""
        for scheme in ("rank", "classes"):
            with self.subTest(outcome=outcome, scheme=scheme):
                code, doc, text, err = self.launch(args, scheme, extra_env, after_start, prefix)
                expected = rank_code if scheme == "rank" else CLASS_CODES[exit_class]
                self.assertEqual(code, expected, err)
                if summary:
                    self.assertIsNotNone(doc, err)
                    self.assertEqual((doc["outcome"], doc["exit_class"], doc["exit_code"],
                                      doc["rank_exit_code"], doc["exit_scheme"]),
                                     (outcome, exit_class, expected, rank_code, scheme))
                head = "gculaunch: exit %d (%s): %s: " % (expected, exit_class, outcome)
                self.assertTrue(text.startswith(head), text)
                self.assertLessEqual(len(text.encode()), 4096)
                if summary and scheme == "classes" and code != 0:
                    self.assertIn("exit code %d (%s, class %s" % (expected, outcome, exit_class),
                                  err)

    def test_success_and_rank_failures(self):
        self.check_row(gltest.child_args("exit", 0), "success", "success", 0)
        self.check_row(gltest.child_args("eprint", "ValueError: boom", "exit", 3),
                       "rank_failed", "retry", 3)
        # Killed by a signal: 128+S under rank, retry under classes.
        self.check_row(gltest.child_args("kill", "KILL"), "rank_failed", "retry", 137)

    def test_same_failure_is_fatal(self):
        args = (["--max-restarts", "5", "--max-same-failures", "1", "--restart-backoff", "off"]
                + gltest.child_args("eprint", "KeyError: 'lr'", "exit", 1))
        self.check_row(args, "same_failure", "fatal", 1)

    def test_hang_is_retry(self):
        args = (["--hang-timeout", "1s", "--hang-grace", "1s", "--grace-period", "1"]
                + gltest.child_args("print", "step", "sleep", "60"))
        self.check_row(args, "hang", "retry", 6)

    def test_sigterm_and_sigint_are_preempted(self):
        def stop_with(sig):
            def after_start(job):
                job.wait_for(lambda out, err: "ready" in out, timeout=30, what="the rank")
                job.signal(sig)
            return after_start
        args = ["--grace-period", "2"] + gltest.child_args("print", "ready", "pause")
        self.check_row(args, "signal", "preempted", 143, after_start=stop_with(signal.SIGTERM))
        self.check_row(args, "signal", "preempted", 130, after_start=stop_with(signal.SIGINT))

    def test_an_unhealthy_node_is_reschedule(self):
        check = gltest.write_script(self.dir, "check.sh",
                                    "#!/bin/sh\necho 'card 0: 3 uncorrectable ECC errors'\nexit 1\n")
        self.check_row(["--health-check", check] + gltest.child_args("exit", 0),
                       "unhealthy", "reschedule", 5)

    def test_ranks_that_cannot_start_for_lack_of_descriptors_are_reschedule(self):
        # 40 ranks need two pipes each; 60 descriptors run out at about the eleventh rank.
        # That is the machine's state, not the program's fault: 7, reschedule (it was 127,
        # fatal, when the rank's pipe could not be made).
        self.check_row(["--nproc-per-node", "40", "--no-python", "true"], "no_resources",
                       "reschedule", 7, prefix=["prlimit", "--nofile=60:60"])

    def test_programs_that_cannot_start_are_fatal(self):
        plain = gltest.write_script(self.dir, "plain.sh", "#!/bin/sh\necho hi\n")
        os.chmod(plain, 0o644)
        missing = os.path.join(self.dir, "missing.sh")
        bad_interpreter = gltest.write_script(self.dir, "bad", "#!/nonexistent/interpreter\n")
        # Found before the launch: no summary; the message names the program.
        self.check_row(["--no-python", missing], "spawn_failed", "fatal", 127, summary=False)
        self.check_row(["--no-python", plain], "spawn_failed", "fatal", 126, summary=False)
        # At spawn time: the ranks' exec fails.
        self.check_row(["--nproc-per-node", "2", "--no-python", bad_interpreter],
                       "spawn_failed", "fatal", 127)

    def test_usage_errors_are_fatal_wherever_classes_is_asked_for(self):
        bad = ["--nproc-per-node", "two", "x.py"]
        self.check_row(bad, "usage", "fatal", 2, summary=False)
        # --exit-codes classes after the bad flag, in torchrun's spelling, or in a variable.
        for args, env in ((bad[:2] + ["--exit_codes=classes"] + bad[2:], None),
                          (bad, {"GCULAUNCH_EXIT_CODES": "classes"}),
                          (bad, {"PET_EXIT_CODES": "classes"})):
            summary, term = self.files()
            with gltest.Job(["--termination-log", term] + args, extra_env=env) as job:
                self.assertEqual(job.wait(timeout=30), 83, job.stderr)
            with open(term) as f:
                text = f.read()
            self.assertEqual(text, "gculaunch: exit 83 (fatal): usage: usage or configuration "
                             "error (a bad flag, variable, file or device)\n%s" % job.stderr)
        # A bad scheme is itself a usage error, under the default scheme.
        with gltest.Job(["--exit-codes", "classy", "x.py"]) as job:
            self.assertEqual(job.wait(timeout=30), 2)
            self.assertEqual(job.stderr, "gculaunch: --exit-codes 'classy': expected rank or "
                             "classes (fix: e.g. --exit-codes classes)\n")
        with gltest.Job(["x.py"], extra_env={"GCULAUNCH_EXIT_CODES": "both"}) as job:
            self.assertEqual(job.wait(timeout=30), 2)
            self.assertIn("GCULAUNCH_EXIT_CODES 'both': expected rank or classes", job.stderr)

    def test_events_and_status_use_the_outcome_names(self):
        log_dir = os.path.join(self.dir, "logs")
        code, doc, text, err = self.launch(
            ["--log-dir", log_dir] + gltest.child_args("exit", 4), "classes")
        self.assertEqual(code, 80, err)
        events = []
        for root, _, names in os.walk(log_dir):
            if "events.jsonl" in names:
                with open(os.path.join(root, "events.jsonl")) as f:
                    events = [json.loads(line) for line in f]
        self.assertTrue(events, "no events.jsonl under " + log_dir)
        stop = events[-1]
        self.assertEqual((stop["event"], stop["outcome"], stop["exit_class"], stop["exit_code"],
                          stop["rank_exit_code"], stop["reason"]),
                         ("stop", "rank_failed", "retry", 80, 4, "rank_failed"))
        exits = [e for e in events if e["event"] == "rank_exit"]
        # One shape for a rank's exit: the same keys as the summary's ranks.
        self.assertEqual({k: exits[0][k] for k in ("exit_code", "signal", "shell_code")},
                         {k: doc["ranks"][0][k] for k in ("exit_code", "signal", "shell_code")})


class StuckOutcome(unittest.TestCase):
    def test_stuck_is_reschedule(self):
        import test_stuck  # its FUSE daemon puts a rank in D state for real
        gltest.require_helpers()
        with gltest.TempDir() as tmp:
            mnt = os.path.join(tmp, "mnt")
            os.mkdir(mnt)
            fuse = test_stuck.UnansweringFuse(mnt)
            try:
                script = gltest.write_script(tmp, "rank.sh", test_stuck.STUCK_RANK % {
                    "child": gltest.TEST_CHILD, "mnt": mnt})
                summary = os.path.join(tmp, "summary.json")
                term = os.path.join(tmp, "termination")
                open(term, "w").close()
                with gltest.Job(["--exit-codes", "classes", "--nproc-per-node", "2",
                                 "--grace-period", "1", "--summary-json", summary,
                                 "--termination-log", term, "--no-python", script]) as job:
                    job.wait_for(lambda out, err: out.count("ready") == 2, what="ranks ready")
                    self.assertTrue(fuse.lookup_read.wait(30), "the rank never reached the mount")
                    job.signal(signal.SIGTERM)
                    self.assertEqual(job.wait(timeout=60), 82, job.stderr)
                    with open(summary) as f:
                        doc = json.load(f)
                    self.assertEqual((doc["outcome"], doc["exit_class"], doc["rank_exit_code"]),
                                     ("stuck", "reschedule", 5))
                    with open(term) as f:
                        text = f.read()
                    self.assertTrue(text.startswith("gculaunch: exit 82 (reschedule): stuck: "),
                                    text)
                    self.assertIn("\nstuck: pid %d" % doc["stuck"][0]["pid"], text)
                    fuse.release()
                    self.assertEqual(gltest.wait_no_tagged(job.tag, 10), [])
            finally:
                fuse.release()


class MultiNodeOutcomes(unittest.TestCase):
    """Two gculaunch processes on loopback, one rank each (the test child)."""

    def setUp(self):
        gltest.require_binary()
        gltest.require_helpers()
        self.tmp = gltest.TempDir(prefix="gltest-outcome-mn-")
        self.dir = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.tag = gltest.new_tag()
        self.addCleanup(gltest.kill_tagged, self.tag)
        self.port = gltest.free_port()

    def node(self, rank, extra=(), steps=("print", "ready", "pause")):
        summary = os.path.join(self.dir, "summary.%d.json" % rank)
        args = (["--exit-codes", "classes", "--summary-json", summary, "--nnodes", "2",
                 "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port",
                 str(self.port), "--grace-period", "2"] + list(extra)
                + gltest.child_args(*steps))
        job = gltest.Job(args, tag=self.tag)
        self.addCleanup(job.__exit__, None, None, None)
        return job, summary

    def outcome(self, summary):
        with open(summary) as f:
            doc = json.load(f)
        return doc["outcome"], doc["exit_class"], doc["exit_code"], doc["rank_exit_code"]

    def test_nodes_that_disagree_are_fatal_on_every_node(self):
        node0, s0 = self.node(0, ["--max-restarts", "0", "--rdzv-timeout", "20"])
        node1, s1 = self.node(1, ["--max-restarts", "2", "--rdzv-timeout", "20"])
        for job, summary in ((node1, s1), (node0, s0)):
            self.assertEqual(job.wait(timeout=60), 83, job.stderr)
            self.assertIn("allows 2 restarts but node 0", job.stderr)
            self.assertEqual(self.outcome(summary), ("job_error", "fatal", 83, 2))

    def test_a_master_that_never_comes_is_a_rendezvous_failure_retry(self):
        node1, s1 = self.node(1, ["--rdzv-timeout", "2"])
        self.assertEqual(node1.wait(timeout=60), 80, node1.stderr)
        self.assertEqual(self.outcome(s1), ("rendezvous_failed", "retry", 80, 3))

    def test_a_node_that_left_is_retry_for_the_others_and_preempted_for_itself(self):
        node0, s0 = self.node(0)
        node1, s1 = self.node(1)
        for job in (node0, node1):
            job.wait_for(lambda out, err: "ready" in out, timeout=60, what="the rank")
        node1.signal(signal.SIGTERM)
        self.assertEqual(node1.wait(timeout=60), 81, node1.stderr)
        self.assertEqual(self.outcome(s1), ("signal", "preempted", 81, 143))
        self.assertEqual(node0.wait(timeout=60), 80, node0.stderr)
        self.assertEqual(self.outcome(s0), ("node_left", "retry", 80, 4))

    def test_a_lost_node_is_retry(self):
        node0, s0 = self.node(0, ["--node-timeout", "2"])
        node1, _ = self.node(1, ["--node-timeout", "2"])
        for job in (node0, node1):
            job.wait_for(lambda out, err: "ready" in out, timeout=60, what="the rank")
        node1.signal(signal.SIGKILL)  # gculaunch itself: 137 under any scheme
        self.assertEqual(node1.wait(timeout=60), -signal.SIGKILL)
        self.assertEqual(node0.wait(timeout=60), 80, node0.stderr)
        self.assertEqual(self.outcome(s0), ("node_lost", "retry", 80, 4))


if __name__ == "__main__":
    unittest.main()
