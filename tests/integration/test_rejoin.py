"""A job that survives its nodes (issue 12): simulated hosts (gltest.SimulatedHosts, one network
namespace per node, 198.18.0.0/15 only inside them), one gculaunch per host with the variables
a platform sets, every node running examples/ckpt_train.py with a real gloo rank.  Nodes are
disturbed only once a checkpoint exists; a job that finishes must reach exactly the state the
example's math predicts (simulate()), and its journal must show no step lost and none repeated
except those after the last checkpoint.

Scenarios: node 1's gculaunch SIGKILLed and started again; the same for node 0 (the store
host); node 0 back at a new address behind the same name (a hosts-file name only these hosts
know); SIGTERM to node 1 (an eviction) and node 1 started again; a host unplugged and plugged
back; a node that never comes back (every other node exits 4 at the deadline and names it); a
replacement for node 1 at another address; the old node 1 returning after its replacement
(refused); restarts exhausted by repeated losses (exit 4); a stranger from another job claiming
a node rank that is taken here, or one this job does not have (refused, the job undisturbed).
"""
import json
import os
import re
import signal
import time
import unittest

import gltest

PORT = 29500        # every host has its own network namespace: the port is free in each
STEPS = 30
EVERY = 5
STEP_TIME = 0.2     # seconds per step: a run lasts 6 s of steps plus start-up
RDZV_TIMEOUT = 20   # the rejoin deadline of most scenarios
LOSS_LINE = (r"node 1 \(\S+, 198\.18\.0\.2\) .*; every node stops its ranks and waits up to "
             r"[\d.]+ s for it to come back \(restart 1 of 3\)")


