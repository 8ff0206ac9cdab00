"""Elastic jobs (issue 13): `--nnodes MIN:MAX` shrinks and grows.  Simulated hosts
(gltest.SimulatedHosts, one network namespace per node), one gculaunch per host, each running
examples/ckpt_train.py with one real gloo rank.  The example re-shards its data by RANK and
WORLD_SIZE at every start, and its integer arithmetic gives the same final state for every
world size, so a job that shrank and grew must still end in exactly the state simulate()
predicts; the journal shows which world size ran which steps and with which
TORCHELASTIC_RESTART_COUNT.

Scenarios: 2:3 with three nodes, one killed for good (the job goes on with two), then a new
node joins (back to three); 1:2 with one node starting after the last call, a second one
admitted later; fewer than MIN left (exit 4 at the join timeout, naming the lost node);
SIGTERM to one node of three (it leaves, the two re-form); torchrun-style flags only
(--rdzv-backend c10d --rdzv-endpoint --rdzv-id, no platform variables, the store host found
by its address).
"""
import json
import os
import signal
import time
import unittest

import gltest

PORT = 29500        # every host has its own network namespace: the port is free in each
STEPS = 60
EVERY = 5
STEP_TIME = 0.15    # seconds per step
LAST_CALL = 2       # --rdzv-conf last_call_timeout in these tests (torchrun's default is 30)


