"""`gculaunch store` under clients that try to exhaust it (issue 26): every attack of
docs/security.md's store section, each against a fresh store on a kernel-chosen loopback
port, asserting on behaviour only: the peak memory of the store (VmHWM in /proc), which
connection was closed, and that a well-behaved client is still answered.

  * a MULTI_GET naming one large value many times shares the value: no copy per name; a
    reply past --max-queued closes that connection;
  * a watcher that never reads is closed once its events pass --max-queued;
  * GETs of a large value on connections that never read cost one copy of the value, not
    one per connection;
  * partial frames on many connections are bounded by --max-buffered together;
  * APPEND cannot grow a value past --max-value-size;
  * a handled request's keys and values are not held until the connection's next request;
  * MULTI_GET names at most 131072 keys, as the libuv server accepts;
  * garbage connections cost a few warning lines and one summary, not a line each;
  * a MULTI_GET of 10 000 ranks' keys is served whole under the default limits;
  * a launch's --store-max-queued and --store-max-buffered reach its store."""
import fcntl
import os
import socket
import struct
import time
import unittest

import gltest

MiB = 1 << 20
SIOCOUTQ = 0x5411  # bytes not yet acknowledged by the peer (linux/sockios.h)


def blob(data):
    return struct.pack("<Q", len(data)) + data


def v2_connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))  # VALIDATE
    return s


def v2_set(s, key, value):
    s.sendall(b"\x01" + blob(key) + blob(value))


def v2_multi_get(s, keys):
    s.sendall(b"\x0a" + struct.pack("<Q", len(keys)) + b"".join(blob(k) for k in keys))


