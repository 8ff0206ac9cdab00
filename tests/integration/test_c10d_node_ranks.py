"""torchrun's c10d line without node ranks (issue 28, items 1 and 2): accelerate's README and
many Kubernetes recipes start `torchrun --nnodes N --nproc_per_node K --rdzv_backend c10d
--rdzv_endpoint HOST:PORT --rdzv_id ID train.py` on every node, with no node rank and no
platform variables.  The rendezvous assigns the node ranks, the node the endpoint names hosts
the store, and the layout line says by which rule.  Simulated hosts (one network namespace
each), one gculaunch per host running examples/ckpt_train.py with one real gloo rank.

Scenarios: two hosts start and finish as one job; a node whose launcher is killed is replaced
by a new launcher that takes the vacated node rank; a node beyond N is told the job is full,
in one line, and the job goes on; a second launcher on the endpoint's own host (hostNetwork
pods) joins the first one's store as a client, while an explicit is_host=true there fails and
a launcher of another job there is refused, each in one line.
"""
import os
import re
import signal
import unittest

import gltest

PORT = 29400        # torchrun's c10d default; every host has its own network namespace
STEPS = 30
EVERY = 5
STEP_TIME = 0.15    # seconds per step


class C10dNodeRanks(gltest.CheckpointJobCase):
    WORK_PREFIX = "gltest-c10d-"

    @classmethod
    def setUpClass(cls):
        example = gltest.ckpt_example()
        states = example.simulate(STEPS)
        cls.final_state = states[-1]

    def node(self, hosts, host, run_id="c10d1", max_restarts=0, extra=(), endpoint_addr=None):
        """The users' torchrun line, as gculaunch flags with torchrun's spellings, in host
        `host`: no --node-rank, no RANK/WORLD_SIZE/MASTER_* in the environment; the endpoint
        is host 0 unless `endpoint_addr` says."""
        endpoint = "%s:%d" % (endpoint_addr or hosts.addr(0), PORT)
        args = (["--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", endpoint, "--rdzv_id", run_id, "--device", "cpu",
                 "--max_restarts", str(max_restarts), "--rdzv-timeout", "30",
                 "--grace-period", "5"] + list(extra)
                + ["--python", gltest.PYTHON, gltest.CKPT_EXAMPLE, self.ckpt, "--steps",
                   str(STEPS), "--ckpt-every", str(EVERY), "--step-time", str(STEP_TIME),
                   "--journal", self.journal, "--result", self.result, "--pg-timeout", "60"])
        job = gltest.Job(args, tag=self.tag, extra_env={"GLOO_SOCKET_IFNAME": "eth0"},
                         prefix=hosts.command_prefix(host))
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def assert_job_done(self, jobs, world=2):
        codes = [job.wait(timeout=120) for job in jobs]
        self.assertEqual(codes, [0] * len(jobs), "\n".join(j.stderr[-3000:] for j in jobs))
        recs = self.records()
        self.assertEqual(sorted(recs), list(range(world)), recs.keys())
        for rank in range(world):
            self.assertEqual((recs[rank][-1]["step"], recs[rank][-1]["world"]), (STEPS, world))

    def assert_nothing_left(self, hosts):
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "tagged processes survived")
        for i in range(len(hosts.hosts)):
            self.assertEqual(hosts.wait_empty(i), [], "processes left in host %d" % i)

    def test_two_hosts_without_node_ranks_form_one_job(self):
        """Both hosts run the same line: one job of 2 nodes (WORLD_SIZE=2, ranks 0 and 1), the
        endpoint's host is node 0 and says so by the rule that matched."""
        hosts = self.hosts(2)
        jobs = [self.node(hosts, i) for i in range(2)]
        self.assert_job_done(jobs)
        self.assertIn("layout: 2 nodes x 1 rank, node rank assigned at rendezvous, this node "
                      "hosts the store (198.18.0.1 is an address of interface eth0)",
                      jobs[0].stderr)
        self.assertIn("another node hosts the store (198.18.0.1 is not localhost, a loopback "
                      "address, this host's name", jobs[1].stderr)
        self.assertRegex(jobs[1].stderr, r"this node is node rank 1 \(GROUP_RANK\) with ranks "
                                         r"1-1 of WORLD_SIZE=2")
        self.assert_nothing_left(hosts)

    def test_restarted_launcher_takes_the_vacated_node_rank(self):
        """Node 1's gculaunch is killed; a new one, started with the same line on a spare host,
        becomes node rank 1 and the job finishes (one restart)."""
        hosts = self.hosts(2, spares=1)
        jobs = [self.node(hosts, i, max_restarts=1) for i in range(2)]
        self.wait_world(2, 0, jobs)
        self.wait_until(lambda: self.checkpoint_step() > 0, "a checkpoint", jobs, 90)
        jobs[1].signal(signal.SIGKILL)
        jobs[1].proc.wait(timeout=30)
        self.wait_until(lambda: "waits up to 30 s for it or a replacement to join"
                        in jobs[0].stderr, "node 0 waiting for a replacement", [jobs[0]], 30)
        new = self.node(hosts, 2, max_restarts=1)
        self.assert_job_done([jobs[0], new])
        self.assertEqual(self.worlds(), [(2, 0), (2, 1)])
        self.assertRegex(new.stderr, r"this node is node rank 1 \(GROUP_RANK\) with ranks 1-1 of "
                                     r"WORLD_SIZE=2 \(TORCHELASTIC_RESTART_COUNT=1\)")
        self.assert_nothing_left(hosts)

    def test_a_node_beyond_n_is_told_the_job_is_full(self):
        """A third gculaunch with the same line while the two run: it exits 2 with one line;
        the job does not notice."""
        hosts = self.hosts(3)
        jobs = [self.node(hosts, i) for i in range(2)]
        self.wait_world(2, 0, jobs)
        extra = self.node(hosts, 2)
        self.assertEqual(extra.wait(timeout=60), 2, extra.stderr[-3000:])
        full = [line for line in extra.stderr.splitlines() if "error:" in line]
        self.assertEqual(len(full), 1, extra.stderr[-3000:])
        self.assertIn("refused: the job is full: its 2 nodes (--nnodes 2) have joined", full[0])
        self.assertIn("--nnodes MIN:MAX", full[0])
        self.assert_job_done(jobs)
        self.assertEqual(self.worlds(), [(2, 0)])
        self.assert_nothing_left(hosts)

    def test_second_launcher_on_the_endpoint_host_joins_as_a_client(self):
        """Two launchers in the endpoint's own host (both infer that they host the store): the
        second finds the port taken and joins the first one's store; WORLD_SIZE=2."""
        hosts = self.hosts(1)
        first = self.node(hosts, 0)
        first.wait_for(lambda out, err: "layout:" in err, timeout=30)
        second = self.node(hosts, 0)
        self.assert_job_done([first, second])
        self.assertIn("another node hosts the store (port %d on this host is in use: joining the "
                      "store there as a client, as torchrun does)" % PORT, second.stderr)
        self.assert_nothing_left(hosts)

    def test_second_launcher_of_another_job_or_explicit_host_is_refused(self):
        """On the endpoint's host with the first launcher's port taken: an explicit
        --rdzv-conf is_host=true fails (as torchrun does), and a launcher with another run id
        is refused by the first one's store; each in one line with exit 2.  The first one's
        job still forms with a proper second node and finishes."""
        hosts = self.hosts(2)
        first = self.node(hosts, 0)
        first.wait_for(lambda out, err: "layout:" in err, timeout=30)
        explicit = self.node(hosts, 0, extra=["--rdzv-conf", "is_host=true"])
        self.assertEqual(explicit.wait(timeout=60), 2, explicit.stderr[-3000:])
        self.assertRegex(explicit.stderr, r"cannot host the ranks' store on all interfaces port "
                                          r"%d: .*in use" % PORT)
        other = self.node(hosts, 0, run_id="another-job")
        self.assertEqual(other.wait(timeout=60), 2, other.stderr[-3000:])
        refused = [line for line in other.stderr.splitlines() if "error:" in line]
        self.assertEqual(len(refused), 1, other.stderr[-3000:])
        self.assertIn("refused: ", refused[0])
        self.assertIn("belongs to job 'another-job' but the job at this MASTER_ADDR:MASTER_PORT "
                      "is 'c10d1'", refused[0])
        second = self.node(hosts, 1)
        self.assert_job_done([first, second])
        self.assert_nothing_left(hosts)

    def test_dry_run_says_node_rank_assigned_and_who_hosts(self):
        """The dry run of the line on the endpoint's host and on another host.  An address
        every node holds on a dummy interface (kube-proxy's kube-ipvs0 holds every service
        address on every node) does not make a node the store host."""
        hosts = self.hosts(2)
        service = "198.19.0.10"
        for host in range(2):
            # kube-ipvs0 is a dummy device (flags BROADCAST,NOARP); kernels without the dummy
            # module get the same flags from a veth end with ARP off.
            ip = lambda *args: gltest.SimulatedHosts._ip("-n", hosts.hosts[host], *args)
            ip("link", "add", "kube-ipvs0", "type", "veth", "peer", "name", "kube-ipvs0p")
            ip("link", "set", "kube-ipvs0", "arp", "off")
            ip("addr", "add", service + "/32", "dev", "kube-ipvs0")
            ip("link", "set", "kube-ipvs0p", "up")
            ip("link", "set", "kube-ipvs0", "up")
        cases = ((0, None, "this node hosts the store (198.18.0.1 is an address of interface "
                           "eth0)"),
                 (1, None, "another node hosts the store (198.18.0.1 is not localhost"),
                 (0, service, "another node hosts the store (198.19.0.10 is not localhost"))
        for host, endpoint, says in cases:
            job = self.node(hosts, host, extra=["--dry-run"], endpoint_addr=endpoint)
            self.assertEqual(job.wait(timeout=60), 0, job.stderr[-3000:])
            self.assertIn("node rank assigned at rendezvous, " + says, job.stdout)
            self.assertIn("node rank: assigned at rendezvous", job.stdout)


if __name__ == "__main__":
    unittest.main()