class Elastic(gltest.CheckpointJobCase):
    WORK_PREFIX = "gltest-elastic-"

    @classmethod
    def setUpClass(cls):
        example = gltest.ckpt_example()
        states = example.simulate(STEPS)
        cls.final_state = states[-1]
        cls.values = [example.value_of(s) for s in states]

    # ---------------------------------------------------------------- helpers

    def example_args(self, steps=STEPS):
        return ["--python", gltest.PYTHON, gltest.CKPT_EXAMPLE, self.ckpt, "--steps", str(steps),
                "--ckpt-every", str(EVERY), "--step-time", str(STEP_TIME), "--journal",
                self.journal, "--result", self.result, "--pg-timeout", "60"]

    def launcher_args(self, nnodes, rdzv_timeout, max_restarts):
        return ["--nnodes", nnodes, "--nproc-per-node", "1", "--device", "cpu",
                "--grace-period", "5", "--max-restarts", str(max_restarts),
                "--rdzv-timeout", str(rdzv_timeout),
                "--rdzv-conf", "last_call_timeout=%d" % LAST_CALL]

    def node(self, hosts, host, nnodes="2:3", rdzv_timeout=30, max_restarts=3, steps=STEPS):
        """gculaunch in host `host` with a platform's variables (RANK says only whether it
        hosts the store: RANK 0 does)."""
        args = self.launcher_args(nnodes, rdzv_timeout, max_restarts) + self.example_args(steps)
        job = gltest.NodeJob(hosts, host, 3, PORT, args, self.tag,
                             extra_env={"RANK": "0" if host == 0 else "1"})
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def wait_checkpoint(self, jobs, after=0, timeout=90):
        self.wait_until(lambda: self.checkpoint_step() > after, "a checkpoint after step %d"
                        % after, jobs, timeout)

    def assert_finished(self, jobs, final_world):
        """Every job exited 0; the final state is the predicted one; every journaled step has
        the undisturbed run's value; the last step ran on `final_world` ranks."""
        codes = [job.wait(timeout=120) for job in jobs]
        self.assertEqual(codes, [0] * len(jobs),
                         "\n".join("--- stderr:\n" + j.stderr[-4000:] for j in jobs))
        with open(self.result) as f:
            self.assertEqual(json.load(f)["state"], self.final_state)
        recs = self.records()
        for rank, rows in recs.items():
            for r in rows:
                self.assertEqual(r["value"], self.values[r["step"]], "rank %d: %r" % (rank, r))
        last = [rows[-1] for rank, rows in recs.items() if rank < final_world]
        self.assertEqual(len(last), final_world)
        for r in last:
            self.assertEqual((r["step"], r["world"]), (STEPS, final_world))

    def assert_nothing_left(self, hosts):
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "tagged processes survived")
        for i in range(len(hosts.hosts)):
            self.assertEqual(hosts.wait_empty(i), [], "processes left in host %d" % i)

    # ---------------------------------------------------------------- scenarios

    def test_shrink_then_grow(self):
        """2:3, three nodes; node 2 killed for good: the job goes on with two (one restart);
        a new node joins: back to three (free: TORCHELASTIC_RESTART_COUNT stays 1)."""
        hosts = self.hosts(3, spares=1)
        jobs = [self.node(hosts, i) for i in range(3)]
        self.wait_world(3, 0, jobs)
        self.wait_checkpoint(jobs)
        jobs[2].signal(signal.SIGKILL)
        jobs[2].proc.wait(timeout=30)
        self.wait_world(2, 1, jobs[:2])
        self.wait_checkpoint(jobs[:2], after=self.checkpoint_step())
        new = self.node(hosts, 3)
        live = jobs[:2] + [new]
        self.wait_world(3, 1, live)
        self.assert_finished(live, 3)
        self.assertEqual([w for w, _ in self.worlds()], [3, 2, 3], self.worlds())
        self.assertEqual([a for _, a in self.worlds()], [0, 1, 1], self.worlds())
        err = jobs[0].stderr
        self.assertRegex(err, r"node \d+ \(\S+, 198\.18\.0\.3\) was lost: .*re-forms without it")
        self.assertRegex(err, r"node \d+ \(\S+, 198\.18\.0\.4\) joined the job")
        # Its own plan: the node count, not the other nodes (node 0's log names them).
        self.assertRegex(new.stderr, r"layout: epoch \d+: 3 nodes, this node is node rank "
                                     r"2 \(GROUP_RANK\) with ranks 2-2 of WORLD_SIZE=3 "
                                     r"\(TORCHELASTIC_RESTART_COUNT=1\)")
        self.assert_nothing_left(hosts)

    def test_min_one_starts_after_last_call_then_admits(self):
        """1:2 with one node: it starts alone once the last call passed; a second node that
        arrives later is admitted (a re-form that costs nothing)."""
        hosts = self.hosts(2)
        first = self.node(hosts, 0, nnodes="1:2", max_restarts=0)
        began = time.monotonic()
        self.wait_world(1, 0, [first])
        self.assertGreaterEqual(time.monotonic() - began, LAST_CALL - 0.5)
        self.assertIn("last_call_timeout", first.stderr)
        self.wait_checkpoint([first])
        second = self.node(hosts, 1, nnodes="1:2", max_restarts=0)
        self.wait_world(2, 0, [first, second])
        self.assert_finished([first, second], 2)
        self.assertEqual(self.worlds(), [(1, 0), (2, 0)])
        self.assert_nothing_left(hosts)

    def test_fewer_than_min_exits_4_at_the_join_timeout(self):
        """2:3 with two nodes; one killed: one left, below MIN: node 0 waits, then every node
        left exits 4 at the join timeout, naming the lost node."""
        hosts = self.hosts(2)
        jobs = [self.node(hosts, i, rdzv_timeout=6) for i in range(2)]
        self.wait_world(2, 0, jobs)
        jobs[1].signal(signal.SIGKILL)
        jobs[1].proc.wait(timeout=30)
        lost = time.monotonic()
        code = jobs[0].wait(timeout=60)
        waited = time.monotonic() - lost
        self.assertEqual(code, 4, jobs[0].stderr[-3000:])
        self.assertGreaterEqual(waited, 5)
        self.assertRegex(jobs[0].stderr, r"node \d+ \(\S+, 198\.18\.0\.2\) was lost: .*1 node\(s\) "
                                         r"remain of the 2 the job needs .*within 6 s")
        self.assert_nothing_left(hosts)

    def test_sigterm_leaves_and_the_rest_reform(self):
        """2:3, three nodes; SIGTERM to node 2: it leaves (128+15), the two re-form."""
        hosts = self.hosts(3)
        jobs = [self.node(hosts, i) for i in range(3)]
        self.wait_world(3, 0, jobs)
        self.wait_checkpoint(jobs)
        jobs[2].signal(signal.SIGTERM)
        self.assertEqual(jobs[2].wait(timeout=60), 143, jobs[2].stderr[-3000:])
        self.wait_world(2, 1, jobs[:2])
        self.assert_finished(jobs[:2], 2)
        self.assertRegex(jobs[0].stderr, r"node \d+ \(\S+, 198\.18\.0\.3\) left the job")
        self.assert_nothing_left(hosts)

    def test_torchrun_style_flags_only(self):
        """--rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id, no platform variables: the
        node the endpoint names hosts the store."""
        hosts = self.hosts(2)
        endpoint = "%s:%d" % (hosts.addr(0), PORT)
        jobs = []
        for i in range(2):
            args = (self.launcher_args("1:2", 30, 0)
                    + ["--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "el1"]
                    + self.example_args(steps=20))
            job = gltest.Job(args, tag=self.tag, extra_env={"GLOO_SOCKET_IFNAME": "eth0"},
                             prefix=hosts.command_prefix(i))
            self.addCleanup(job.__exit__, None, None, None)
            jobs.append(job)
        codes = [job.wait(timeout=120) for job in jobs]
        self.assertEqual(codes, [0, 0], "\n".join(j.stderr[-3000:] for j in jobs))
        self.assertIn("this node hosts the store", jobs[0].stderr)
        self.assertIn("another node hosts the store", jobs[1].stderr)
        recs = self.records()
        self.assertEqual(sorted(recs), [0, 1])
        self.assertEqual(recs[1][-1]["world"], 2)
        self.assert_nothing_left(hosts)


if __name__ == "__main__":
    unittest.main()
