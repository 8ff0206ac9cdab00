"""`gculaunch check --rdzv-backend etcd` against Debian's etcd, started here on 127.0.0.1 with
free ports (its own process group, data in a temporary directory, always stopped), and the
checks themselves (an unreachable endpoint, one endpoint down of two, user and password), a
one-node job on etcd that removes its keys, and the command line of the etcd backend: `none`
or a missing --rdzv-id refused, and the dry run's etcd line (without the password)."""
import base64
import json
import os
import signal
import subprocess
import time
import unittest
import urllib.request

import gltest

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


class Etcd:
    """One etcd member on 127.0.0.1 (free client and peer ports)."""

    def __init__(self, tmp):
        self.port = gltest.free_port()
        peer = gltest.free_port()
        self.endpoint = "127.0.0.1:%d" % self.port
        client = "http://" + self.endpoint
        peer_url = "http://127.0.0.1:%d" % peer
        self.log = open(os.path.join(tmp, "etcd-%d.log" % self.port), "w")
        self.proc = subprocess.Popen(
            [ETCD, "--name=check", "--data-dir=" + os.path.join(tmp, "etcd-%d" % self.port),
             "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
             "--listen-peer-urls=" + peer_url, "--initial-advertise-peer-urls=" + peer_url,
             "--initial-cluster=check=" + peer_url],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(client + "/version", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("etcd did not start on %s" % self.endpoint)
            time.sleep(0.2)

    def ctl(self, *args, user=None):
        cmd = [ETCDCTL, "--endpoints", self.endpoint]
        if user:
            cmd += ["--user", user]
        done = subprocess.run(cmd + list(args), env=dict(os.environ, ETCDCTL_API="3"),
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise AssertionError("etcdctl %s: %s" % (" ".join(args), done.stderr))
        return done.stdout

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log.close()


def gculaunch(args, timeout=120):
    return gltest.run([gltest.require_binary()] + args,
                      gltest.tagged_env(gltest.new_tag()), timeout=timeout)


def check(endpoint, *extra, rdzv_id="job-7"):
    args = ["check", "--device", "cpu", "--rdzv-backend", "etcd", "--rdzv-endpoint", endpoint]
    if rdzv_id:
        args += ["--rdzv-id", rdzv_id]
    return gculaunch(args + list(extra))


def lines(out, name):
    return [text for text in out.splitlines()
            if len(text.split()) >= 2 and text.split()[1] == name
            and text.split()[0] in ("ok", "warn", "fail")]


class CheckEtcdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = gltest.TempDir("gltest-etcd-")
        cls.etcd = Etcd(cls.tmp.path)

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()
        cls.tmp.__exit__(None, None, None)

    def test_check_passes_and_leaves_no_key(self):
        done = check(self.etcd.endpoint)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        endpoint = lines(done.stdout, "etcd-endpoint")
        self.assertEqual(len(endpoint), 1, done.stdout)
        self.assertRegex(endpoint[0], r"^ok +etcd-endpoint +127\.0\.0\.1:%d answers: etcd 3\."
                         % self.etcd.port)
        write = lines(done.stdout, "etcd-write")
        self.assertEqual(len(write), 1, done.stdout)
        self.assertIn("/gculaunch/job-7/check/", write[0])
        self.assertTrue(write[0].startswith("ok"), write[0])
        self.assertEqual(lines(done.stdout, "master-port"), [], "no store to check with etcd")
        self.assertEqual(self.etcd.ctl("get", "--prefix", "/gculaunch/"), "")

    def test_unreachable_endpoints_fail_fast_naming_each(self):
        closed = [gltest.free_port(), gltest.free_port()]
        endpoints = ",".join("127.0.0.1:%d" % port for port in closed)
        started = time.monotonic()
        done = check(endpoints)
        elapsed = time.monotonic() - started
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        failed = lines(done.stdout, "etcd-endpoint")
        self.assertEqual(len(failed), 2, done.stdout)
        for port, text in zip(closed, failed):
            self.assertTrue(text.startswith("fail"), text)
            self.assertIn("127.0.0.1:%d" % port, text)
            self.assertIn("refused", text)
        summary = lines(done.stdout, "etcd")
        self.assertEqual(len(summary), 1, done.stdout)
        self.assertIn("none of the 2 etcd endpoints answered", summary[0])
        self.assertIn("fix:", done.stdout)
        self.assertEqual(lines(done.stdout, "etcd-write"), [])
        self.assertLess(elapsed, 60, "the check took %.1f s" % elapsed)

    def test_one_endpoint_down_of_two_still_writes(self):
        down = "127.0.0.1:%d" % gltest.free_port()
        done = check(down + "," + self.etcd.endpoint)
        self.assertEqual(done.returncode, 1, done.stdout)  # the dead endpoint is a failure
        self.assertTrue(lines(done.stdout, "etcd-write")[0].startswith("ok"), done.stdout)

    def test_one_node_job_on_etcd_runs_and_removes_its_keys(self):
        """Two gloo ranks whose store is hosted by the job's leader (this gculaunch, on a free
        loopback port, never 29500); afterwards the job's keys are gone."""
        with gltest.TempDir() as work:
            script = os.path.join(work, "sum.py")
            with open(script, "w") as f:
                f.write("import torch, torch.distributed as dist\n"
                        "dist.init_process_group('gloo')\n"
                        "t = torch.ones(1)\n"
                        "dist.all_reduce(t)\n"
                        "print('sum %d' % int(t.item()), flush=True)\n")
            done = gculaunch(["--rdzv-backend", "etcd", "--rdzv-endpoint", self.etcd.endpoint,
                              "--rdzv-id", "job-run", "--nnodes", "1", "--nproc-per-node", "2",
                              "--master-port", str(gltest.free_port()), "--device", "cpu",
                              "--python", gltest.PYTHON, script])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.count("sum 2"), 2, done.stdout)
        self.assertIn("this node leads the job on etcd (term 1)", done.stderr)
        query = json.dumps({"key": base64.b64encode(b"/gculaunch/job-run/").decode(),
                            "range_end": base64.b64encode(b"/gculaunch/job-run0").decode(),
                            "count_only": True}).encode()
        with urllib.request.urlopen(urllib.request.Request(
                "http://%s/v3/kv/range" % self.etcd.endpoint, data=query), timeout=10) as r:
            answer = json.loads(r.read())
        self.assertEqual(int(answer.get("count", "0")), 0, answer)  # no key left behind

    def test_none_and_missing_id_refused(self):
        for extra in (["--rdzv-id", "none"], []):
            done = gculaunch(["--rdzv-backend", "etcd-v2", "--rdzv-endpoint",
                              self.etcd.endpoint, "--device", "cpu", "--dry-run"] + extra +
                             ["x.py"])
            self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
            self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
            self.assertIn("--rdzv-id $JOB_NAME", done.stderr)

    def test_dry_run_shows_settings_without_password(self):
        done = gculaunch(["--rdzv-backend", "etcd", "--rdzv-endpoint",
                          "10.0.0.5:2379,http://10.0.0.6", "--rdzv-id", "job-7", "--rdzv-conf",
                          "etcd_prefix=/train/,user=alice,password=s3cret,lease_ttl=15",
                          "--nnodes", "2", "--device", "cpu", "--dry-run", "x.py"])
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("etcd:    endpoints 10.0.0.5:2379,10.0.0.6:2379, keys /train/job-7/, "
                      "lease TTL 15 s", done.stdout)
        self.assertIn("user alice (password given)", done.stdout)
        self.assertNotIn("s3cret", done.stdout)

    def test_auth_right_and_wrong_password(self):
        etcd = Etcd(self.tmp.path)
        try:
            etcd.ctl("user", "add", "root:rootpw", "--interactive=false")
            etcd.ctl("user", "add", "trainer:goodpw", "--interactive=false")
            etcd.ctl("role", "add", "jobs")
            etcd.ctl("role", "grant-permission", "--prefix=true", "jobs", "readwrite",
                     "/gculaunch/job-7/")
            etcd.ctl("user", "grant-role", "trainer", "jobs")
            etcd.ctl("auth", "enable")
            good = check(etcd.endpoint, "--rdzv-conf", "user=trainer,password=goodpw")
            self.assertEqual(good.returncode, 0, good.stdout + good.stderr)
            self.assertTrue(lines(good.stdout, "etcd-auth")[0].startswith("ok"), good.stdout)
            self.assertTrue(lines(good.stdout, "etcd-write")[0].startswith("ok"), good.stdout)

            bad = check(etcd.endpoint, "--rdzv-conf", "username=trainer,password=wrong")
            self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
            auth = lines(bad.stdout, "etcd-auth")
            self.assertEqual(len(auth), 1, bad.stdout)
            self.assertTrue(auth[0].startswith("fail"), auth[0])
            self.assertIn("refused user 'trainer'", auth[0])
            self.assertIn("its right password", bad.stdout)
            self.assertEqual(lines(bad.stdout, "etcd-write"), [])

            # Another job's prefix: the role does not cover it.
            other = check(etcd.endpoint, "--rdzv-conf", "user=trainer,password=goodpw",
                          rdzv_id="job-8")
            self.assertEqual(other.returncode, 1, other.stdout)
            self.assertIn("permission denied", other.stdout)
        finally:
            etcd.stop()


if __name__ == "__main__":
    unittest.main()