class Rejoin(gltest.CheckpointJobCase):
    WORK_PREFIX = "gltest-rejoin-"

    @classmethod
    def setUpClass(cls):
        example = gltest.ckpt_example()
        cls.final_state = example.simulate(STEPS)[-1]

    # ---------------------------------------------------------------- helpers

    def node(self, hosts, host, node_rank, nnodes=2, max_restarts=3, rdzv_timeout=RDZV_TIMEOUT,
             extra_args=(), master_addr=None):
        """gculaunch for node `node_rank` in host `host`, one rank running the example."""
        args = (["--nproc-per-node", "1", "--device", "cpu", "--grace-period", "5",
                 "--max-restarts", str(max_restarts), "--rdzv-timeout", str(rdzv_timeout)]
                + list(extra_args)
                + ["--python", gltest.PYTHON, gltest.CKPT_EXAMPLE, self.ckpt,
                   "--steps", str(STEPS), "--ckpt-every", str(EVERY),
                   "--step-time", str(STEP_TIME), "--journal", self.journal,
                   "--result", self.result, "--pg-timeout", "60"])
        job = gltest.NodeJob(hosts, host, nnodes, PORT, args, self.tag,
                             extra_env={"RANK": str(node_rank)}, master_addr=master_addr)
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def wait_checkpoint(self, jobs, timeout=90):
        self.wait_until(lambda: self.checkpoint_step() >= EVERY, "a first checkpoint", jobs,
                        timeout)

    def steps_in_attempt(self, attempt, rank):
        if not os.path.isdir(self.journal):
            return []
        return [r["step"] for r in gltest.read_ckpt_journal(self.journal).get(rank, [])
                if r["attempt"] == attempt]

    def wait_running_again(self, attempt, jobs, world=2, timeout=90):
        """Waits until every rank journaled a step of `attempt`: the job re-formed."""
        self.wait_until(lambda: all(self.steps_in_attempt(attempt, r) for r in range(world)),
                        "every rank to run steps in attempt %d" % attempt, jobs, timeout)

    def kill(self, job, sig=signal.SIGKILL):
        job.signal(sig)
        job.proc.wait(timeout=30)

    def wait_noticed(self, survivor, node, hosts=None, host=None):
        """What a killed node's successor waits for: `survivor` logged that node `node` was
        lost, and (with `host`) the killed gculaunch's guardian and ranks are gone from that
        host, so that what starts there next starts clean."""
        pattern = r"node %d \([^)]*\) was lost" % node
        self.wait_until(lambda: re.search(pattern, survivor.stderr) is not None,
                        "the loss of node %d to be logged" % node, [survivor], timeout=30)
        if host is not None:
            self.assertEqual(hosts.wait_empty(host), [], "left in host %d" % host)

    def codes(self, jobs, timeout=120):
        return [job.wait(timeout=timeout) for job in jobs]

    def assert_finished_like_undisturbed(self, jobs, restarts=1):
        """Every node exited 0, the final state is the predicted one, and the journal shows
        `restarts` restarts and nothing lost or repeated beyond a checkpoint."""
        self.assertEqual(self.codes(jobs), [0] * len(jobs),
                         "\n".join("--- stderr:\n" + j.stderr[-4000:] for j in jobs))
        with open(self.result) as f:
            self.assertEqual(json.load(f)["state"], self.final_state)
        self.assertEqual(gltest.ckpt_journal_problems(self.journal, STEPS, EVERY, 2), [])
        self.assertEqual(gltest.ckpt_attempts(self.journal),
                         {r: list(range(restarts + 1)) for r in range(2)})

    def assert_nothing_left(self, hosts):
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "tagged processes survived")
        for i in range(len(hosts.hosts)):
            self.assertEqual(hosts.wait_empty(i), [], "processes left in host %d" % i)

    # ---------------------------------------------------------------- scenarios

    def test_a_node1_killed_and_started_again(self):
        hosts = self.hosts(2)
        n0, n1 = self.node(hosts, 0, 0), self.node(hosts, 1, 1)
        self.wait_checkpoint([n0, n1])
        self.kill(n1)
        self.wait_noticed(n0, 1, hosts, 1)
        n1 = self.node(hosts, 1, 1)
        self.assert_finished_like_undisturbed([n0, n1])
        # Normally node 0 hears node 1's connection end first; if its own rank lost its gloo
        # peer and failed first, that failure is counted with the loss (one restart).
        self.assertRegex(n0.stderr, LOSS_LINE + "|taken as a consequence, one restart for both")
        self.assertRegex(n0.stderr, r"node 1 \(\S+, 198\.18\.0\.2\) is back")
        self.assert_nothing_left(hosts)

    def test_b_node0_killed_and_started_again(self):
        hosts = self.hosts(2)
        n0, n1 = self.node(hosts, 0, 0), self.node(hosts, 1, 1)
        self.wait_checkpoint([n0, n1])
        self.kill(n0)
        self.wait_noticed(n1, 0, hosts, 0)
        n0 = self.node(hosts, 0, 0)
        self.assert_finished_like_undisturbed([n0, n1])
        self.assertIn("node 0 (198.18.0.1) was lost", n1.stderr)
        self.assert_nothing_left(hosts)

    def test_c_node0_back_at_a_new_address_behind_the_same_name(self):
        # MASTER_ADDR is a name that only these hosts resolve (their /etc/hosts); node 0's
        # new incarnation starts in the spare host 2 and the name moves there.
        hosts = self.hosts(2, spares=1)
        names = gltest.HostsFileNames(hosts)
        self.addCleanup(names.close)
        name = "gl-master-%s" % self.tag[-6:]
        names.set(name, hosts.addr(0))
        n0 = self.node(hosts, 0, 0, master_addr=name)
        n1 = self.node(hosts, 1, 1, master_addr=name)
        self.wait_checkpoint([n0, n1])
        self.kill(n0)
        names.set(name, hosts.addr(2))
        self.wait_noticed(n1, 0)
        n0 = self.node(hosts, 2, 0, master_addr=name)
        self.assert_finished_like_undisturbed([n0, n1])  # node 1 found node 0's new address
        self.assert_nothing_left(hosts)

    def test_d_sigterm_evicts_node1_which_comes_back(self):
        hosts = self.hosts(2)
        n0, n1 = self.node(hosts, 0, 0), self.node(hosts, 1, 1)
        self.wait_checkpoint([n0, n1])
        n1.signal(signal.SIGTERM)
        self.assertEqual(n1.wait(timeout=30), 143, n1.stderr)
        n1 = self.node(hosts, 1, 1)
        self.assert_finished_like_undisturbed([n0, n1])
        self.assertRegex(n0.stderr, r"node 1 \(\S+, 198\.18\.0\.2\) left the job: its gculaunch "
                                    r"received SIGTERM")
        self.assert_nothing_left(hosts)

    def test_e_host_unplugged_and_plugged_back(self):
        # No FIN, no RST: both sides notice by TCP giving up (keepalive, 5-7 s); node 1 keeps
        # trying to reach node 0 and re-registers once its cable is back.
        hosts = self.hosts(2)
        n0, n1 = self.node(hosts, 0, 0), self.node(hosts, 1, 1)
        self.wait_checkpoint([n0, n1])
        hosts.unplug(1)
        self.wait_until(lambda: re.search(r"node 1 \(\S+, 198\.18\.0\.2\) was lost",
                                          n0.stderr) is not None,
                        "node 0 to notice that node 1 is gone", [n0, n1], timeout=15)
        self.wait_until(lambda: re.search(r"node 0 \([^)]*\) was lost|node 0's store went away",
                                          n1.stderr) is not None,
                        "node 1 to notice that node 0 is gone", [n0, n1], timeout=15)
        hosts.plug(1)
        self.assert_finished_like_undisturbed([n0, n1])
        self.assert_nothing_left(hosts)

    def test_f_node_that_never_comes_back(self):
        hosts = self.hosts(3)
        jobs = [self.node(hosts, i, i, nnodes=3, rdzv_timeout=12) for i in range(3)]
        self.wait_checkpoint(jobs)
        self.kill(jobs[1])
        lost = time.monotonic()
        codes = self.codes([jobs[0], jobs[2]], timeout=60)
        elapsed = time.monotonic() - lost
        self.assertEqual(codes, [4, 4], [j.stderr for j in jobs])
        self.assertGreaterEqual(elapsed, 11, "the others gave up after %.1f s" % elapsed)
        self.assertLessEqual(elapsed, 25, "the others gave up after %.1f s" % elapsed)
        for job in (jobs[0], jobs[2]):
            self.assertRegex(job.stderr, r"waiting for node 1 \(\S+, 198\.18\.0\.2\) to come back")
            self.assertRegex(job.stderr, r"node 1 \(\S+, 198\.18\.0\.2\) .*did not come back")
        self.assert_nothing_left(hosts)

    def test_g_replacement_at_another_address(self):
        hosts = self.hosts(2, spares=1)
        n0, n1 = self.node(hosts, 0, 0), self.node(hosts, 1, 1)
        self.wait_checkpoint([n0, n1])
        self.kill(n1)
        self.wait_noticed(n0, 1)
        n1 = self.node(hosts, 2, 1)
        self.assert_finished_like_undisturbed([n0, n1])
        self.assert_nothing_left(hosts)

    def test_h_old_node1_returning_after_its_replacement_is_refused(self):
        hosts = self.hosts(2, spares=1)
        # A node stopped for good is lost once its silence passes the bound: 2-4 s here.
        quick = ["--node-timeout", "4"]
        n0, old = self.node(hosts, 0, 0, extra_args=quick), self.node(hosts, 1, 1,
                                                                       extra_args=quick)
        self.addCleanup(self.resume, old)
        self.wait_checkpoint([n0, old])
        old.signal(signal.SIGSTOP)  # its heartbeats stop; its rank runs on until node 0 stops
        self.wait_until(lambda: re.search(r"node 1 \(\S+, 198\.18\.0\.2\) was lost",
                                          n0.stderr) is not None,
                        "node 0 to declare node 1 lost", [n0], timeout=15)
        new = self.node(hosts, 2, 1, extra_args=quick)
        self.wait_running_again(1, [n0, new])
        old.signal(signal.SIGCONT)
        self.assertEqual(old.wait(timeout=30), 2, old.stderr)
        self.assertRegex(old.stderr, r"replaced|already taken")
        self.assert_finished_like_undisturbed([n0, new])
        self.assert_nothing_left(hosts)

    @staticmethod
    def resume(job):
        """Cleanup of a failed test: a stopped gculaunch must run again to be reaped."""
        if job.proc.poll() is None:
            try:
                job.signal(signal.SIGCONT)
            except OSError:
                pass

    def test_i_restarts_exhausted_by_repeated_losses(self):
        hosts = self.hosts(2)
        n0 = self.node(hosts, 0, 0, max_restarts=1)
        n1 = self.node(hosts, 1, 1, max_restarts=1)
        self.wait_checkpoint([n0, n1])
        self.kill(n1)
        self.wait_noticed(n0, 1, hosts, 1)
        n1 = self.node(hosts, 1, 1, max_restarts=1)
        self.wait_running_again(1, [n0, n1])
        self.kill(n1)
        self.assertEqual(n0.wait(timeout=60), 4, n0.stderr)
        self.assertRegex(n0.stderr, r"node 1 \(\S+, 198\.18\.0\.2\) was lost")
        self.assertFalse(os.path.exists(self.result), "the job cannot have finished")
        self.assert_nothing_left(hosts)

    def check_stranger_refused(self, node_rank, nnodes):
        """A gculaunch of job "rejoin-other" (node `node_rank` of `nnodes`) reaches this job's
        node 0 while it runs: refused with exit 2 and a line naming both jobs; this job runs
        on, undisturbed (no restart)."""
        hosts = self.hosts(2, spares=1)
        mine = ["--rdzv-id", "rejoin-mine"]
        n0 = self.node(hosts, 0, 0, extra_args=mine)
        n1 = self.node(hosts, 1, 1, extra_args=mine)
        self.wait_checkpoint([n0, n1])
        stranger = self.node(hosts, 2, node_rank, nnodes=nnodes,
                             extra_args=["--rdzv-id", "rejoin-other"])
        code = stranger.wait(timeout=40)
        for job in (n0, n1):
            job.wait(timeout=60)
        self.assertEqual(code, 2, "--- the stranger:\n%s--- node 0:\n%s"
                         % (stranger.stderr, n0.stderr))
        self.assertIn("rejoin-other", stranger.stderr)
        self.assertIn("rejoin-mine", stranger.stderr)
        self.assert_finished_like_undisturbed([n0, n1], restarts=0)
        self.assert_nothing_left(hosts)

    def test_j1_stranger_claiming_a_taken_node_rank_is_refused(self):
        self.check_stranger_refused(1, 2)

    def test_j2_stranger_with_a_node_rank_this_job_lacks_is_refused(self):
        # Node 2 of 3: a shape this 2-node job does not have.
        self.check_stranger_refused(2, 3)


if __name__ == "__main__":
    unittest.main()
