"""The store's refusal at its connection cap names what the user can change (issue 37, item
4): in a launch the cap follows the open-file limit, so the line says to raise `ulimit -n`
and what it is now (a launch has no --max-connections); `gculaunch store` names its
--max-connections.  Node 0 of a job too large for its open-file limit says so before
any rank starts, with the limit to set (issue 46, item 3)."""
import os
import re
import resource
import signal
import socket
import unittest

import gltest


def raise_own_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need <= hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


class ConnectionCapHint(unittest.TestCase):
    def test_a_launch_names_ulimit_and_its_value(self):
        limit = 256
        raise_own_limit(4096)  # the test's own client sockets
        with gltest.TempDir() as tmp:
            release = os.path.join(tmp, "release")
            rank = gltest.write_script(
                tmp, "rank.sh",
                "#!/bin/sh\necho ready\n"
                "i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
                "exit 0\n" % release)
            port = gltest.free_port()

            def low_limit():
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

            conns = []
            try:
                with gltest.Job(["--nproc-per-node", "1", "--standalone", "--master-port",
                                 str(port), "--no-python", rank],
                                preexec_fn=low_limit) as job:
                    job.wait_for(lambda out, err: "ready" in out, what="the rank")
                    # Every connection takes a descriptor; the cap sits below `limit`, so
                    # `limit` connections are more than it admits.
                    for _ in range(limit):
                        conns.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                    job.wait_for(lambda out, err: "refusing connection" in err,
                                 what="the refusal at the cap")
                    open(release, "w").close()
                    self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                    err = job.stderr
            finally:
                for c in conns:
                    c.close()
        refusal = [line for line in err.splitlines() if "refusing connection" in line][0]
        self.assertRegex(refusal, r"refusing connection from 127\.0\.0\.1:\d+: (\d+) connections "
                                  r"are open, the limit is \1 \(fix: raise `ulimit -n` \(now "
                                  r"%d\)\)$" % limit)
        self.assertNotIn("--max-connections", err)
        self.assertNotIn("may open up to", err)  # one rank fits: no warning at start

    def test_node_0_says_up_front_what_limit_the_job_needs(self):
        # Issue 46: node 0 of a job whose ranks cannot all connect under its open-file limit
        # says so before any rank starts, with the number to set.  200 nodes of 1 rank open
        # up to 2 * 200 + 200 (+ a margin) connections; 256 descriptors hold far fewer.
        limit = 256

        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        with gltest.Job(["--nnodes", "200", "--node-rank", "0", "--nproc-per-node", "1",
                         "--master-addr", "127.0.0.1", "--master-port", str(gltest.free_port()),
                         "--no-python", "true"], preexec_fn=low_limit) as job:
            job.wait_for(lambda out, err: "may open up to" in err, timeout=30,
                         what="the open-file warning")
            job.signal(signal.SIGTERM)
            self.assertEqual(job.wait(timeout=30), 128 + signal.SIGTERM, job.stderr)
            err = job.stderr
        line = [l for l in err.splitlines() if "may open up to" in l][0]
        found = re.search(r"the store can hold (\d+) connections under the open-file limit 256, "
                          r"and a job of 200 ranks on 200 nodes may open up to (\d+) \(fix: "
                          r"raise the hard open-file limit of node 0 to at least (\d+): "
                          r"`ulimit -Hn \3` before gculaunch", line)
        self.assertIsNotNone(found, line)
        cap, need, target = (int(g) for g in found.groups())
        self.assertLess(cap, limit)
        self.assertGreaterEqual(need, 2 * 200 + 200)
        self.assertEqual(target, limit + need - cap, line)
        self.assertEqual(err.count("may open up to"), 1, err)

    def test_the_store_command_names_max_connections(self):
        tag = gltest.new_tag()
        store = gltest.StoreProcess(tag, args=["--max-connections", "2"], log_level="info")
        try:
            admitted = [socket.create_connection(("127.0.0.1", store.port), timeout=10)
                        for _ in range(2)]
            for c in admitted:
                c.sendall(b"\x06")  # v1 GETNUMKEYS: answered once the store took it
                self.assertEqual(len(c.recv(8)), 8)
            with socket.create_connection(("127.0.0.1", store.port), timeout=10) as third:
                self.assertEqual(third.recv(8), b"")  # closed at once
            self.assertTrue(store.wait_log_count("refusing connection", 1), store.log_text())
            for c in admitted:
                c.close()
        finally:
            self.assertEqual(store.stop(signal.SIGTERM), 0, store.log_text())
            gltest.kill_tagged(tag)
        refusal = [line for line in store.log_lines() if "refusing connection" in line][0]
        self.assertRegex(refusal, r"refusing connection from 127\.0\.0\.1:\d+: 2 connections are "
                                  r"open, the limit is 2 \(fix: raise --max-connections\)$")


if __name__ == "__main__":
    unittest.main()
