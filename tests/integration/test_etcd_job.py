"""Jobs whose rendezvous is etcd (issue 16, docs/etcd.md "Job rendezvous on etcd").

Simulated hosts (gltest.SimulatedHosts): one network namespace per node, and one per etcd
member (Debian's etcd, started by the test: gltest.EtcdCluster).  Each node runs gculaunch with
torchrun's etcd flags only (--rdzv-backend etcd --rdzv-endpoint --rdzv-id, no platform
variables) and examples/ckpt_train.py with one real gloo rank; the final state must be the one
simulate() predicts, whatever happened on the way.

Scenarios: a normal 3-node run (and the job's keys are gone afterwards); a rank failure (one
restart, on every node); the node that leads the term (and hosts the ranks' store) killed for
good: an elastic 2:3 job re-forms on the other two, a fixed-size job waits for a replacement
at a new address; etcd unreachable at start (exit 3 at --rdzv-timeout).
"""
import json
import os
import re
import signal
import time
import unittest

import gltest

STEPS = 40
EVERY = 5
STEP_TIME = 0.15


class EtcdJob(gltest.CheckpointJobCase):
    WORK_PREFIX = "gltest-etcdjob-"

    @classmethod
    def setUpClass(cls):
        example = gltest.ckpt_example()
        states = example.simulate(STEPS)
        cls.final_state = states[-1]

    def cluster(self, nodes, members=1, spares=0):
        """`nodes` hosts for gculaunch (0..nodes-1), then `members` etcd hosts, then spares."""
        hosts = self.hosts(nodes + members + spares)
        etcd = gltest.EtcdCluster(hosts, range(nodes, nodes + members), self.work)
        self.addCleanup(etcd.close)
        return hosts, etcd

    def node(self, hosts, etcd, host, nnodes="3", rdzv_id="job1", extra=(), max_restarts=3,
             rdzv_timeout=30, fail_rank=-1, fail_step=0):
        args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints(), "--rdzv-id",
                rdzv_id, "--rdzv-conf", "lease_ttl=2,last_call_timeout=2", "--nnodes", nnodes,
                "--nproc-per-node", "1", "--device", "cpu", "--grace-period", "5",
                "--max-restarts", str(max_restarts), "--rdzv-timeout", str(rdzv_timeout)]
        args += list(extra)
        args += ["--python", gltest.PYTHON, gltest.CKPT_EXAMPLE, self.ckpt, "--steps",
                 str(STEPS), "--ckpt-every", str(EVERY), "--step-time", str(STEP_TIME),
                 "--journal", self.journal, "--result", self.result, "--pg-timeout", "60"]
        if fail_rank >= 0:
            args += ["--fail-rank", str(fail_rank), "--fail-step", str(fail_step)]
        job = gltest.Job(args, tag=self.tag, extra_env={"GLOO_SOCKET_IFNAME": "eth0"},
                         prefix=hosts.command_prefix(host))
        job.__enter__()
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def leader_pid(self, etcd, rdzv_id="job1"):
        out = etcd.etcdctl("get", "--print-value-only", "/gculaunch/%s/leader" % rdzv_id)
        if out.returncode != 0 or not out.stdout.strip():
            return None
        return json.loads(out.stdout.strip().splitlines()[0]).get("pid")

    def keys(self, etcd, prefix):
        out = etcd.etcdctl("get", "--prefix", "--keys-only", prefix)
        self.assertEqual(out.returncode, 0, out.stderr)
        return [k for k in out.stdout.split("\n") if k]

    def assert_finished(self, jobs):
        codes = [job.wait(timeout=120) for job in jobs]
        self.assertEqual(codes, [0] * len(jobs),
                         "\n".join("--- stderr:\n" + j.stderr[-4000:] for j in jobs))
        with open(self.result) as f:
            self.assertEqual(json.load(f)["state"], self.final_state)

    # ---------------------------------------------------------------- scenarios

    def test_a_three_nodes_run_and_leave_no_keys(self):
        hosts, etcd = self.cluster(3)
        jobs = [self.node(hosts, etcd, i) for i in range(3)]
        self.assert_finished(jobs)
        self.assertEqual([w for w, _ in self.worlds()], [3])
        self.assertEqual(self.keys(etcd, "/gculaunch/job1/"), [])

    def test_b_rank_failure_restarts_once_everywhere(self):
        hosts, etcd = self.cluster(3)
        jobs = [self.node(hosts, etcd, i, fail_rank=1, fail_step=12) for i in range(3)]
        self.assert_finished(jobs)
        self.assertEqual(self.worlds(), [(3, 0), (3, 1)])

    def test_c_leader_lost_elastic_job_reforms_on_the_others(self):
        hosts, etcd = self.cluster(3)
        jobs = [self.node(hosts, etcd, i, nnodes="2:3") for i in range(3)]
        self.wait_world(3, 0, jobs)
        pid = self.leader_pid(etcd)
        leader = [j for j in jobs if j.proc.pid == pid]
        self.assertEqual(len(leader), 1, "leader pid %r among %r" % (pid, [j.proc.pid for j in jobs]))
        leader[0].signal(signal.SIGKILL)
        leader[0].proc.wait(timeout=30)
        rest = [j for j in jobs if j is not leader[0]]
        try:
            self.wait_world(2, 1, rest, timeout=60)
        except AssertionError:
            for j in rest:
                j.wait(timeout=30)
                gltest.eprint("---- node stderr\n" + j.stderr[-5000:])
            raise
        self.assert_finished(rest)
        self.assertNotEqual(self.leader_pid(etcd), pid)
        # The lines speak of etcd's leader, not of a node 0 that came back.
        said = "".join(j.stderr for j in rest)
        self.assertIn("went away: its etcd key /gculaunch/job1/leader was deleted (its lease "
                      "ended)", said)
        self.assertIn("this node took over as the job's leader: resuming the job at epoch 1",
                      said)
        self.assertNotIn("came back", said)

    def test_d_leader_lost_fixed_size_waits_for_a_replacement(self):
        hosts, etcd = self.cluster(3, spares=1)
        jobs = [self.node(hosts, etcd, i) for i in range(3)]
        self.wait_world(3, 0, jobs)
        pid = self.leader_pid(etcd)
        leader = [j for j in jobs if j.proc.pid == pid]
        self.assertEqual(len(leader), 1)
        leader[0].signal(signal.SIGKILL)
        leader[0].proc.wait(timeout=30)
        rest = [j for j in jobs if j is not leader[0]]
        # The dead leader's lease ends and one of the two takes over: the two wait, nothing
        # runs on 2 nodes (then, or ever: the journal is checked again at the end).
        self.wait_until(lambda: self.leader_pid(etcd) in [j.proc.pid for j in rest],
                        "one of the two to lead", rest, timeout=30)
        self.assertNotIn((2, 1), self.worlds())
        spare = self.node(hosts, etcd, 4)
        live = rest + [spare]
        self.wait_world(3, 1, live, timeout=60)
        self.assert_finished(live)
        self.assertNotIn(2, [w for w, _ in self.worlds()])

    def test_e_etcd_unreachable_at_start_exits_3(self):
        hosts = self.hosts(2)
        job = gltest.Job(["--rdzv-backend", "etcd", "--rdzv-endpoint", hosts.addr(1) + ":2379",
                          "--rdzv-id", "job1", "--nnodes", "2", "--nproc-per-node", "1",
                          "--device", "cpu", "--rdzv-timeout", "4", "--no-python", "/bin/true"],
                         tag=self.tag, prefix=hosts.command_prefix(0))
        with job:
            code = job.wait(timeout=60)
        self.assertEqual(code, 3, job.stderr)
        self.assertIn(hosts.addr(1) + ":2379", job.stderr)

    def test_f_two_jobs_on_one_etcd_do_not_meet(self):
        """Two 2-node jobs with other --rdzv-id on one etcd at once: each all_reduce sums over
        its own two ranks only."""
        hosts, etcd = self.cluster(4)
        script = os.path.join(self.work, "sum.py")
        with open(script, "w") as f:
            f.write(SUM_SCRIPT)
        jobs = []
        for i, rdzv_id in enumerate(["jobA", "jobA", "jobB", "jobB"]):
            args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoints(), "--rdzv-id",
                    rdzv_id, "--nnodes", "2", "--nproc-per-node", "1", "--device", "cpu",
                    "--rdzv-timeout", "30", "--python", gltest.PYTHON, script]
            job = gltest.Job(args, tag=self.tag, extra_env={"GLOO_SOCKET_IFNAME": "eth0"},
                             prefix=hosts.command_prefix(i))
            self.addCleanup(job.__exit__, None, None, None)
            jobs.append(job)
        codes = [j.wait(timeout=90) for j in jobs]
        self.assertEqual(codes, [0] * 4, "\n".join(j.stderr[-3000:] for j in jobs))
        for j in jobs:
            self.assertIn("sum 2 of world 2", j.stdout)
        self.assertEqual(self.keys(etcd, "/gculaunch/"), [])

    def test_g_etcd_lost_mid_job_stops_every_node(self):
        """etcd gone for longer than the lease: the ranks stop, every node exits 4 with a line
        naming etcd once --rdzv-timeout has passed."""
        hosts, etcd = self.cluster(2)
        jobs = [self.node(hosts, etcd, i, nnodes="2", rdzv_timeout=8) for i in range(2)]
        self.wait_world(2, 0, jobs)
        etcd.stop(0, hard=True)
        lost = time.monotonic()
        codes = [j.wait(timeout=60) for j in jobs]
        took = time.monotonic() - lost
        for code, j in zip(codes, jobs):
            self.assertEqual(code, 4, j.stderr[-3000:])
            self.assertRegex(j.stderr, r"error: node 0 \(the job's leader in etcd\) was lost: it "
                             r"did not come back within 8 s \(--rdzv-timeout\); could not reach "
                             r"etcd for the job's keys under /gculaunch/job1/")
            # One warning per kind of trouble, not one per attempt while etcd is away.
            warnings = [re.sub(r"[0-9]+", "N", line) for line in j.stderr.splitlines()
                        if line.startswith("gculaunch: warning:")]
            self.assertEqual(len(warnings), len(set(warnings)), j.stderr[-3000:])
        self.assertLess(took, 40)


SUM_SCRIPT = r"""
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("sum %d of world %d" % (int(t.item()), dist.get_world_size()), flush=True)
"""


if __name__ == "__main__":
    unittest.main()
