"""Another local user cannot steer or starve root's job (issue 43; the hostile probe of
2026-11-28, rows N1, N2, N14 and M2), each attack run by a second uid (setpriv to nobody, no
account needed):

* a fake node 0: nobody's secretless gculaunch behind a proxy that answers the agents' proof
  of the job secret itself ("ok" to any proof); root's node, with a secret, must see that node
  0 cannot prove the secret back, exit 2 and never run its rank;
* a squatted endpoint: nobody's gculaunch binds the c10d endpoint's port first; root's
  launcher with the same command line finds the port taken and must refuse to join (exit 2,
  naming uid 65534), while a listener of root's own is joined as before;
* a connection flood: nobody holds 1100 idle connections to the store of a job started with
  `ulimit -n 1024` (its cap is 936) before the ranks call init_process_group; every rank must
  initialise in the first attempt, with no restart;
* a metrics flood: nobody keeps reconnecting 200 connections to --metrics-port while root
  scrapes; every scrape of root's must succeed.

The tests need root (the victim) and setpriv; without root each says so in one line and is
skipped."""
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import unittest

import gltest

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]

# A rank: writes ran.<uid>.<RANK> into argv[1], then waits (at most 60 s) for argv[1]/release.
RANK = r"""#!/bin/sh
touch "$1/ran.$(id -u).$RANK"
i=0; while [ ! -e "$1/release" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
exit 0
"""

# nobody's fake node 0: listens on argv[1], relays to its own gculaunch on argv[2], but answers
# the agents' proof of the job secret itself: any nonce, a made-up proof of node 0 (it has no
# secret to make a real one), the agent's proof swallowed, and "ok".  Runs at most argv[3] s.
PROXY = r"""
import os, socket, struct, sys, threading, time
listen_port, upstream, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
PREAMBLE = b"\x00\xce\xf7\x85\x3c"
def recv(s, n):
    out = b""
    while len(out) < n:
        k = s.recv(n - len(out))
        if not k:
            raise EOFError()
        out += k
    return out
def blob(s):
    return recv(s, struct.unpack("<Q", recv(s, 8))[0])
def reply(b):
    return struct.pack("<Q", len(b)) + b
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for x in (a, b):
        try:
            x.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def fake_auth(c, u):
    # Until the agent asks for its status: everything under gculaunch/auth/ is answered here.
    u.sendall(recv(c, 5))
    while True:
        op = recv(c, 1)
        if op == b"\x0d":  # PING: relay it and its answer
            u.sendall(op + recv(c, 4))
            c.sendall(recv(u, 4))
        elif op == b"\x03":  # GET
            key = blob(c)
            if key == b"gculaunch/auth/nonce":
                c.sendall(reply(os.urandom(32).hex().encode()))
            elif key.startswith(b"gculaunch/auth/node0-proof/"):
                c.sendall(reply(os.urandom(32).hex().encode()))
            elif key == b"gculaunch/auth/status":
                c.sendall(reply(b"ok"))
                print("proxy: told an agent its proof is ok", flush=True)
                return
            else:
                u.sendall(op + reply(key))
                return
        elif op == b"\x01":  # SET
            key, value = blob(c), blob(c)
            if key != b"gculaunch/auth/proof":
                u.sendall(op + reply(key) + reply(value))
                return
            print("proxy: swallowed a proof", flush=True)
        else:
            u.sendall(op)
            return
def serve(c):
    u = socket.create_connection(("127.0.0.1", upstream))
    try:
        fake_auth(c, u)
    except (EOFError, OSError):
        c.close()
        u.close()
        return
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(64)
srv.settimeout(0.5)
print("proxy listening", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# nobody's flood: argv[2] idle connections to 127.0.0.1:argv[1], held until argv[3] exists
# (at most 90 s).
FLOOD = r"""
import os, resource, socket, sys, time
port, count, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
held = []
for _ in range(count):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    held.append(s)
print("flood: %d connections" % len(held), flush=True)
deadline = time.monotonic() + 90
while not os.path.exists(stop) and time.monotonic() < deadline:
    time.sleep(0.1)
"""

# nobody's reconnecting hog: keeps argv[2] connections to 127.0.0.1:argv[1] alive, closing the
# oldest for each new one, until argv[3] exists (at most 60 s).
HOG = r"""
import os, socket, sys, time
port, live, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held, made = [], 0
deadline = time.monotonic() + 60
while not os.path.exists(stop) and time.monotonic() < deadline:
    try:
        held.append(socket.create_connection(("127.0.0.1", port), 1))
        made += 1
    except OSError:
        pass
    if len(held) > live:
        held.pop(0).close()
    if made == 1000:
        print("hog: 1000 connections made", flush=True)
