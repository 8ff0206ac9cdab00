"""`gculaunch store` as a command: the first stdout line, clean stops on SIGTERM and
SIGINT, one-line errors with exit 2 for bad flags, exit 1 when the port is taken,
--help, the raised open-file limit, close-on-exec sockets (seen in /proc), and the store
proxy (--upstream) exiting 3 when its store goes."""
import os
import resource
import signal
import socket
import subprocess
import unittest

import gltest


class StoreCommand(unittest.TestCase):
    def setUp(self):
        self.tag = gltest.new_tag()
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        gltest.kill_tagged(self.tag)
        self.assertEqual(gltest.wait_no_tagged(self.tag, 10), [])

    def run_store(self, *args):
        return gltest.run([gltest.require_binary(), "store"] + list(args),
                          env=gltest.tagged_env(self.tag), timeout=30)

    def test_first_line_and_clean_stop_on_sigterm_and_sigint(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            store = gltest.StoreProcess(self.tag, log_level="info")
            self.assertEqual(store.first_line, "listening on 127.0.0.1:%d" % store.port)
            self.assertNotEqual(store.port, 0)
            with socket.create_connection(("127.0.0.1", store.port), timeout=10) as s:
                s.sendall(b"\x06")  # v1 GETNUMKEYS
                self.assertEqual(s.recv(8), b"\x00" * 8)
                rc = store.stop(sig)
            self.assertEqual(rc, 0, store.log_text())
            name = "SIGTERM" if sig == signal.SIGTERM else "SIGINT"
            self.assertIn("received %s, stopping" % name, store.log_text())

    def test_upstream_proxy_exits_3_when_its_store_goes(self):
        store = gltest.StoreProcess(self.tag, log_level="info")
        proxy = gltest.StoreProcess(self.tag, ["--upstream", "127.0.0.1:%d" % store.port],
                                    log_level="info")
        self.assertTrue(store.wait_log(lambda lines: any("store proxy's upstream" in l
                                                         for l in lines)), store.log_text())
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=20)
        self.addCleanup(client.close)
        # ADD /k 7 through the proxy (v1): the store's answer comes back.
        client.sendall(b"\x03" + (2).to_bytes(8, "little") + b"/k" + (7).to_bytes(8, "little"))
        self.assertEqual(client.recv(8), (7).to_bytes(8, "little"))
        self.assertEqual(store.stop(), 0)
        self.assertEqual(proxy.proc.wait(timeout=20), 3, proxy.log_text())
        self.assertEqual(client.recv(1), b"", "the rank's connection outlived the upstream")
        proxy.stop()
        line = [l for l in proxy.log_text().splitlines() if l.startswith("gculaunch store:")]
        self.assertEqual(len(line), 1, proxy.log_text())
        self.assertIn("lost the connection to node 0's store at 127.0.0.1:%d" % store.port,
                      line[0])
        self.assertIn("(fix: start the upstream store first", line[0])

    def test_all_interfaces(self):
        store = gltest.StoreProcess(self.tag, host="")
        self.addCleanup(store.stop)
        self.assertIn(store.host, ("[::]", "0.0.0.0"))
        with socket.create_connection(("127.0.0.1", store.port), timeout=10) as s:
            s.sendall(b"\x06")
            self.assertEqual(len(s.recv(8)), 8)

    def test_bad_flags_exit_2_with_one_line(self):
        cases = [
            (["--port", "70000"], "--port"),
            (["--port", "x"], "--port"),
            (["--bogus"], "--bogus"),
            (["--max-connections", "0"], "--max-connections"),
            (["--max-value-size", "12x"], "--max-value-size '12x': not a size"),
            (["--log-level", "loud"], "--log-level"),
            (["--upstream", "node0"], "--upstream 'node0': not HOST:PORT"),
        ]
        for args, names in cases:
            out = self.run_store(*args)
            self.assertEqual(out.returncode, 2, (args, out.stderr))
            self.assertEqual(out.stdout, "")
            lines = out.stderr.splitlines()
            self.assertEqual(len(lines), 1, (args, out.stderr))
            self.assertTrue(lines[0].startswith("gculaunch: "), lines[0])
            self.assertIn(names, lines[0])
            self.assertIn("(fix: ", lines[0])

    def test_help(self):
        out = self.run_store("--help")
        self.assertEqual(out.returncode, 0)
        self.assertIn("--max-value-size", out.stdout)
        self.assertIn("listening on HOST:PORT", out.stdout)

    def test_port_in_use_exits_1(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            out = self.run_store("--host", "127.0.0.1", "--port", str(port))
        self.assertEqual(out.returncode, 1)
        self.assertEqual(out.stdout, "")
        self.assertEqual(out.stderr.strip(),
                         "gculaunch: cannot listen on 127.0.0.1:%d: Address already in use "
                         "(fix: another process is using port %d; choose another --port, or 0 "
                         "for a free one)" % (port, port))

    def test_raises_the_open_file_limit_and_sockets_are_cloexec(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        low = min(256, hard)

        def lower():
            resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

        proc = subprocess.Popen(
            [gltest.require_binary(), "store", "--host", "127.0.0.1", "--port", "0"],
            env=gltest.tagged_env(self.tag), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, preexec_fn=lower, start_new_session=True)
        try:
            port = int(proc.stdout.readline().rsplit(":", 1)[1])
            with open("/proc/%d/limits" % proc.pid) as f:
                line = next(l for l in f if l.startswith("Max open files"))
            self.assertEqual(line.split()[3:5], [str(hard), str(hard)])
            clients = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
            for c in clients:
                c.sendall(b"\x06")
                self.assertEqual(len(c.recv(8)), 8)
            sockets = 0
            for fd in os.listdir("/proc/%d/fd" % proc.pid):
                target = os.readlink("/proc/%d/fd/%s" % (proc.pid, fd))
                if not target.startswith("socket:"):
                    continue
                with open("/proc/%d/fdinfo/%s" % (proc.pid, fd)) as f:
                    flags = int(next(l for l in f if l.startswith("flags:")).split()[1], 8)
                self.assertTrue(flags & 0o2000000, "fd %s of the store is not O_CLOEXEC" % fd)
                sockets += 1
            self.assertGreaterEqual(sockets, 4)  # the listener and three clients
            for c in clients:
                c.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("open-file limit raised from %d to %d" % (low, hard), err)


if __name__ == "__main__":
    unittest.main()
