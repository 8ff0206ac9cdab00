"""--store-proxy (issue 47) on simulated hosts (gltest.SimulatedHosts: one network namespace per
node, 198.18.0.0/15 only inside them): real Debian PyTorch 1.13 gloo ranks all-reduce through
each non-zero node's store proxy, on two and on three hosts.  Node 0's rank 0 reads node 0's
/metrics (--metrics-port, on node 0's own loopback) once every rank passed a barrier, and the
test asserts from gculaunch_store_connections_total that node 0 saw a few connections per node,
not one per rank: each non-zero node runs more ranks than that bound allows.  The ranks of a
proxied node get MASTER_ADDR=127.0.0.1 and the proxy's port; node 0's ranks keep node 0's
address.  The same with torch 2.6 from the trixie root on two and on three hosts; a proxied rank's failure
with --max-restarts 1 (node 0's new attempt closes the old streams, attempt 1 all-reduces through
the same proxy).  With a job secret, node 1's gculaunch proves it over its own stream of the
proxy, and another secret on node 1 is refused with exit code 2.  Also: the dry run names the route and the hazard, and --store-proxy with
--no-agent-store is one line, exit 2.
"""
import json
import os
import re
import shlex
import unittest

import gltest

# One rank: records its MASTER_ADDR/MASTER_PORT, joins the gloo group through env://,
# all-reduces rank+1 and checks the sum, passes a barrier (every rank is connected by then),
# and rank 0 (on node 0) saves node 0's /metrics from METRICS_URL.
WORKER = r'''
import datetime, json, os, sys, urllib.request
work = sys.argv[1]
rank = int(os.environ["RANK"])
with open(os.path.join(work, "env.%d.json" % rank), "w") as f:
    json.dump({k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")}, f)
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=120))
world = dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
assert t.item() == world * (world + 1) / 2, (t.item(), world)
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if os.environ.get("FAIL_RANK") == str(rank) and attempt == 0:
    sys.exit(7)
dist.barrier()
if rank == 0 and attempt == 0:
    with urllib.request.urlopen(os.environ["METRICS_URL"], timeout=30) as reply:
        text = reply.read().decode()
    with open(os.path.join(work, "metrics.txt"), "w") as f:
        f.write(text)
dist.barrier()
print("attempt %d rank %d of %d sum %.0f" % (attempt, rank, world, t.item()), flush=True)
dist.destroy_process_group()
'''

PORT = 29500  # every node has its own network namespace: the port is free in each
METRICS_PORT = 29400  # node 0's loopback only
OTHER_NPROC = 4  # ranks on each non-zero node: more than the bound on node 0 per node


