"""Signals sent to gculaunch (see docs/runtime.md, signal table):
SIGTERM/SIGINT/SIGQUIT are forwarded to every rank's process group, then
SIGKILL after the grace period or at a second signal; exit 128+S.
SIGUSR1/SIGUSR2 are forwarded and nothing stops.  SIGHUP is ignored when
gculaunch's stdin is not a terminal, and a teardown when it is."""
import json
import os
import pty
import signal
import time
import unittest

import gltest

CLEANUP_RANK = r"""
import os, signal, sys, time
marker = sys.argv[1] + "." + os.environ["RANK"]
def on_term(sig, frame):
    with open(marker, "w") as f:
        f.write("cleaned up after %d\n" % sig)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(1)
"""

USR_RANK = r"""
import os, signal, sys, time
def on_usr(sig, frame):
    print("got %s" % signal.Signals(sig).name, flush=True)
signal.signal(signal.SIGUSR1, on_usr)
signal.signal(signal.SIGUSR2, on_usr)
print("ready %d" % os.getpid(), flush=True)
while True:
    time.sleep(1)
"""


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def ready_count(n, word="ready"):
    return lambda out, err: sum(1 for l in out.splitlines() if l.split(": ", 1)[-1]
                                .startswith(word)) >= n


class Signals(unittest.TestCase):
    def test_sigterm_runs_the_ranks_cleanup_and_exits_143(self):
        with gltest.TempDir() as tmp:
            script = write(tmp, "cleanup.py", CLEANUP_RANK)
            marker = os.path.join(tmp, "marker")
            summary = os.path.join(tmp, "summary.json")
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--python",
                             gltest.PYTHON, "--summary-json", summary, script, marker]) as job:
                job.wait_for(ready_count(2), what="2 ranks ready")
                job.signal(signal.SIGTERM)
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM, job.stderr)
                self.assertIn("received SIGTERM: forwarding it to every rank", job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
            for rank in (0, 1):
                with open(marker + ".%d" % rank) as f:
                    self.assertEqual(f.read(), "cleaned up after 15\n")
            with open(summary) as f:
                doc = json.load(f)
            self.assertEqual(doc["outcome"], "signal")
            self.assertEqual(doc["signal"], "SIGTERM")
            self.assertEqual([r["exit_code"] for r in doc["ranks"]], [0, 0])

    def test_sigusr1_and_sigusr2_are_forwarded_and_nothing_stops(self):
        with gltest.TempDir() as tmp:
            script = write(tmp, "usr.py", USR_RANK)
            with gltest.Job(["--nproc-per-node", "8", "--device", "cpu", "--python",
                             gltest.PYTHON, script]) as job:
                job.wait_for(ready_count(8), what="8 ranks ready")
                pids = [int(l.split("ready ")[1]) for l in job.stdout.splitlines()
                        if "ready " in l]
                job.signal(signal.SIGUSR1)
                job.wait_for(ready_count(8, "got SIGUSR1"), what="SIGUSR1 in every rank")
                job.signal(signal.SIGUSR2)
                job.wait_for(ready_count(8, "got SIGUSR2"), what="SIGUSR2 in every rank")
                self.assertIsNone(job.proc.poll())
                for pid in pids:
                    self.assertTrue(os.path.exists("/proc/%d" % pid), pid)
                for rank in range(8):
                    self.assertIn("[rank%d]: got SIGUSR1" % rank, job.stdout)
                job.signal(signal.SIGINT)
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGINT, job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_signals_to_handle_makes_sigusr1_stop_the_ranks(self):
        # torchrun's --signals-to-handle: a listed SIGUSR1 stops the job instead of being
        # forwarded only (the ranks get it, then SIGKILL after the grace period).
        with gltest.TempDir() as tmp:
            script = write(tmp, "usr.py", USR_RANK)
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--python",
                             gltest.PYTHON, "--grace-period", "1", "--signals-to-handle",
                             "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1", script]) as job:
                job.wait_for(ready_count(2), what="2 ranks ready")
                job.signal(signal.SIGUSR1)
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGUSR1, job.stderr)
                self.assertIn("received SIGUSR1: forwarding it to every rank", job.stderr)
                for rank in range(2):
                    self.assertIn("[rank%d]: got SIGUSR1" % rank, job.stdout)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_sighup_is_ignored_without_a_terminal_and_sigquit_tears_down(self):
        with gltest.Job(["--nproc-per-node", "2"] +
                        gltest.child_args("print", "ready", "pause")) as job:
            job.wait_for(ready_count(2), what="2 ranks ready")
            job.signal(signal.SIGHUP)
            job.wait_for(lambda out, err: "ignoring SIGHUP" in err, what="SIGHUP logged")
            self.assertIsNone(job.proc.poll())
            self.assertEqual(len(gltest.pids_of_ranks(job.tag, gltest.CHILD_COMM)), 2)
            job.signal(signal.SIGQUIT)
            self.assertEqual(job.wait(timeout=60), 128 + signal.SIGQUIT, job.stderr)
            self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_sighup_with_a_terminal_tears_down(self):
        master, slave = pty.openpty()
        try:
            with gltest.Job(["--nproc-per-node", "2"] +
                            gltest.child_args("print", "ready", "pause"), stdin=slave) as job:
                job.wait_for(ready_count(2), what="2 ranks ready")
                job.signal(signal.SIGHUP)
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGHUP, job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])
        finally:
            os.close(master)
            os.close(slave)

    def test_a_second_signal_kills_at_once(self):
        with gltest.Job(["--nproc-per-node", "2", "--grace-period", "120"] +
                        gltest.child_args("ignore", "TERM", "print", "ready", "pause")) as job:
            job.wait_for(ready_count(2), what="2 ranks ready")
            job.signal(signal.SIGTERM)
            job.wait_for(lambda out, err: "forwarding it to every rank" in err,
                         what="first SIGTERM handled")
            job.signal(signal.SIGTERM)
            # Without the escalation this would take the 120 s grace period.
            self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM, job.stderr)
            self.assertIn("killing every rank now", job.stderr)
            self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_grace_period_is_waited_before_sigkill(self):
        with gltest.Job(["--nproc-per-node", "2", "--grace-period", "1.5"] +
                        gltest.child_args("ignore", "TERM", "print", "ready", "pause")) as job:
            job.wait_for(ready_count(2), what="2 ranks ready")
            sent = time.monotonic()
            job.signal(signal.SIGTERM)
            self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM, job.stderr)
            self.assertGreaterEqual(time.monotonic() - sent, 1.5)
            self.assertIn("sent SIGKILL to 2 rank process group(s)", job.stderr)
            self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_node_0_still_waiting_for_the_other_nodes_exits_at_once_on_sigterm(self):
        # Nothing of the job runs before it formed: node 0 leaves at once with 143, as the
        # other nodes would wait for a new node 0 after its bye anyway.  It used to wait out
        # the bye bound (grace period + 30 s) for nodes that never came, saying "during
        # shutdown: killing every rank now" with no rank to kill.
        with gltest.Job(["--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1",
                         "--master-addr", "127.0.0.1", "--master-port", str(gltest.free_port()),
                         "--grace-period", "30", "--no-python", "true"]) as job:
            job.wait_for(lambda out, err: "node 0 of 2 registered" in err,
                         what="node 0 registered")
            job.signal(signal.SIGTERM)
            self.assertEqual(job.wait(timeout=20), 128 + signal.SIGTERM, job.stderr)
            self.assertIn("received SIGTERM while no rank runs (waiting for the job): exiting",
                          job.stderr)
            self.assertNotIn("killing every rank now", job.stderr)
            self.assertNotIn("not every node said bye", job.stderr)

    def test_a_stop_signal_while_the_launch_is_prepared_still_gets_its_exit_code(self):
        # The first stderr line comes while the launch is still being prepared (the store,
        # the coordinator), before the supervisor watches any signal.  A signal then used to
        # end gculaunch by its default action (17 times in 20 for SIGTERM here): no line
        # saying why, "killed by signal" instead of 128+S.  Now it waits, held, until the
        # supervisor handles it.  Several tries, since the window is short.
        for sig in (signal.SIGTERM, signal.SIGINT) * 5:
            with gltest.Job(["--nnodes", "3", "--node-rank", "0", "--nproc-per-node", "1",
                             "--master-addr", "127.0.0.1", "--master-port",
                             str(gltest.free_port()), "--no-python", "true"]) as job:
                job.wait_for(lambda out, err: err.strip() != "", what="a first stderr line")
                job.signal(sig)
                self.assertEqual(job.wait(timeout=20), 128 + sig, job.stderr)
                self.assertIn("received %s while no rank runs (waiting for the job): exiting"
                              % signal.Signals(sig).name, job.stderr)


if __name__ == "__main__":
    unittest.main()
