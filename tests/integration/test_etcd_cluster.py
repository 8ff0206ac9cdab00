"""Jobs on etcd set up as in production: a 3-member cluster that loses a member mid-job, TLS
with a CA made by the test, and authentication whose tokens expire several times during a
job (issue 16; docs/etcd.md "Integration tests").

Simulated hosts (gltest.SimulatedHosts): one network namespace per gculaunch node and one per
etcd member, Debian's etcd started by the test (gltest.EtcdCluster).  Each node runs
examples/ckpt_train.py with one real gloo rank; the final state must be the one simulate()
predicts.
"""
import json
import os
import subprocess
import time
import unittest

import gltest

STEPS = 40
EVERY = 5


class EtcdCluster(gltest.CheckpointJobCase):
    WORK_PREFIX = "gltest-etcdcl-"

    @classmethod
    def setUpClass(cls):
        cls.final_state = gltest.ckpt_example().simulate(STEPS)[-1]

    def node(self, hosts, host, endpoints, nnodes, conf, rdzv_id="job1", fail_rank=-1,
             fail_step=0, step_time=0.15, rdzv_timeout=30, train=True):
        args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", endpoints, "--rdzv-id", rdzv_id,
                "--rdzv-conf", conf, "--nnodes", str(nnodes), "--nproc-per-node", "1",
                "--device", "cpu", "--grace-period", "5", "--max-restarts", "3",
                "--rdzv-timeout", str(rdzv_timeout)]
        if train:
            args += ["--python", gltest.PYTHON, gltest.CKPT_EXAMPLE, self.ckpt, "--steps",
                     str(STEPS), "--ckpt-every", str(EVERY), "--step-time", str(step_time),
                     "--journal", self.journal, "--result", self.result, "--pg-timeout", "60"]
        else:
            args += ["--no-python", "/bin/true"]
        if fail_rank >= 0:
            args += ["--fail-rank", str(fail_rank), "--fail-step", str(fail_step)]
        job = gltest.Job(args, tag=self.tag, extra_env={"GLOO_SOCKET_IFNAME": "eth0"},
                         prefix=hosts.command_prefix(host))
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def last_step(self, attempt=0):
        steps = [r["step"] for recs in self.records().values() for r in recs
                 if r["attempt"] == attempt]
        return max(steps, default=0)

    def assert_finished(self, jobs, timeout=90):
        codes = [job.wait(timeout=timeout) for job in jobs]
        self.assertEqual(codes, [0] * len(jobs),
                         "\n".join("--- stderr:\n" + j.stderr[-4000:] for j in jobs))
        with open(self.result) as f:
            self.assertEqual(json.load(f)["state"], self.final_state)

    def assert_refused_at_once(self, job, endpoint, words, rdzv_timeout):
        """etcd refused the node's certificate or password: it stops with exit 2 and the
        reason, without waiting out its --rdzv-timeout (waiting would change nothing)."""
        began = time.monotonic()
        code = job.wait(timeout=rdzv_timeout + 30)
        took = time.monotonic() - began
        self.assertEqual(code, 2, job.stderr)
        self.assertLess(took, rdzv_timeout / 2, job.stderr)
        self.assertIn("etcd refused this node: ", job.stderr)
        lines = [ln for ln in job.stderr.splitlines() if endpoint in ln and
                 all(w in ln for w in words)]
        self.assertTrue(lines, "no line naming %s with %r:\n%s" % (endpoint, words,
                                                                    job.stderr[-3000:]))
        gltest.eprint("  exit %d after %.1f s: %s" % (code, took, lines[-1]))

    # ---------------------------------------------------------------- scenarios

    def test_a_member_killed_and_rank_failure_restart_once(self):
        """3 etcd members, 3 nodes, node k talking to member k first.  Member 1 is killed
        (SIGKILL) mid-job and rank 1 fails just after: one restart, node 1 fails over."""
        hosts = self.hosts(6)
        etcd = gltest.EtcdCluster(hosts, [3, 4, 5], self.work)
        self.addCleanup(etcd.close)
        fail_step = 16

        def endpoints(k):  # member k first, then the others in order
            return ",".join(etcd.endpoint((k + i) % 3) for i in range(3))

        jobs = [self.node(hosts, k, endpoints(k), 3, "lease_ttl=5,last_call_timeout=2",
                          fail_rank=1, fail_step=fail_step, step_time=0.2) for k in range(3)]
        self.wait_until(lambda: self.last_step() >= fail_step - 6, "step %d" % (fail_step - 6),
                        jobs, timeout=60)
        etcd.stop(1, hard=True)
        killed_at = self.last_step()
        self.assertLess(killed_at, fail_step, "the rank failed before the member was killed")
        self.assert_finished(jobs)
        self.assertEqual(self.worlds(), [(3, 0), (3, 1)])
        # Node 1 (whose first endpoint is the dead member) ran a rank in both attempts and ended
        # cleanly: it failed over to the other members.
        ranks_of_attempt1 = {rank for rank, recs in self.records().items()
                             for r in recs if r["attempt"] == 1}
        self.assertEqual(ranks_of_attempt1, {0, 1, 2})
        gltest.eprint("  member killed at step %d, rank failed at step %d" %
                      (killed_at, fail_step))

    def make_ca(self, server_ip):
        """A test CA, a server certificate for IP:server_ip and a client certificate."""
        d = os.path.join(self.work, "pki")
        os.makedirs(d)
        with open(os.path.join(d, "server.ext"), "w") as f:
            f.write("subjectAltName=IP:%s\nextendedKeyUsage=serverAuth,clientAuth\n" % server_ip)
        with open(os.path.join(d, "client.ext"), "w") as f:
            f.write("extendedKeyUsage=clientAuth\n")
        script = """set -euo pipefail
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key; }
key ca; openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=gltest-ca
signed() { key $1; openssl req -new -key $1.key -out $1.csr -subj /CN=$2
  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \\
    -extfile $1.ext -out $1.pem; }
signed server etcd; signed client gltest-client
"""
        out = subprocess.run(["bash", "-c", script], cwd=d, capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(out.returncode, 0, "openssl (Debian's, scripts/bootstrap.sh): " +
                         out.stderr)
        return {name: os.path.join(d, file) for name, file in
                [("ca", "ca.pem"), ("server", "server.pem"), ("server_key", "server.key"),
                 ("client", "client.pem"), ("client_key", "client.key")]}

    def test_b_tls_with_client_certificates(self):
        """etcd over https with --client-cert-auth: a 2-node job with the CA and a client
        certificate finishes; a node without the client certificate stops with one line
        naming the endpoint at once (exit 2), not at its --rdzv-timeout."""
        hosts = self.hosts(4)
        pki = self.make_ca(hosts.addr(2))
        etcd = gltest.EtcdCluster(hosts, [2], self.work, tls={
            "ca": pki["ca"], "cert": pki["server"], "key": pki["server_key"],
            "client_cert": pki["client"], "client_key": pki["client_key"],
            "client_cert_auth": True})
        self.addCleanup(etcd.close)
        conf = "protocol=https,cacert=%s,cert=%s,key=%s,lease_ttl=3" % (
            pki["ca"], pki["client"], pki["client_key"])
        jobs = [self.node(hosts, k, etcd.endpoint(0), 2, conf) for k in range(2)]
        stranger = self.node(hosts, 3, etcd.endpoint(0), 2,
                             "protocol=https,cacert=%s" % pki["ca"], rdzv_id="other",
                             rdzv_timeout=60, train=False)
        self.assert_refused_at_once(stranger, etcd.endpoint(0),
                                    ["bad certificate", "give the client certificate"], 60)
        self.assert_finished(jobs)
        self.assertEqual(etcd.etcdctl("get", "--prefix", "--keys-only", "/gculaunch/")
                         .stdout.strip(), "")

    def test_c_auth_tokens_expire_during_the_job(self):
        """etcd tokens that live 2 s, a user with readwrite on /gculaunch/: a 2-node job of
        about 8 s finishes; a wrong password stops at once with a clear line (exit 2)."""
        hosts = self.hosts(4)
        etcd = gltest.EtcdCluster(hosts, [2], self.work, auth_token_ttl=2)
        self.addCleanup(etcd.close)
        for cmd in (["user", "add", "root:rootpw"], ["user", "grant-role", "root", "root"],
                    ["role", "add", "trainer"],
                    ["role", "grant-permission", "trainer", "readwrite", "/gculaunch/",
                     "--prefix=true"],
                    ["user", "add", "job:jobpw"], ["user", "grant-role", "job", "trainer"],
                    ["auth", "enable"]):
            out = etcd.etcdctl(*cmd)
            self.assertEqual(out.returncode, 0, "etcdctl %s: %s" % (cmd, out.stderr))
        etcd.ctl_user = "root:rootpw"
        good = os.path.join(self.work, "password")
        bad = os.path.join(self.work, "wrong")
        with open(good, "w") as f:
            f.write("jobpw\n")
        with open(bad, "w") as f:
            f.write("not-it\n")
        conf = "user=job,password_file=%s,lease_ttl=3" % good
        began = time.monotonic()
        jobs = [self.node(hosts, k, etcd.endpoint(0), 2, conf, step_time=0.2)
                for k in range(2)]
        wrong = self.node(hosts, 3, etcd.endpoint(0), 2,
                          "user=job,password_file=%s" % bad, rdzv_id="other", rdzv_timeout=60,
                          train=False)
        self.assert_refused_at_once(wrong, etcd.endpoint(0), ["authentication failed",
                                    "check the etcd user name and password"], 60)
        self.assert_finished(jobs)
        took = time.monotonic() - began
        self.assertGreater(took, 3 * 2, "the job must outlive several 2 s tokens")
        self.assertEqual([w for w, _ in self.worlds()], [2])
        keys = etcd.etcdctl("get", "--prefix", "--keys-only", "/gculaunch/")
        self.assertEqual(keys.returncode, 0, keys.stderr)
        self.assertEqual(keys.stdout.strip(), "")
        gltest.eprint("  job with 2 s tokens took %.1f s" % took)


if __name__ == "__main__":
    unittest.main()
