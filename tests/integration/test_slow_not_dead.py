"""Slow is not dead (issue 39): the failure detector on two simulated hosts (network namespaces,
gltest.SimulatedHosts), one rank per node, --max-restarts 0 so that any loss ends the job.

  (a) a node's gculaunch SIGSTOPped for 8 s, then continued: the job finishes with 0, no
      restart, nobody lost (node 0 stopped, and node 1 stopped);
  (b) a node's gculaunch SIGKILLed: the other reacts within 5 s;
  (c) a node's link pulled (its veth down inside the test's own switch namespace): the other
      reacts within the documented bound for a vanished host (docs/multinode.md, "Slow is not
      dead": 7 s).

The reaction is read from the reacting node's own event log (events.jsonl: the node_loss line
and its timestamp), so a loaded machine that is slow to show the test the output does not make
the measurement longer.  The ranks are small Python programs without torch that wait for a
release file (with a hang guard of their own).
"""
import glob
import json
import os
import signal
import time
import unittest

import gltest

# One rank: says it is ready, waits for <work>/release (at most 120 s, then fails with 3).
RANK = r'''
import os, sys, time
work = sys.argv[1]
tag = "%s.%s" % (os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"])
open(os.path.join(work, "ready." + tag), "w").close()
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(work, "release")):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.05)
print("rank done " + tag, flush=True)
'''

PORT = 29500
STOP_S = 8
KILL_REACTION_S = 5  # the bound for a killed gculaunch
VANISHED_HOST_S = 7  # docs/multinode.md: TCP_USER_TIMEOUT 5 s + at most 1 s to the next
#                      heartbeat + the check


class SlowNotDead(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tmp = gltest.TempDir(prefix="gltest-snd-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        os.chmod(self.work, 0o755)
        self.rank = os.path.join(self.work, "rank.py")
        with open(self.rank, "w") as f:
            f.write(RANK)
        self.tag = gltest.new_tag()
        self.hosts = gltest.SimulatedHosts(2)
        self.addCleanup(self.hosts.close)
        self.addCleanup(gltest.kill_tagged, self.tag)
        self.jobs = [self.node(i) for i in range(2)]
        self.jobs[0].wait_for(lambda out, err: all(
            os.path.exists(os.path.join(self.work, "ready.0.%d" % r)) for r in range(2)),
            timeout=120, what="both ranks ready")

    def node(self, i):
        logs = os.path.join(self.work, "logs%d" % i)
        args = ["--nproc-per-node", "1", "--device", "cpu", "--max-restarts", "0",
                "--grace-period", "2", "--rdzv-timeout", "60", "--log-dir", logs,
                "--python", gltest.PYTHON, self.rank, self.work]
        job = gltest.NodeJob(self.hosts, i, 2, PORT, args, self.tag)
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def events(self, i):
        found = glob.glob(os.path.join(self.work, "logs%d" % i, "*", "events.jsonl"))
        self.assertEqual(len(found), 1, found)
        with open(found[0]) as f:
            return [json.loads(line) for line in f if line.strip()]

    def release(self):
        open(os.path.join(self.work, "release"), "w").close()

    def stopped_for_8_s(self, victim):
        job = self.jobs[victim]
        job.signal(signal.SIGSTOP)
        try:
            time.sleep(STOP_S)  # the scenario itself: a pause of 8 s
        finally:
            job.signal(signal.SIGCONT)
        self.release()
        codes = [j.wait(timeout=120) for j in self.jobs]
        self.assertEqual(codes, [0, 0], [j.stderr for j in self.jobs])
        for i, j in enumerate(self.jobs):
            self.assertNotIn("was lost", j.stderr)
            self.assertIn("rank done 0.%d" % i, j.stdout)
            kinds = [e["event"] for e in self.events(i)]
            self.assertNotIn("restart", kinds, j.stderr)
            self.assertNotIn("node_loss", kinds, j.stderr)

    def reaction(self, observer, since):
        """Seconds from `since` (unix time) to the observer's node_loss line; the observer's
        gculaunch must then end the job (exit 4)."""
        job = self.jobs[observer]
        self.assertEqual(job.wait(timeout=120), 4, job.stderr)
        losses = [e for e in self.events(observer) if e["event"] == "node_loss"]
        self.assertEqual(len(losses), 1, job.stderr)
        self.assertEqual(losses[0]["node"], 1 - observer, losses)
        return losses[0]["ts"] - since, losses[0]["reason"]

    # ------------------------------------------------------------------ (a) slow

    def test_a0_node0_stopped_for_8_s_then_continued(self):
        self.stopped_for_8_s(0)

    def test_a1_node1_stopped_for_8_s_then_continued(self):
        self.stopped_for_8_s(1)

    # ------------------------------------------------------------------ (b) dead

    def killed(self, victim):
        self.jobs[victim].signal(signal.SIGKILL)
        since = time.time()
        took, reason = self.reaction(1 - victim, since)
        self.assertLessEqual(took, KILL_REACTION_S, reason)
        return reason

    def test_b0_node0_killed(self):
        reason = self.killed(0)
        self.assertIn("the connection to its gculaunch at 198.18.0.1:%d broke" % PORT, reason)

    def test_b1_node1_killed(self):
        reason = self.killed(1)
        # A FIN, or a reset when a heartbeat's reply was still unread in the killed process's
        # socket (its kernel then resets the connection): either is the kill, seen at once.
        self.assertIn(reason, ("its gculaunch closed its connection without a bye (killed?)",
                               "its connection broke (Connection reset by peer)"))

    # ------------------------------------------------------------------ (c) vanished

    def unplugged(self, victim):
        self.hosts.unplug(victim)
        since = time.time()  # the link is down once the command returned
        took, reason = self.reaction(1 - victim, since)
        self.assertLessEqual(took, VANISHED_HOST_S, reason)
        return reason

    def test_c0_node0_link_pulled(self):
        reason = self.unplugged(0)
        self.assertIn("the connection to its gculaunch at 198.18.0.1:%d broke (" % PORT, reason)

    def test_c1_node1_link_pulled(self):
        reason = self.unplugged(1)
        self.assertIn("its connection timed out", reason)


if __name__ == "__main__":
    unittest.main()