class StoreProxy(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tmp = gltest.TempDir(prefix="gltest-proxy-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        os.chmod(self.work, 0o755)
        self.worker = os.path.join(self.work, "worker.py")
        with open(self.worker, "w") as f:
            f.write(WORKER)
        self.tag = gltest.new_tag()

    def hosts(self, count):
        hosts = gltest.SimulatedHosts(count)
        self.addCleanup(hosts.close)
        self.addCleanup(gltest.kill_tagged, self.tag)
        return hosts

    def node(self, hosts, index, nnodes, nproc, extra_args=(), python=None, extra_env=None):
        args = (["--nproc-per-node", str(nproc), "--device", "cpu", "--grace-period", "5",
                 "--store-proxy"] + list(extra_args)
                + ["--python", python or gltest.PYTHON, self.worker, self.work])
        env = {"METRICS_URL": "http://127.0.0.1:%d/metrics" % METRICS_PORT}
        env.update(extra_env or {})
        job = gltest.NodeJob(hosts, index, nnodes, PORT, args, self.tag, extra_env=env)
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def run_job(self, nnodes, python=None, extra_env=None):
        hosts = self.hosts(nnodes)
        jobs = [self.node(hosts, 0, nnodes, 1, ["--metrics-port", str(METRICS_PORT)], python,
                          extra_env)]
        jobs += [self.node(hosts, i, nnodes, OTHER_NPROC, (), python, extra_env)
                 for i in range(1, nnodes)]
        codes = [job.wait(timeout=300) for job in jobs]
        self.assertEqual(codes, [0] * nnodes, [j.stderr for j in jobs])
        world = 1 + OTHER_NPROC * (nnodes - 1)
        out = "".join(j.stdout for j in jobs)
        for rank in range(world):
            self.assertIn("attempt 0 rank %d of %d sum %d" % (rank, world, world * (world + 1) // 2),
                          out)
        # Node 0's ranks reach its store directly; every other node's through its proxy.
        self.assertEqual(self.env_of(0)["MASTER_ADDR"], hosts.addr(0))
        self.assertEqual(self.env_of(0)["MASTER_PORT"], str(PORT))
        for rank in range(1, world):
            env = self.env_of(rank)
            self.assertEqual(env["MASTER_ADDR"], "127.0.0.1", env)
            self.assertNotEqual(env["MASTER_PORT"], str(PORT), env)
        for job in jobs[1:]:
            self.assertRegex(job.stderr, r"store proxy: the ranks' store connections on port "
                                         r"\d+ go to node 0's store at 198\.18\.0\.1:%d over one "
                                         r"connection" % PORT)
            # The node's gculaunch reaches node 0 through its proxy too.
            self.assertRegex(job.stderr, r"connected to the master node at 198\.18\.0\.1:%d "
                                         r"through this node's store proxy \(port \d+\)" % PORT)
        # Node 0's store: its own rank's one or two (torch 1.13: the main and the callback
        # connection), and per other node the proxy's one upstream, which carries that node's
        # ranks and its gculaunch's two connections (without the proxy each other node's
        # OTHER_NPROC ranks would add two each, and its gculaunch two more).
        with open(os.path.join(self.work, "metrics.txt")) as f:
            metrics = f.read()
        match = re.search(r"^gculaunch_store_connections_total (\d+)$", metrics, re.M)
        self.assertIsNotNone(match, metrics)
        total = int(match.group(1))
        print("node 0's store accepted %d connections for %d nodes, %d ranks"
              % (total, nnodes, world))
        self.assertLessEqual(total, 2 + (nnodes - 1), metrics)
        self.assertGreaterEqual(total, 1 + (nnodes - 1), metrics)
        self.assertEqual(gltest.wait_no_tagged(self.tag, 10), [], "tagged processes survived")

    def env_of(self, rank):
        with open(os.path.join(self.work, "env.%d.json" % rank)) as f:
            return json.load(f)

    def test_two_hosts_all_reduce_through_the_proxy(self):
        self.run_job(2)

    def test_three_hosts_all_reduce_through_the_proxy(self):
        self.run_job(3)

    def test_torch26_two_hosts_all_reduce_through_the_proxy(self):
        self.run_torch26_job(2)

    def test_torch26_three_hosts_all_reduce_through_the_proxy(self):
        self.run_torch26_job(3)

    def run_torch26_job(self, nnodes):
        # torch 2.6 from the trixie root (v2 dialect); Debian's build has no libuv, so a
        # test-only sitecustomize makes the env:// client default to use_libuv=False.
        python_cmd = gltest.torch2_python()  # raises (a failure) if it cannot be made
        path = os.path.join(self.work, "python3")
        with open(path, "w") as f:
            f.write('#!/bin/sh\nexec %s "$@"\n' % " ".join(shlex.quote(c) for c in python_cmd))
        os.chmod(path, 0o755)
        gltest.write_no_libuv_sitecustomize(self.work)
        self.run_job(nnodes, python=path,
                     extra_env={"PYTHONPATH": self.work, "GLTEST_TCPSTORE_NO_LIBUV": "1"})

    def test_restart_through_the_proxy(self):
        # Rank 2 (node 1, proxied) fails in attempt 0: node 0's new attempt closes the old
        # streams, and attempt 1's ranks all-reduce through the same proxy.
        hosts = self.hosts(2)
        env = {"FAIL_RANK": "2"}
        jobs = [self.node(hosts, 0, 2, 1, ["--max-restarts", "1"], extra_env=env),
                self.node(hosts, 1, 2, 2, ["--max-restarts", "1"], extra_env=env)]
        codes = [job.wait(timeout=300) for job in jobs]
        self.assertEqual(codes, [0, 0], [j.stderr for j in jobs])
        out = "".join(j.stdout for j in jobs)
        for rank in range(3):
            self.assertIn("attempt 1 rank %d of 3 sum 6" % rank, out)
        self.assertIn("over one connection", jobs[1].stderr)
        self.assertEqual(jobs[1].stderr.count("store proxy: the ranks' store connections"), 1)

    def secret_file(self, name, text):
        path = os.path.join(self.work, name)
        with open(path, "w") as f:
            f.write(text + "\n")
        os.chmod(path, 0o600)
        return path

    def test_job_secret_through_the_proxy(self):
        # Node 1's gculaunch reaches node 0 through its proxy and proves the secret over its
        # own stream (the proxy's proof covers only the upstream): the job runs, and node 0
        # holds one connection for node 1.
        hosts = self.hosts(2)
        secret = ["--job-secret-file", self.secret_file("secret", "s3cret-of-this-job")]
        jobs = [self.node(hosts, 0, 2, 1, secret + ["--metrics-port", str(METRICS_PORT)]),
                self.node(hosts, 1, 2, 2, secret)]
        codes = [job.wait(timeout=300) for job in jobs]
        self.assertEqual(codes, [0, 0], [j.stderr for j in jobs])
        out = "".join(j.stdout for j in jobs)
        for rank in range(3):
            self.assertIn("attempt 0 rank %d of 3 sum 6" % rank, out)
        self.assertRegex(jobs[1].stderr, r"connected to the master node at 198\.18\.0\.1:%d "
                                         r"through this node's store proxy" % PORT)
        with open(os.path.join(self.work, "metrics.txt")) as f:
            metrics = f.read()
        total = int(re.search(r"^gculaunch_store_connections_total (\d+)$", metrics, re.M).group(1))
        self.assertLessEqual(total, 3, metrics)

    def test_another_secret_behind_the_proxy_is_refused(self):
        # The proxy finds node 0's proof wrong and forwards nothing; the node's gculaunch then
        # tries node 0 itself and stops with the usual line and exit code 2.
        hosts = self.hosts(2)
        node0 = self.node(hosts, 0, 2, 1,
                          ["--job-secret-file", self.secret_file("secret0", "the-real-one")])
        node1 = self.node(hosts, 1, 2, 2,
                          ["--job-secret-file", self.secret_file("secret1", "another-one")])
        self.assertEqual(node1.wait(timeout=120), 2, node1.stderr)
        self.assertIn("store proxy: node 0's store at 198.18.0.1:%d failed to prove that it "
                      "holds the job secret" % PORT, node1.stderr)
        self.assertIn("the master node at 198.18.0.1:%d failed to prove that it holds the job "
                      "secret" % PORT, node1.stderr)
        self.assertNotIn("through this node's store proxy", node1.stderr)
        self.assertIsNone(node0.proc.poll(), node0.stderr)  # node 0 waits for the right node

    def test_dry_run_names_the_route_and_the_hazard(self):
        env = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "198.18.0.1",
               "MASTER_PORT": str(PORT)}
        with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--store-proxy",
                         "--dry-run", "--no-python", "/bin/true"], extra_env=env) as job:
            self.assertEqual(job.wait(timeout=60), 0, job.stderr)
        self.assertIn("ranks:   through this node's store proxy (127.0.0.1:<proxy port chosen "
                      "at launch>) to node 0's store at 198.18.0.1:%d, over one connection"
                      % PORT, job.stdout)
        self.assertIn("MASTER_ADDR=127.0.0.1", job.stdout)
        self.assertIn("Megatron-LM", job.stdout + job.stderr)

    def test_no_agent_store_is_refused(self):
        with gltest.Job(["--nproc-per-node", "1", "--device", "cpu", "--store-proxy",
                         "--no-agent-store", "--nnodes", "2", "--node-rank", "1",
                         "--master-addr", "127.0.0.1", "--master-port", str(PORT),
                         "--no-python", "/bin/true"]) as job:
            self.assertEqual(job.wait(timeout=60), 2, job.stderr)
        self.assertEqual(job.stderr, "gculaunch: --store-proxy needs gculaunch's store, but "
                         "--no-agent-store makes rank 0 host it (fix: drop --no-agent-store or "
                         "--store-proxy)\n")


if __name__ == "__main__":
    unittest.main()
