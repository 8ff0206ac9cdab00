"""Only the job steers the job (issue 27): --job-secret-file and --store-allow on simulated
hosts (gltest.SimulatedHosts: one network namespace per node, 198.18.0.x).

A raw TCPStore client (v1 wire protocol on a plain socket, run inside a namespace) forges the
launcher's own messages:
  * a stop marker for the running epoch (without a secret every node exits 42 with the
    forger's text; with one the forger's connection is closed and the job finishes 0);
  * a join request for a missing node (without a secret node 0 starts its ranks for a node
    that does not exist; with one it is refused and the real node joins);
  * a job plan answering a waiting node's join (without a secret that node exits 42; with
    one it is refused and the job runs);
a node with a different secret, or none, cannot join (exit 2, one line on each side); the
secret reaches neither the ranks' environment nor any output; and --store-allow closes a
connection from a namespace outside the list while the nodes inside run the job.

The ranks are small Python programs without torch (the agents' protocol is what is tested):
each writes its environment to <work>/env.<attempt>.<rank>.json and ready.<attempt>.<rank>,
then waits for <work>/release and exits 0.  A node that comes back after a kill and an elastic
node that joins later prove the secret like a first join."""
import glob
import json
import os
import subprocess
import sys
import time
import unittest

import gltest

PORT = 29500  # every node has its own network namespace

WORKER = r'''
import json, os, sys, time
work = sys.argv[1]
rank = os.environ["RANK"]
name = "%s.%s" % (os.environ["TORCHELASTIC_RESTART_COUNT"], rank)
with open(os.path.join(work, "env.%s.json" % name), "w") as f:
    json.dump(dict(os.environ), f)
open(os.path.join(work, "ready.%s" % name), "w").close()
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(work, "release")) and time.monotonic() < deadline:
    time.sleep(0.05)
print("rank %s done" % rank, flush=True)
'''

# A raw TCPStore client (torch 1.x wire format): argv[1] host, argv[2] port, argv[3] a JSON
# list of steps ["get", key] | ["set", key, value] | ["add", key, delta] |
# ["await", key, seconds] (GET until non-empty) | ["probe"] (a GET: is the connection still
# open?).  Prints {"values": [...], "closed_at": index or null}.
FORGER = r'''
import json, socket, struct, sys, time
host, port, steps = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
s = socket.create_connection((host, port), timeout=20)
def blob(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b
def recv(n):
    out = b""
    while len(out) < n:
        k = s.recv(n - len(out))
        if not k:
            raise EOFError()
        out += k
    return out
def get(key):
    s.sendall(b"\x02" + blob(key))
    n = struct.unpack("<Q", recv(8))[0]
    return recv(n).decode() if n else ""
values, closed_at = [], None
for i, step in enumerate(steps):
    try:
        if step[0] == "get":
            values.append(get(step[1]))
        elif step[0] == "set":
            s.sendall(b"\x00" + blob(step[1]) + blob(step[2]))
            values.append(None)
        elif step[0] == "add":
            s.sendall(b"\x03" + blob(step[1]) + struct.pack("<q", step[2]))
            values.append(struct.unpack("<q", recv(8))[0])
        elif step[0] == "await":
            deadline = time.monotonic() + step[2]
            v = get(step[1])
            while not v and time.monotonic() < deadline:
                time.sleep(0.05)
                v = get(step[1])
            values.append(v)
        elif step[0] == "probe":
            values.append(get("gculaunch/job/missing"))
    except (EOFError, ConnectionResetError, BrokenPipeError):
        closed_at = i
        break
print(json.dumps({"values": values, "closed_at": closed_at}))
'''

SECRET = "c2VjcmV0LW9mLXRoZS1qb2ItMjc="


def marker(what):
    return {"kind": "job_error", "epoch": 0, "restarts": 0, "node": -1, "host": "", "addr": "",
            "rank": -1, "local_rank": -1, "exit_code": 42, "what": what, "restartable": False}