def recv_exact(s, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("connection closed after %d of %d bytes" % (got, n))
        got += k
    return bytes(buf)


def closed_by_peer(s, timeout=30):
    """True once the server closed `s` (reads until EOF or reset; bounded)."""
    s.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not s.recv(1 << 20):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def vm_hwm_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("no VmHWM for pid %d" % pid)


def legit_round_trip(port):
    """A well-behaved torch 2.x client: SET then GET a small value; returns the value."""
    with v2_connect(port) as s:
        v2_set(s, b"/legit", b"still here")
        s.sendall(b"\x03" + blob(b"/legit"))
        n = struct.unpack("<Q", recv_exact(s, 8))[0]
        return recv_exact(s, n)


def wait_until(predicate, timeout=30, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class StoreBounds(unittest.TestCase):
    def setUp(self):
        self.tag = gltest.new_tag()
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        gltest.kill_tagged(self.tag)
        self.assertEqual(gltest.wait_no_tagged(self.tag, 10), [])

    def start(self, *args):
        store = gltest.StoreProcess(self.tag, args=args, log_level="info")
        self.addCleanup(store.stop)
        return store

    def assert_closed_for(self, store, text):
        """Waits (bounded) for a "closing connection" line containing `text`."""
        self.assertTrue(store.wait_log(lambda lines: any(
            "closing connection" in l and text in l for l in lines), timeout=30),
            store.log_text())

    def closing_lines(self, store):
        return [l for l in store.log_lines()
                if "closing connection" in l and "were not logged one by one" not in l]

    def test_multi_get_shares_one_value(self):
        store = self.start()
        value = os.urandom(512 << 10)
        with v2_connect(store.port) as s:
            v2_set(s, b"/k", value)
            v2_multi_get(s, [b"/k"] * 400)  # 200 MiB of reply, one 512 KiB value
            for i in range(400):
                n = struct.unpack("<Q", recv_exact(s, 8))[0]
                self.assertEqual(n, len(value), i)
                got = recv_exact(s, n)
                if i in (0, 399):
                    self.assertEqual(got, value)
        self.assertLess(vm_hwm_mib(store.pid), 96, store.log_text())
        self.assertEqual(legit_round_trip(store.port), b"still here")

    def test_multi_get_reply_past_the_queue_bound_closes_it(self):
        store = self.start()
        with v2_connect(store.port) as s:
            v2_set(s, b"/k", b"v" * (512 << 10))
            v2_multi_get(s, [b"/k"] * 2000)  # 1 GiB of reply for 22 KB of request
            self.assertTrue(closed_by_peer(s), store.log_text())
        self.assertEqual(legit_round_trip(store.port), b"still here")
        self.assertLess(vm_hwm_mib(store.pid), 96, store.log_text())
        self.assert_closed_for(store, "bytes wait to be sent to it")

    def test_watcher_that_never_reads_is_closed(self):
        store = self.start()
        watcher = socket.create_connection(("127.0.0.1", store.port), timeout=30)
        self.addCleanup(watcher.close)
        watcher.sendall(b"\x07" + blob(b"/w"))  # v1 WATCH_KEY
        self.assertEqual(recv_exact(watcher, 1), b"\x03")
        with socket.create_connection(("127.0.0.1", store.port), timeout=60) as setter:
            for i in range(40):
                setter.sendall(b"\x00" + blob(b"/w") + blob(bytes([65 + i % 26]) * (8 * MiB)))
            setter.sendall(b"\x06")  # GETNUMKEYS: answered once every SET was handled
            self.assertEqual(struct.unpack("<q", recv_exact(setter, 8))[0], 1)
        self.assertTrue(closed_by_peer(watcher), store.log_text())
        self.assertLess(vm_hwm_mib(store.pid), 448, store.log_text())
        self.assertEqual(legit_round_trip(store.port), b"still here")
        self.assert_closed_for(store, "bytes wait to be sent to it")
        self.assertEqual(len(self.closing_lines(store)), 1, store.log_text())

    def test_gets_never_read_share_the_value(self):
        store = self.start()
        with v2_connect(store.port) as s:
            v2_set(s, b"/big", b"b" * (64 * MiB))
            s.sendall(b"\x07")  # GETNUMKEYS: the SET was handled
            recv_exact(s, 8)
        readers = []
        for _ in range(16):
            r = v2_connect(store.port)
            r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            self.addCleanup(r.close)
            r.sendall((b"\x03" + blob(b"/big")) * 4)
            readers.append(r)

        def replies_started():
            # Bytes waiting in a reader's receive queue: the server handled its GET.
            return all(struct.unpack("i", fcntl.ioctl(r.fileno(), 0x541B, b"\0" * 4))[0] > 0
                       for r in readers)

        self.assertTrue(wait_until(replies_started), store.log_text())
        self.assertEqual(legit_round_trip(store.port), b"still here")
        self.assertLess(vm_hwm_mib(store.pid), 256, store.log_text())

    def test_partial_frames_are_bounded_together(self):
        store = self.start()
        senders = []
        for i in range(16):
            s = socket.create_connection(("127.0.0.1", store.port), timeout=30)
            self.addCleanup(s.close)
            head = b"\x00" + blob(b"/p%d" % i) + struct.pack("<Q", 64 * MiB)
            try:
                s.sendall(head + b"p" * (64 * MiB - 1))  # all but the last byte
            except OSError:
                pass  # shed while sending
            senders.append(s)

        def all_sent():
            try:
                return all(struct.unpack("i", fcntl.ioctl(s.fileno(), SIOCOUTQ, b"\0" * 4))[0] == 0
                           for s in senders)
            except OSError:
                return True

        wait_until(all_sent)
        self.assertEqual(legit_round_trip(store.port), b"still here")
        self.assertLess(vm_hwm_mib(store.pid), 480, store.log_text())
        self.assert_closed_for(store, "--max-buffered")

    def test_append_keeps_the_value_limit(self):
        store = self.start("--max-value-size", "1M")
        with v2_connect(store.port) as s:
            for _ in range(2):
                s.sendall(b"\x09" + blob(b"/app") + blob(b"a" * (600 << 10)))
            self.assertTrue(closed_by_peer(s), store.log_text())
        with v2_connect(store.port) as s:
            s.sendall(b"\x03" + blob(b"/app"))
            self.assertEqual(struct.unpack("<Q", recv_exact(s, 8))[0], 600 << 10)
        self.assert_closed_for(store, "past the limit")

    def test_garbage_connections_cost_a_few_lines_and_a_summary(self):
        store = self.start()
        for _ in range(300):
            with socket.create_connection(("127.0.0.1", store.port), timeout=10) as s:
                s.sendall(b"\xff")
        self.assertEqual(legit_round_trip(store.port), b"still here")
        self.assertTrue(store.wait_log_count("closing connection", 5), store.log_text())
        store.stop()
        self.assertLessEqual(len(self.closing_lines(store)), 5, store.log_text())
        summaries = [l for l in store.log_lines() if "were not logged one by one" in l]
        self.assertEqual(len(summaries), 1, store.log_text())

    def test_multi_get_of_ten_thousand_ranks_keys(self):
        store = self.start()
        n = 10000
        keys = [b"/rank_%05d" % i for i in range(n)]
        values = [b"tcp://10.0.%d.%d:29500/%s" % (i // 256, i % 256, b"x" * 64) for i in range(n)]
        with v2_connect(store.port) as s:
            s.sendall(b"\x0b" + struct.pack("<Q", n)
                      + b"".join(blob(k) + blob(v) for k, v in zip(keys, values)))
            v2_multi_get(s, keys)
            for i in range(n):
                size = struct.unpack("<Q", recv_exact(s, 8))[0]
                self.assertEqual(recv_exact(s, size), values[i])
        self.assertEqual(self.closing_lines(store), [], store.log_text())

    def test_handled_requests_are_not_held_between_requests(self):
        # COMPARE_SET of a missing key with a non-empty expected value only echoes it: the
        # request's two values were kept until the connection's next request.
        store = self.start()
        held = []
        for i in range(16):
            s = v2_connect(store.port)
            self.addCleanup(s.close)
            expected = bytes([65 + i]) * (30 * MiB)
            s.sendall(b"\x02" + blob(b"/cas%d" % i) + blob(expected) + blob(b"d" * (30 * MiB)))
            self.assertEqual(struct.unpack("<Q", recv_exact(s, 8))[0], len(expected))
            recv_exact(s, len(expected))
            held.append(s)
        self.assertEqual(legit_round_trip(store.port), b"still here")
        self.assertLess(vm_hwm_mib(store.pid), 320, store.log_text())

    def test_more_names_than_libuv_accepts_closes_the_connection(self):
        store = self.start()
        with v2_connect(store.port) as s:
            try:
                v2_multi_get(s, [b"/k"] * 131073)
            except OSError:
                pass  # closed while the names were still being sent
            self.assertTrue(closed_by_peer(s), store.log_text())
        self.assert_closed_for(store, "exceeds the limit of 131072 keys per request")
        self.assertEqual(legit_round_trip(store.port), b"still here")

    def test_launch_flags_set_the_bounds(self):
        port = gltest.free_port()
        with gltest.Job(["--nproc-per-node", "1", "--standalone", "--device", "cpu",
                         "--master-port", str(port), "--store-max-queued", "1M",
                         "--store-max-buffered", "64M"] + gltest.child_args("sleep", "60"),
                        tag=self.tag) as job:
            deadline = time.monotonic() + 30
            while True:
                try:
                    s = v2_connect(port)
                    break
                except OSError:
                    self.assertLess(time.monotonic(), deadline, job.stderr)
                    time.sleep(0.05)
            with s:
                v2_set(s, b"/k", b"v" * (64 << 10))
                v2_multi_get(s, [b"/k"] * 32)  # 2 MiB of reply, past --store-max-queued 1M
                self.assertTrue(closed_by_peer(s))
            job.wait_for(lambda out, err: "more than the limit of 1048576" in err, timeout=30,
                         what="the log line naming --store-max-queued's limit")


if __name__ == "__main__":
    unittest.main()