"""

# A rank of the flood test: waits for argv[1] (the flood is in place), then joins the gloo
# group and says so; at most 60 s for the wait.
INIT_RANK = r"""
import os, sys, time
import torch.distributed as dist
go = sys.argv[1]
print("rank %s waiting" % os.environ["RANK"], flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
t = time.monotonic()
dist.init_process_group("gloo")
dist.barrier()
print("rank %s initialised in %.1f s" % (os.environ["RANK"], time.monotonic() - t), flush=True)
dist.destroy_process_group()
"""


def require_root(test):
    if os.geteuid() != 0:
        test.skipTest("needs root: the victim is root and the attacker a second uid (setpriv)")


def as_nobody(cmd, **kwargs):
    return subprocess.Popen(AS_NOBODY + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, **kwargs)


def read_line_with(proc, text, timeout):
    """Reads proc's output until a line holds `text`; the lines read."""
    import selectors
    lines = []
    deadline = time.monotonic() + timeout
    buf = b""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                break
            data = os.read(proc.stdout.fileno(), 4096)
            if not data:
                break
            buf += data
            lines = buf.decode(errors="replace").splitlines()
            if any(text in line for line in lines):
                return lines
    finally:
        sel.close()
    raise AssertionError("no line with %r within %s s: %r" % (text, timeout, lines[-10:]))


def end(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # the group setsid made for this process
    proc.wait(timeout=10)
    proc.stdout.close()


def wait_listening(port, timeout=30):
    deadline = time.monotonic() + timeout
    while not gltest.listening_socket_owner(port):
        if time.monotonic() > deadline:
            raise AssertionError("nothing listens on port %d after %s s" % (port, timeout))
        time.sleep(0.05)


class Strangers(unittest.TestCase):
    def setUp(self):
        require_root(self)
        gltest.require_binary()
        self.tmp = gltest.TempDir(prefix="gltest-strangers-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        os.chmod(self.work, 0o1777)  # both users leave files here
        self.rank = gltest.write_script(self.work, "rank.sh", RANK)
        self.release = os.path.join(self.work, "release")

    def c10d_args(self, port, extra=()):
        return ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                "127.0.0.1:%d" % port, "--rdzv-id", "job1", "--rdzv-timeout", "30",
                "--nproc-per-node", "1"] + list(extra) + ["--no-python", self.rank, self.work]

    def ran(self, uid):
        return sorted(n for n in os.listdir(self.work) if n.startswith("ran.%d." % uid))

    def refused(self, victim, timeout=60):
        """victim's exit code, once it exited; fails at once if root's rank runs instead."""
        deadline = time.monotonic() + timeout
        while victim.proc.poll() is None:
            if self.ran(0):
                open(self.release, "w").close()
                self.fail("root's rank ran in another user's job:\n" + victim.stderr[-3000:])
            if time.monotonic() > deadline:
                self.fail("root's launcher neither exited nor ran its rank in %s s:\n%s"
                          % (timeout, victim.stderr[-3000:]))
            victim._pump(0.2)  # returns as soon as it says something
        return victim.wait(timeout=10)

    def test_a_fake_node_0_that_cannot_prove_the_secret_is_refused(self):
        secret = os.path.join(self.work, "secret")
        with open(secret, "w") as f:
            f.write("the job's secret\n")
        os.chmod(secret, 0o600)
        proxy_py = gltest.write_script(self.work, "proxy.py", PROXY)
        upstream = gltest.free_port()
        port = gltest.free_port()
        with gltest.Job(self.c10d_args(upstream), prefix=AS_NOBODY) as attacker:
            wait_listening(upstream)
            proxy = as_nobody([gltest.PYTHON, proxy_py, str(port), str(upstream), "60"])
            self.addCleanup(end, proxy)
            read_line_with(proxy, "proxy listening", 20)
            # A client of "another host" (is_host=false): no owner check, only the proof.
            with gltest.Job(self.c10d_args(port, ["--job-secret-file", secret, "--rdzv-conf",
                                                  "is_host=false"])) as victim:
                code = self.refused(victim)
                err = victim.stderr
            self.assertIsNone(attacker.proc.poll(), attacker.stderr)
        self.assertEqual(code, 2, err)
        self.assertRegex(err, r"gculaunch: error: the master node at 127\.0\.0\.1:%d failed to prove "
                              r"that it holds the job secret: .* \(fix: give every node the "
                              r"same secret file" % port)
        self.assertEqual(self.ran(0), [])  # root's rank never ran

    def test_a_squatted_endpoint_is_refused_and_names_the_uid(self):
        port = gltest.free_port()
        with gltest.Job(self.c10d_args(port), prefix=AS_NOBODY) as attacker:
            wait_listening(port)
            with gltest.Job(self.c10d_args(port)) as victim:
                code = self.refused(victim)
                err = victim.stderr
            self.assertIsNone(attacker.proc.poll(), attacker.stderr)
        self.assertEqual(code, 2, err)
        self.assertRegex(err, r"gculaunch: error: the store's port %d on this host is held by uid "
                              r"65534, not by this job's user \(uid 0\) or root: this node does "
                              r"not join another user's store \(fix: stop uid 65534's process "
                              r"on port %d" % (port, port))
        self.assertEqual(self.ran(0), [])

    def test_a_listener_of_root_is_joined_as_before(self):
        port = gltest.free_port()
        with gltest.Job(self.c10d_args(port)) as first:
            wait_listening(port)
            with gltest.Job(self.c10d_args(port)) as second:
                second.wait_for(lambda out, err: "joining the store there as a client" in err,
                                what="the second launcher's layout line")
                deadline = time.monotonic() + 60
                while len(self.ran(0)) < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                open(self.release, "w").close()
                self.assertEqual(second.wait(timeout=60), 0, second.stderr)
            self.assertEqual(first.wait(timeout=60), 0, first.stderr)
        self.assertEqual(self.ran(0), ["ran.0.0", "ran.0.1"])

    def test_a_flood_of_another_user_leaves_the_ranks_unaffected(self):
        init_py = os.path.join(self.work, "init_rank.py")
        with open(init_py, "w") as f:
            f.write(INIT_RANK)
        flood_py = os.path.join(self.work, "flood.py")
        with open(flood_py, "w") as f:
            f.write(FLOOD)
        go = os.path.join(self.work, "go")
        stop = os.path.join(self.work, "stop")
        port = gltest.free_port()

        def limit_1024():
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

        with gltest.Job(["--nproc-per-node", "2", "--standalone", "--master-port", str(port),
                         "--max-restarts", "1", "--restart-backoff", "off",
                         "--python", gltest.PYTHON, init_py, go],
                        preexec_fn=limit_1024) as job:
            job.wait_for(lambda out, err: out.count("waiting") == 2, timeout=90,
                         what="both ranks before init_process_group")
            flood = as_nobody([gltest.PYTHON, flood_py, str(port), "1100", stop])
            self.addCleanup(end, flood)
            read_line_with(flood, "flood: 1100 connections", 60)
            job.wait_for(lambda out, err: "refusing connection" in err, timeout=60,
                         what="the store at its cap")
            open(go, "w").close()
            code = job.wait(timeout=120)
            open(stop, "w").close()
        self.assertEqual(code, 0, job.stderr[-4000:])
        self.assertNotIn("restarting", job.stderr)
        self.assertIn("rank 0 initialised", job.stdout)
        self.assertIn("rank 1 initialised", job.stdout)
        self.assertIn("belongs to another local user than the job's and root", job.stderr)

    def test_a_reconnecting_metrics_client_of_another_user_cannot_fail_a_scrape(self):
        hog_py = os.path.join(self.work, "hog.py")
        with open(hog_py, "w") as f:
            f.write(HOG)
        stop = os.path.join(self.work, "stop")
        metrics = gltest.free_port()
        with gltest.Job(["--nproc-per-node", "1", "--standalone", "--metrics-port",
                         str(metrics), "--no-python", self.rank, self.work]) as job:
            wait_listening(metrics)
            hogs = [as_nobody([gltest.PYTHON, hog_py, str(metrics), "100", stop])
                    for _ in range(2)]
            for hog in hogs:
                self.addCleanup(end, hog)
            for hog in hogs:
                read_line_with(hog, "hog: 1000 connections made", 60)
            results = [self.scrape(metrics) for _ in range(20)]
            open(stop, "w").close()
            open(self.release, "w").close()
            self.assertEqual(job.wait(timeout=60), 0, job.stderr)
        self.assertEqual(results, ["ok"] * 20)

    @staticmethod
    def scrape(port):
        try:
            with socket.create_connection(("127.0.0.1", port), 20) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                s.settimeout(20)
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError as e:
            return "error: %s" % e
        return "ok" if data.startswith(b"HTTP/1.1 200") else "failed: %r" % data[:40]


if __name__ == "__main__":
    unittest.main()