class JobSecret(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tmp = gltest.TempDir(prefix="gltest-secret-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        os.chmod(self.work, 0o755)
        self.worker = os.path.join(self.work, "worker.py")
        with open(self.worker, "w") as f:
            f.write(WORKER)
        self.secret_file = self.write_secret("secret", SECRET + "\n")
        self.tag = gltest.new_tag()

    def write_secret(self, name, text):
        path = os.path.join(self.work, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        return path

    def hosts(self, count):
        hosts = gltest.SimulatedHosts(count)
        self.addCleanup(hosts.close)
        self.addCleanup(gltest.kill_tagged, self.tag)
        return hosts

    def node(self, hosts, index, nnodes, secret=None, extra_args=(), extra_env=None):
        args = ["--nproc-per-node", "1", "--device", "cpu", "--grace-period", "3",
                "--rdzv-timeout", "60"]
        if secret:
            args += ["--job-secret-file", secret]
        args += list(extra_args) + ["--python", gltest.PYTHON, self.worker, self.work]
        job = gltest.NodeJob(hosts, index, nnodes, PORT, args, self.tag, extra_env=extra_env)
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def forge(self, hosts, index, steps):
        """Runs the raw client inside host `index`, against node 0's store."""
        out = subprocess.run(hosts.command_prefix(index) +
                             [sys.executable, "-c", FORGER, hosts.addr(0), str(PORT),
                              json.dumps(steps)],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def wait_file(self, name, job, timeout=60):
        """Waits for <work>/name (a glob pattern) while `job` runs."""
        path = os.path.join(self.work, name)
        deadline = time.monotonic() + timeout
        while not glob.glob(path):
            if job.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("%s never appeared\n--- stderr:\n%s" % (name, job.stderr))
            job._pump(0.05)
        return path

    def release(self):
        open(os.path.join(self.work, "release"), "w").close()

    # ------------------------------------------------------------------ forged stop

    def forged_stop(self, secret):
        hosts = self.hosts(3)
        jobs = [self.node(hosts, i, 2, secret) for i in range(2)]
        for rank in range(2):
            self.wait_file("ready.0.%d" % rank, jobs[rank])
        # From a third host that can reach the store, like any client on the network.
        result = self.forge(hosts, 2, [["set", "gculaunch/job/stop/0",
                                        json.dumps(marker("forged by a raw client"))],
                                       ["probe"]])
        return hosts, jobs, result

    def test_forged_stop_is_refused_with_a_secret(self):
        hosts, jobs, result = self.forged_stop(self.secret_file)
        self.assertEqual(result["closed_at"], 1, result)  # the SET closed the connection
        jobs[0].wait_for(lambda out, err: "only a node agent that proved the job secret" in err,
                         timeout=20, what="the refusal on node 0")
        self.assertIn('refused SET ["gculaunch/job/stop/0"]', jobs[0].stderr)
        self.release()
        self.assertEqual([j.wait(timeout=60) for j in jobs], [0, 0],
                         [j.stderr for j in jobs])
        for j in jobs:
            self.assertNotIn("forged by a raw client", j.stderr)
        # The secret reached no rank and no output; its file's path neither.
        for rank in range(2):
            with open(os.path.join(self.work, "env.0.%d.json" % rank)) as f:
                env = f.read()
            self.assertNotIn(SECRET, env)
            self.assertNotIn("GCULAUNCH_JOB_SECRET_FILE", env)
        for j in jobs:
            self.assertNotIn(SECRET, j.stdout + j.stderr)

    def test_forged_stop_works_without_a_secret(self):
        hosts, jobs, result = self.forged_stop(None)
        # The SET was taken (a SET has no reply): the job stops, and node 0's store may close
        # this connection while the job ends, before the probe is answered (seen under load).
        # What proves the forgery is each node's exit with the forged message.
        self.assertEqual([j.wait(timeout=60) for j in jobs], [42, 42],
                         [j.stderr for j in jobs])
        for j in jobs:
            self.assertIn("forged by a raw client", j.stderr)

    # ------------------------------------------------------------------ forged join

    def forged_join(self, secret):
        """Node 0 of a 2-node job, alone: a raw client asks to join as node 1."""
        hosts = self.hosts(2)
        self.release()  # ranks that start exit at once
        node0 = self.node(hosts, 0, 2, secret)
        info = self.forge(hosts, 1, [["await", "gculaunch/job/info", 20]])["values"][0]
        reg = json.loads(info)
        reg.update({"node_rank": 1, "pid": 4242, "incarnation": "f0f0f0f0f0f0f0f0",
                    "host": "forged", "addr": hosts.addr(1)})
        result = self.forge(hosts, 1, [["add", "gculaunch/job/joinseq/1", 1],
                                       ["set", "gculaunch/job/join/1/1", json.dumps(reg)],
                                       ["probe"]])
        return hosts, node0, result

    def test_forged_join_is_refused_with_a_secret(self):
        hosts, node0, result = self.forged_join(self.secret_file)
        self.assertEqual(result["closed_at"], 0, result)  # the ADD closed the connection
        node0.wait_for(lambda out, err: "refused ADD" in err, timeout=20, what="the refusal")
        # The real node 1 still has its place: the job runs and ends well.
        node1 = self.node(hosts, 1, 2, self.secret_file)
        self.assertEqual([node0.wait(timeout=60), node1.wait(timeout=60)], [0, 0],
                         [node0.stderr, node1.stderr])
        self.assertNotIn("forged", node0.stderr)

    def test_forged_join_works_without_a_secret(self):
        hosts, node0, result = self.forged_join(None)
        self.assertIsNone(result["closed_at"], result)
        self.assertEqual(result["values"][0], 1)
        # Node 0 takes the forger for node 1 and starts its rank.
        self.wait_file("ready.0.0", node0, timeout=30)

    # ------------------------------------------------------------------ forged plan

    def forged_plan(self, secret):
        """A 3-node job with nodes 0 and 1 up: node 1 waits for its admission, which a raw
        client answers with an abort."""
        hosts = self.hosts(3)
        self.release()
        node0 = self.node(hosts, 0, 3, secret)
        node1 = self.node(hosts, 1, 3, secret)
        plan = {"epoch": 0, "restarts": 0, "world_size": 3, "ranks_port": PORT,
                "backoff_s": 0, "nodes": [], "abort": marker("forged plan")}
        result = self.forge(hosts, 2, [["await", "gculaunch/job/join/1/1", 30],
                                       ["set", "gculaunch/job/admit/1/1", json.dumps(plan)],
                                       ["probe"]])
        return hosts, node0, node1, result

    def test_forged_plan_is_refused_with_a_secret(self):
        hosts, node0, node1, result = self.forged_plan(self.secret_file)
        self.assertEqual(result["values"][0] != "", True, result)  # node 1 asked to join
        self.assertEqual(result["closed_at"], 2, result)  # the SET closed it (seen by the probe)
        node0.wait_for(lambda out, err: 'refused SET ["gculaunch/job/admit/1/1"]' in err,
                       timeout=20, what="the refusal")
        node2 = self.node(hosts, 2, 3, self.secret_file)
        codes = [j.wait(timeout=60) for j in (node0, node1, node2)]
        self.assertEqual(codes, [0, 0, 0], [node0.stderr, node1.stderr, node2.stderr])
        self.assertNotIn("forged plan", node1.stderr)

    def test_forged_plan_works_without_a_secret(self):
        hosts, node0, node1, result = self.forged_plan(None)
        self.assertIsNone(result["closed_at"], result)
        self.assertEqual(node1.wait(timeout=30), 42, node1.stderr)
        self.assertIn("forged plan", node1.stderr)

    # ------------------------------------------------------------------ wrong secrets

    def test_nodes_with_different_secrets_cannot_form_a_job(self):
        hosts = self.hosts(2)
        other = self.write_secret("other", "another-secret\n")
        node0 = self.node(hosts, 0, 2, self.secret_file)
        node1 = self.node(hosts, 1, 2, other)
        self.assertEqual(node1.wait(timeout=60), 2, node1.stderr)
        # Node 0 proves itself first (issue 43): its proof fails on node 1, which stops before
        # it sends a proof of its own, so node 0 has no wrong proof to log.
        lines = [l for l in node1.stderr.splitlines()
                 if "prove that it holds the job secret" in l]
        self.assertEqual(len(lines), 1, node1.stderr)
        self.assertIn("differs from this node's", lines[0])
        self.assertNotIn("proof of the job secret is wrong", node0.stderr)
        # A node without a secret is refused too, with its own line.
        node1b = self.node(hosts, 1, 2, None)
        self.assertEqual(node1b.wait(timeout=60), 2, node1b.stderr)
        self.assertIn("requires a job secret, but this node has none", node1b.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.work, "ready.0.0")))
        for j in (node0, node1, node1b):
            self.assertNotIn(SECRET, j.stdout + j.stderr)
            self.assertNotIn("another-secret", j.stdout + j.stderr)

    # ------------------------------------------------------------------ rejoin and elastic

    def test_a_node_that_comes_back_proves_the_secret_again(self):
        hosts = self.hosts(2)
        restarts = ["--max-restarts", "1"]
        node0 = self.node(hosts, 0, 2, self.secret_file, restarts)
        node1 = self.node(hosts, 1, 2, self.secret_file, restarts)
        for rank in range(2):
            self.wait_file("ready.0.%d" % rank, node0 if rank == 0 else node1)
        node1.proc.kill()  # its gculaunch dies; its guardian stops its rank
        node1.wait(timeout=30)
        back = self.node(hosts, 1, 2, self.secret_file, restarts)
        for rank in range(2):
            self.wait_file("ready.1.%d" % rank, node0 if rank == 0 else back)
        self.release()
        self.assertEqual([node0.wait(timeout=60), back.wait(timeout=60)], [0, 0],
                         [node0.stderr, back.stderr])
        self.assertNotIn("proof of the job secret", node0.stderr)

    def test_elastic_joins_prove_the_secret(self):
        hosts = self.hosts(3)
        elastic = ["--nnodes", "1:2", "--max-restarts", "0", "--rdzv-conf",
                   "last_call_timeout=1"]
        node0 = self.node(hosts, 0, 2, self.secret_file, elastic)
        self.wait_file("ready.0.0", node0)
        # A node with another secret is refused and the job runs on without it.
        other = self.write_secret("other", "another-secret\n")
        stranger = self.node(hosts, 2, 2, other, elastic, extra_env={"RANK": "1"})
        self.assertEqual(stranger.wait(timeout=60), 2, stranger.stderr)
        self.assertIn("failed to prove that it holds the job secret", stranger.stderr)
        node1 = self.node(hosts, 1, 2, self.secret_file, elastic)
        self.wait_file("ready.*.1", node1)  # admitted: the job re-formed with two nodes
        self.release()
        self.assertEqual([node0.wait(timeout=60), node1.wait(timeout=60)], [0, 0],
                         [node0.stderr, node1.stderr])

    # ------------------------------------------------------------------ --store-allow

    def test_store_allow_refuses_a_network_outside_it(self):
        hosts = self.hosts(3)
        allow = ["--store-allow", "%s,%s/32" % (hosts.addr(0), hosts.addr(1))]
        jobs = [self.node(hosts, i, 2, extra_args=allow) for i in range(2)]
        for rank in range(2):
            self.wait_file("ready.0.%d" % rank, jobs[rank])
        outside = self.forge(hosts, 2, [["get", "gculaunch/job/info"]])
        self.assertEqual(outside["closed_at"], 0, outside)
        jobs[0].wait_for(lambda out, err: "refusing connection from %s" % hosts.addr(2) in err
                         and "not in --store-allow" in err, timeout=20, what="the refusal")
        # A node inside the list may still read (and it joined: the job runs).
        inside = self.forge(hosts, 1, [["get", "gculaunch/job/info"]])
        self.assertIsNone(inside["closed_at"], inside)
        self.release()
        self.assertEqual([j.wait(timeout=60) for j in jobs], [0, 0], [j.stderr for j in jobs])

    def test_store_allow_bad_network_is_one_line(self):
        hosts = self.hosts(1)
        job = self.node(hosts, 0, 1, extra_args=["--store-allow", "198.18.0.0/40"])
        self.assertEqual(job.wait(timeout=30), 2, job.stderr)
        self.assertEqual(job.stderr.strip().splitlines(),
                         ["gculaunch: --store-allow '198.18.0.0/40' is not a network: the "
                          "prefix length must be 0 to 32 (fix: write networks as 10.0.0.0/8, "
                          "198.18.0.5 or fd00::/64)"])


if __name__ == "__main__":
    unittest.main()
