"""Test cases shared by test_store_torch113.py and test_store_torch26.py: real
torch.distributed.TCPStore clients of one torch version against `gculaunch store`.

A subclass sets PYTHON (the interpreter command) and TORCH_MAJOR, and THROUGH_PROXY to run
every case through the store proxy (`gculaunch store --upstream`, what --store-proxy runs on
every node but node 0).  Every test starts its own store (`--host 127.0.0.1 --port 0`,
debug log) and tags every process it starts; cleanup stops them all.  Where a test needs a WAIT to be parked in the
server before it acts, it waits for the store's own debug line "... parked" (an
event from the server's log, not a sleep).
"""
import os
import signal
import socket
import struct
import subprocess
import time

import gltest
from gltest import hexb, unhex


class ProxiedStore:
    """`gculaunch store` behind `gculaunch store --upstream` (the store proxy that
    --store-proxy runs on every node but node 0): the clients see the proxy's host, port and
    pid; the logs are both processes' (the store logs parked WAITs, the proxy what it closes
    itself)."""

    def __init__(self, tag):
        self.upstream = gltest.StoreProcess(tag)
        try:
            self.proxy = gltest.StoreProcess(
                tag, ["--upstream", "%s:%d" % (self.upstream.host, self.upstream.port)])
        except Exception:
            self.upstream.stop()
            raise
        self.host, self.port, self.proc = self.proxy.host, self.proxy.port, self.proxy.proc
        self.pid = self.proxy.pid
        ok = self.upstream.wait_log(lambda lines: any("store proxy's upstream" in l
                                                     for l in lines))
        if not ok:
            raise AssertionError("the proxy never became the store's upstream:\n"
                                 + self.log_text())

    def log_text(self):
        return ("--- proxy:\n" + self.proxy.log_text() + "\n--- store:\n"
                + self.upstream.log_text())

    def wait_log(self, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            if self.proxy.wait_log(predicate, min(left, 0.2)) or \
                    self.upstream.wait_log(predicate, 0):
                return True
            if left == 0:
                return False

    def wait_log_count(self, text, count, timeout=30):
        return self.upstream.wait_log_count(text, count, timeout)

    def stop(self):
        """Stops the proxy, then the store; the first non-zero exit code, else 0."""
        rcs = [self.proxy.stop(), self.upstream.stop()]
        return next((rc for rc in rcs if rc != 0), 0)


class StoreCases:
    PYTHON = None       # interpreter command, e.g. ["/usr/bin/python3"]
    TORCH_MAJOR = None  # 1 or 2
    EXTRA_ENV = {}
    THROUGH_PROXY = False  # the clients reach the store through `gculaunch store --upstream`

    def setUp(self):
        self.tag = gltest.new_tag()
        self.repls = []
        self.store = (ProxiedStore(self.tag) if self.THROUGH_PROXY
                      else gltest.StoreProcess(self.tag))
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        for r in self.repls:
            r.close()
        rc = self.store.stop()
        gltest.kill_tagged(self.tag)
        left = gltest.wait_no_tagged(self.tag, 10)
        self.assertEqual(left, [], "processes left behind")
        self.assertEqual(rc, 0, "gculaunch store did not exit 0 on SIGTERM:\n"
                         + self.store.log_text()[-3000:])

    def repl(self):
        r = gltest.StoreRepl(self.PYTHON, self.tag, self.store.host, self.store.port,
                             self.EXTRA_ENV)
        self.repls.append(r)
        version = r.run({"cmd": "version"}, timeout=120)
        self.assertTrue(version["ok"], version)
        self.assertTrue(version["result"].startswith("%d." % self.TORCH_MAJOR), version)
        return r

    def raw_socket(self):
        s = socket.create_connection((self.store.host, self.store.port), timeout=20)
        self.addCleanup(s.close)
        return s

    def parked(self, count):
        ok = self.store.wait_log_count(" parked", count)
        self.assertTrue(ok, "the store never logged %d parked WAITs:\n%s"
                        % (count, self.store.log_text()[-3000:]))

    # ---- every operation of the Python API ----

    def test_every_store_operation(self):
        r = self.repl()
        r.open("a", world_size=2)  # the constructor ADDs init/
        r.open("b")
        r.call("a", "set", "key1", "value1")
        r.call("a", "set", "bin", hexb(bytes(range(6))))
        r.call("a", "set", "empty", "")
        self.assertEqual(unhex(r.call("a", "get", "key1")), b"value1")
        self.assertEqual(unhex(r.call("b", "get", "bin")), bytes(range(6)))
        self.assertEqual(unhex(r.call("a", "get", "empty")), b"")
        self.assertEqual(r.call("a", "add", "counter", 5), 5)
        self.assertEqual(r.call("b", "add", "counter", 3), 8)
        self.assertEqual(r.call("a", "add", "counter", -10), -2)
        self.assertEqual(r.call("a", "add", "counter", 0), -2)
        self.assertEqual(unhex(r.call("a", "get", "counter")), b"-2")
        # COMPARE_SET, the four cases.
        self.assertEqual(unhex(r.call("a", "compare_set", "key1", "value1", "value2")), b"value2")
        self.assertEqual(unhex(r.call("a", "compare_set", "key1", "wrong", "value3")), b"value2")
        self.assertEqual(unhex(r.call("a", "compare_set", "cs_new", "", "created")), b"created")
        self.assertEqual(unhex(r.call("a", "compare_set", "cs_missing", "x", "y")), b"x")
        r.call("a", "wait", ["key1", "counter"])
        r.call("a", "wait", ["key1"], {"seconds": 1})
        r.call("a", "wait", [])
        # init/, key1, bin, empty, counter, cs_new
        self.assertEqual(r.call("a", "num_keys"), 6)
        self.assertIs(r.call("a", "delete_key", "key1"), True)
        self.assertIs(r.call("a", "delete_key", "key1"), False)
        self.assertEqual(r.call("b", "num_keys"), 5)
        r.call("a", "set_timeout", {"seconds": 7})
        self.assertEqual(unhex(r.call("a", "get", "counter")), b"-2")
        if self.TORCH_MAJOR >= 2:
            r.call("a", "append", "app", "abc")
            r.call("a", "append", "app", "def")
            self.assertEqual(unhex(r.call("b", "get", "app")), b"abcdef")
            r.call("a", "multi_set", ["m1", "m2"], ["one", "two"])
            self.assertEqual([unhex(v) for v in r.call("a", "multi_get", ["m1", "m2", "app"])],
                             [b"one", b"two", b"abcdef"])
            self.assertEqual(r.call("a", "multi_get", []), [])
            self.assertIs(r.call("a", "check", ["m1", "counter"]), True)
            self.assertIs(r.call("a", "check", ["m1", "absent"]), False)
            self.assertIs(r.call("a", "check", []), True)
            self.assertEqual(r.call("a", "num_keys"), 8)
        # Every client request was served without closing anything.
        self.assertNotIn("closing connection", self.store.log_text())

    # ---- timeouts and the 1.x stale-WAIT problem ----

    def test_wait_timeout_then_correct_replies(self):
        r = self.repl()
        r.open("b")
        r.open("c")
        res = r.try_call("c", "wait", ["never"], {"seconds": 1})
        self.assertFalse(res["ok"], res)
        self.assertRegex(res["error"], "(?i)timeout")
        # The timed-out client keeps getting correct replies.  With torch 1.13's own server
        # the STOP_WAITING byte for the abandoned WAIT, sent once 'never' is set, would be
        # read as the first byte of a later reply (num_keys() returning 256 instead of 1):
        # this server drops a WAIT as soon as a new request shows it was abandoned.
        self.assertEqual(r.call("c", "num_keys"), 0)
        r.call("b", "set", "never", "now")
        self.assertEqual(r.call("c", "num_keys"), 1)
        self.assertEqual(r.call("c", "num_keys"), 1)
        self.assertEqual(unhex(r.call("c", "get", "never")), b"now")
        # get() of a key that never comes: a client-side timeout too.
        r.call("c", "set_timeout", {"seconds": 1})
        res = r.try_call("c", "get", "missing")
        self.assertFalse(res["ok"], res)
        self.assertEqual(r.call("c", "num_keys"), 1)
        self.assertEqual(unhex(r.call("c", "get", "never")), b"now")

    def test_abandoned_wait_woken_before_the_next_request(self):
        # The key arrives after the client gave up but before its next request.
        r = self.repl()
        r.open("b")
        r.open("c")
        res = r.try_call("c", "wait", ["late"], {"seconds": 1})
        self.assertFalse(res["ok"], res)
        r.call("b", "set", "late", "x")
        r.call("b", "set", "other", "y")
        n = r.call("c", "num_keys")
        if self.TORCH_MAJOR >= 2:
            self.assertEqual(n, 2)  # CANCEL_WAIT kept the 2.x client in step
        else:
            # Known limit for 1.x clients, which have no CANCEL_WAIT: the WAIT was still
            # parked when 'late' was set, so its STOP_WAITING byte went out before the
            # client's next request could show the WAIT was abandoned, and the client reads
            # it as the first byte of the next reply: 00 02 00.. = 512
            # (docs/tcpstore-protocol.md section 6.2).
            self.assertEqual(n, 2 << 8)

    # ---- waits and wake-ups across clients ----

    def test_multi_client_wait_and_wake(self):
        r = self.repl()
        for name in ("w1", "w2", "w3", "setter"):
            r.open(name)
        # Three clients wait for one key; one SET wakes them all.
        ids = [r.call_async(name, "wait", ["go"]) for name in ("w1", "w2", "w3")]
        self.parked(3)
        r.call("setter", "set", "go", "1")
        for i in ids:
            res = r.result(i, timeout=30)
            self.assertTrue(res["ok"], res)
        # A two-key wait returns after the second key only.
        i = r.call_async("w1", "wait", ["k1", "k2"])
        self.parked(4)
        r.call("setter", "set", "k1", "1")
        r.call("setter", "set", "k2", "2")
        self.assertTrue(r.result(i, 30)["ok"])
        # Woken by ADD.
        i = r.call_async("w2", "wait", ["via_add"])
        self.parked(5)
        self.assertEqual(r.call("setter", "add", "via_add", 1), 1)
        self.assertTrue(r.result(i, 30)["ok"])
        # A blocking get() (WAIT, then GET).
        i = r.call_async("w3", "get", "late")
        self.parked(6)
        r.call("setter", "set", "late", "arrived")
        res = r.result(i, 30)
        self.assertTrue(res["ok"], res)
        self.assertEqual(unhex(res["result"]), b"arrived")
        # Woken by COMPARE_SET creating the key (the libuv server's behaviour).
        i = r.call_async("w1", "wait", ["via_cs"])
        self.parked(7)
        self.assertEqual(unhex(r.call("setter", "compare_set", "via_cs", "", "x")), b"x")
        self.assertTrue(r.result(i, 30)["ok"])
        parked = 7
        if self.TORCH_MAJOR >= 2:
            for writer in (("append", "via_append", "x"),
                           ("multi_set", ["via_mset"], ["x"])):
                i = r.call_async("w2", "wait", [writer[1] if isinstance(writer[1], str)
                                                else writer[1][0]])
                parked += 1
                self.parked(parked)
                r.call("setter", *writer)
                self.assertTrue(r.result(i, 30)["ok"])

    # ---- hostile bytes ----

    def test_garbage_does_not_disturb_other_clients(self):
        r = self.repl()
        r.open("waiter")
        r.open("setter")
        i = r.call_async("waiter", "wait", ["after_garbage"])
        self.parked(1)
        garbage = [
            (b"\x09\x09\x00\x00\x00\x00\x00\x00\x00/whatever", "unknown query code 0x09"),
            (b"\x02" + b"\xff" * 8, "GET key length 18446744073709551615 exceeds the limit"),
            (b"\x00\xce\xf7\x85\x3c\x00\xce\xf7\x85\x3c", "VALIDATE is only allowed"),
            (bytes(range(256)) * 4, "malformed input"),
        ]
        for data, reason in garbage:
            s = self.raw_socket()
            peer = "127.0.0.1:%d" % s.getsockname()[1]
            s.sendall(data)
            self.assertEqual(s.recv(1), b"", "the server should close a garbage connection")
            # "closing connection N (peer)", or the proxy's "closing rank connection N (peer)"
            ok = self.store.wait_log(lambda lines: any(
                "closing" in l and peer in l and reason in l for l in lines))
            self.assertTrue(ok, "no log line for %s with %r:\n%s"
                            % (peer, reason, self.store.log_text()[-2000:]))
        self.assertIsNone(self.store.proc.poll(), "the store died")
        r.call("setter", "set", "after_garbage", "1")
        res = r.result(i, 30)
        self.assertTrue(res["ok"], res)
        self.assertEqual(r.call("setter", "num_keys"), 1)

    # ---- a real gloo job through the agent store ----

    def test_gloo_three_ranks_through_the_agent_store(self):
        world = 3
        script = os.path.join(gltest.SOURCE_DIR, "examples", "allreduce.py")
        with gltest.TempDir() as tmp:
            env = {
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(self.store.port),
                "WORLD_SIZE": str(world),
                "LOCAL_WORLD_SIZE": str(world),
                "TORCHELASTIC_USE_AGENT_STORE": "True",
                "TORCHELASTIC_RESTART_COUNT": "0",
                "GLOO_SOCKET_IFNAME": "lo",
            }
            if self.TORCH_MAJOR >= 2:
                gltest.write_no_libuv_sitecustomize(tmp)
                env.update({"PYTHONPATH": tmp, "GLTEST_TCPSTORE_NO_LIBUV": "1",
                            "USE_LIBUV": "0"})
            env.update(self.EXTRA_ENV)
            ranks = []
            for rank in range(world):
                e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
                ranks.append(subprocess.Popen(
                    list(self.PYTHON) + [script], env=gltest.tagged_env(self.tag, e),
                    cwd=os.path.realpath(os.path.dirname(script)), stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                    start_new_session=True))
            outputs = []
            for p in ranks:
                try:
                    out, err = p.communicate(timeout=240)
                except subprocess.TimeoutExpired:
                    gltest.kill_tagged(self.tag)
                    out, err = p.communicate()
                outputs.append((p.returncode, out, err))
        for rank, (rc, out, err) in enumerate(outputs):
            self.assertEqual(rc, 0, "rank %d failed:\n%s\n%s\nstore log:\n%s"
                             % (rank, out, err[-3000:], self.store.log_text()[-3000:]))
            self.assertIn("all_reduce sum 6 (expected 6) ok", out)
        # Every rank was a client of this store: each did ADD init/ +1 on it.
        s = self.raw_socket()
        s.sendall(b"\x03" + struct.pack("<Q", 5) + b"init/" + struct.pack("<q", 0))
        self.assertEqual(struct.unpack("<q", self._recv_exact(s, 8))[0], world)
        # The ranks' rendezvous keys are in the store.
        r = self.repl()
        r.open("check")
        # (TCPStore puts '/' in front: these are //worker/... and /default_pg/... on the wire)
        key = ("/worker/attempt_0/default_pg/0/0/0" if self.TORCH_MAJOR == 1
               else "default_pg/0//cpu//0/0")
        self.assertGreater(len(unhex(r.call("check", "get", key))), 16)
        # And the listening socket on MASTER_PORT is the store's, not a rank's.
        self.assertEqual(gltest.listening_socket_owner(self.store.port), [self.store.pid])

    @staticmethod
    def _recv_exact(s, n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                raise AssertionError("connection closed after %d of %d bytes" % (len(data), n))
            data += chunk
        return data
