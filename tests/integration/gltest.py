"""Shared helpers for gculaunch's integration tests.

Tests drive the real binary ($GCULAUNCH_BIN) with real Python/PyTorch
workers.  Every process a test starts carries a unique tag in its environment
(GCULAUNCH_TEST_TAG), so survivors are found by scanning /proc/*/environ for
the tag: nothing outside the test is ever looked at or signalled.
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

BIN = os.environ.get("GCULAUNCH_BIN", "")
SOURCE_DIR = os.environ.get("GCULAUNCH_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
CACHE_DIR = os.environ.get("GCULAUNCH_CACHE_DIR",
                           os.path.join(os.path.expanduser("~"), ".cache", "gculaunch"))
PYTHON = "/usr/bin/python3"  # Debian's python3 with python3-torch 1.13
# The launched jobs' XDG_CACHE_HOME (gculaunch caches the ranks' torch version there): one
# private directory per test process, removed at its exit, so that no test leaves anything in
# the user's ~/.cache or depends on what an earlier run left there.
JOB_CACHE_HOME = tempfile.mkdtemp(prefix="gltest-cache-")
atexit.register(shutil.rmtree, JOB_CACHE_HOME, True)


def require_binary():
    if not BIN or not os.access(BIN, os.X_OK):
        raise RuntimeError("GCULAUNCH_BIN is not set to an executable gculaunch (got %r)" % BIN)
    return BIN


def new_tag():
    return "gltest-" + uuid.uuid4().hex[:12]


def tagged_env(tag, extra=None, base=None):
    """A minimal, predictable environment for a launched job, carrying `tag`."""
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "XDG_CACHE_HOME": JOB_CACHE_HOME,
        "GCULAUNCH_TEST_TAG": tag,
    }
    if base:
        env.update(base)
    if extra:
        env.update(extra)
    return env


def pids_with_tag(tag):
    """Pids of live (non-zombie) processes whose environment holds the tag."""
    needle = ("GCULAUNCH_TEST_TAG=" + tag).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == os.getpid():
            continue
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                data = f.read()
            with open("/proc/%d/stat" % pid, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if needle not in data.split(b"\0"):
            continue
        state = stat.rsplit(b")", 1)[1].split()[0]
        if state in (b"Z", b"X"):
            continue
        found.append(pid)
    return found


def wait_no_tagged(tag, timeout):
    """Waits until no process carries the tag; returns the survivors (empty on success)."""
    deadline = time.monotonic() + timeout
    while True:
        left = pids_with_tag(tag)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def kill_tagged(tag):
    """Last-resort cleanup of a failed test: SIGKILL every process carrying the tag."""
    for pid in pids_with_tag(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def read_environ(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        data = f.read()
    env = {}
    for item in data.split(b"\0"):
        if not item:
            continue
        key, _, value = item.partition(b"=")
        env[key.decode()] = value.decode()
    return env


def free_port(host="127.0.0.1"):
    """A port that was free a moment ago (only for tests that must pass a fixed port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run(args, env, timeout=120, cwd=None, input=None):
    """Runs gculaunch (or anything) to completion; returns CompletedProcess with text output.
    A gculaunch launch gets hermetic_args."""
    if args and args[0] == BIN:
        args = [args[0]] + hermetic_args(args[1:], env)
    return subprocess.run(args, env=env, cwd=cwd, input=input, capture_output=True,
                          text=True, timeout=timeout)


def torch2_python():
    """The command (a list) that runs python3 with torch 2.x: the python3 of the cached Debian
    trixie root, through scripts/in_root.sh, which keeps the pid and shows the host's /tmp and
    current directory inside.  The root is made first when it is missing
    (scripts/make_torch2_root.sh: minutes, once).  Raises if it cannot be made: a test
    needing it must fail, not skip."""
    scripts = os.path.join(SOURCE_DIR, "scripts")
    out = subprocess.run([os.path.join(scripts, "make_torch2_root.sh"),
                          os.path.join(CACHE_DIR, "torch2-trixie")],
                         capture_output=True, text=True, timeout=1800)
    lines = out.stdout.splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError("could not make the torch 2.x root in %s:\n%s\n%s"
                           % (CACHE_DIR, out.stdout, out.stderr[-3000:]))
    return [os.path.join(scripts, "in_root.sh"), lines[-1], "/usr/bin/python3"]


class TempDir:
    def __init__(self, prefix="gltest-"):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        subprocess.run(["rm", "-rf", "--one-file-system", self.path], check=False)
        return False


def eprint(*args):
    print(*args, file=sys.stderr, flush=True)


# ---- helpers for the runtime tests (spawning, signals, output) ----

TEST_CHILD = os.environ.get("GCULAUNCH_TEST_CHILD", "")
NO_PIDFD = os.environ.get("GCULAUNCH_NO_PIDFD", "")


def require_helpers():
    for name, path in (("GCULAUNCH_TEST_CHILD", TEST_CHILD), ("GCULAUNCH_NO_PIDFD", NO_PIDFD)):
        if not path or not os.access(path, os.X_OK):
            raise RuntimeError("%s is not set to an executable helper (got %r)" % (name, path))


# Flags (and their torchrun spellings) that decide the store's port; "--flag=value" counts.
PORT_FLAGS = ("--master-port", "--master_port", "--rdzv-endpoint", "--rdzv_endpoint",
              "--standalone")
SUBCOMMANDS = ("store", "status", "stacks", "check")


def hermetic_args(args, env):
    """`args` for a launch that never depends on a fixed port: a single-node launch that names
    no port (no port flag, no MASTER_PORT or PET_ variable) would bind torchrun's default
    29500, which another job on the machine may hold; it gets "--master-port 0" (a free port
    the kernel picks) in front.  Subcommands and launches that choose their port are left as
    they are."""
    args = [str(a) for a in args]
    if args and args[0] in SUBCOMMANDS:
        return args
    if any(a in ("--dry-run", "--help", "-h", "--version") for a in args):
        return args  # binds nothing, and its output names the port it would use
    if any(a.split("=", 1)[0] in PORT_FLAGS for a in args):
        return args
    if any(k in env for k in ("MASTER_PORT", "PET_MASTER_PORT", "PET_RDZV_ENDPOINT")):
        return args
    return ["--master-port", "0"] + args


class Job:
    """A running gculaunch with piped stdout/stderr and a tagged environment.

    Use as a context manager: on exit every process carrying the tag is
    SIGKILLed (the cleanup a failed test still owes), then the pipes are closed.
    """

    def __init__(self, args, tag=None, extra_env=None, stdin=subprocess.DEVNULL, prefix=None,
                 cwd=None, preexec_fn=None):
        self.tag = tag or new_tag()
        self.env = tagged_env(self.tag, extra=extra_env)
        cmd = list(prefix or []) + [require_binary()] + hermetic_args(args, self.env)
        self.proc = subprocess.Popen(cmd, env=self.env, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, start_new_session=True,
                                     preexec_fn=preexec_fn)
        self.pid = self.proc.pid
        self.out_buf = b""
        self.err_buf = b""
        self._out_done = False
        self._err_done = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
        # The guardian may still be removing gculaunch's scratch directory
        # for a moment after gculaunch exited: give tagged processes a short
        # while to end on their own before the last-resort SIGKILL.
        wait_no_tagged(self.tag, 3)
        kill_tagged(self.tag)
        try:
            self.wait(timeout=10)
        except Exception:
            pass
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:
                pass
        return False

    def _pump(self, timeout):
        """Reads whatever stdout/stderr have within `timeout`; False when both are at EOF."""
        import selectors
        sel = selectors.DefaultSelector()
        if not self._out_done:
            sel.register(self.proc.stdout, selectors.EVENT_READ, "out")
        if not self._err_done:
            sel.register(self.proc.stderr, selectors.EVENT_READ, "err")
        if not sel.get_map():
            return False
        for key, _ in sel.select(timeout):
            data = os.read(key.fileobj.fileno(), 1 << 16)
            if key.data == "out":
                if data:
                    self.out_buf += data
                else:
                    self._out_done = True
            else:
                if data:
                    self.err_buf += data
                else:
                    self._err_done = True
        sel.close()
        return True

    def wait_for(self, predicate, timeout=60, what="output"):
        """Reads output until predicate(stdout_text, stderr_text) is true."""
        deadline = time.monotonic() + timeout
        while not predicate(self.stdout, self.stderr):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("timed out waiting for %s\n--- stdout:\n%s\n--- stderr:\n%s"
                                     % (what, self.stdout[-4000:], self.stderr[-4000:]))
            if not self._pump(min(left, 0.5)) and self.proc.poll() is not None:
                if not predicate(self.stdout, self.stderr):
                    raise AssertionError("gculaunch exited (%s) before %s\n--- stdout:\n%s\n"
                                         "--- stderr:\n%s" % (self.proc.returncode, what,
                                                              self.stdout[-4000:],
                                                              self.stderr[-4000:]))

    def wait(self, timeout=120):
        """Waits for gculaunch to exit, reading all its output; returns the exit code."""
        deadline = time.monotonic() + timeout
        while not (self._out_done and self._err_done):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("gculaunch did not close its output in %s s\n--- stdout:\n%s"
                                     "\n--- stderr:\n%s" % (timeout, self.stdout[-4000:],
                                                            self.stderr[-4000:]))
            self._pump(min(left, 0.5))
        return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))

    def signal(self, sig):
        os.kill(self.pid, sig)

    @property
    def stdout(self):
        return self.out_buf.decode(errors="replace")

    @property
    def stderr(self):
        return self.err_buf.decode(errors="replace")


def child_args(*steps):
    """gculaunch arguments that run the helper rank with `steps` (--no-python)."""
    return ["--no-python", TEST_CHILD] + [str(s) for s in steps]


CHILD_COMM = "gculaunch_test_"  # the helper rank's command name (15 characters kept)


def pids_of_ranks(tag, comm=None):
    """Pids of tagged processes other than gculaunch and its guardian
    (optionally only those with command name `comm`)."""
    out = []
    for pid in pids_with_tag(tag):
        try:
            with open("/proc/%d/comm" % pid) as f:
                name = f.read().strip()
        except OSError:
            continue
        if name in ("gculaunch", "gculaunch-guard"):
            continue
        if comm is None or name == comm:
            out.append(pid)
    return out

def guardian_of(launcher_pid):
    """The pid of gculaunch `launcher_pid`'s guardian (a child named gculaunch-guard), or None.
    The guardian runs with an empty environment, so it carries no test tag."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        head, _, rest = stat.rpartition(b")")
        comm = head.partition(b"(")[2]
        fields = rest.split()
        if comm == b"gculaunch-guard" and len(fields) > 1 and int(fields[1]) == launcher_pid:
            return int(name)
    return None


def wait_guardian_of(launcher_pid, timeout=10):
    """guardian_of, waiting for the guardian to have executed (it is named after its exec)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = guardian_of(launcher_pid)
        if pid is not None:
            return pid
        time.sleep(0.01)
    return None


def process_alive(pid):
    """True while `pid` is a process that is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")

# ---- rendezvous store helpers (tests/integration/test_store_*.py) ----

import json
import re
import selectors
import threading


class StoreProcess:
    """`gculaunch store --host 127.0.0.1 --port 0` (or another host), tagged, in its own
    session.

    .host/.port come from its first stdout line; stderr (the log) is collected by a thread so
    that tests can wait for a log line without polling."""

    def __init__(self, tag, args=(), log_level="debug", timeout=20, host="127.0.0.1"):
        cmd = [require_binary(), "store", "--host", host, "--port", "0",
               "--log-level", log_level] + list(args)
        self.proc = subprocess.Popen(cmd, env=tagged_env(tag), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self._lines = []
        self._cond = threading.Condition()
        self._pump = threading.Thread(target=self._read_stderr, daemon=True)
        self._pump.start()
        self.first_line = self._first_line(timeout)
        m = re.fullmatch(r"listening on (\S+):(\d+)", self.first_line)
        if not m:
            self.stop(signal.SIGKILL)
            raise RuntimeError("unexpected first line from gculaunch store: %r (stderr: %s)"
                               % (self.first_line, self.log_text()))
        self.host, self.port = m.group(1), int(m.group(2))

    @property
    def pid(self):
        return self.proc.pid

    def _first_line(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        data = b""
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise RuntimeError("gculaunch store printed no first line within %ss (stderr: %s)"
                                   % (timeout, self.log_text()))
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("gculaunch store exited before its first line (rc %s): %s"
                                   % (self.proc.wait(), self.log_text()))
            data += chunk
        sel.close()
        return data.split(b"\n", 1)[0].decode()

    def _read_stderr(self):
        for raw in self.proc.stderr:
            with self._cond:
                self._lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def log_lines(self):
        with self._cond:
            return list(self._lines)

    def log_text(self):
        return "\n".join(self.log_lines())

    def wait_log(self, predicate, timeout=30):
        """Waits until predicate(lines) is true; returns whether it became true."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self._lines), timeout)

    def wait_log_count(self, text, count, timeout=30):
        return self.wait_log(lambda lines: sum(text in l for l in lines) >= count, timeout)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Signals the store and waits for it; returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self._pump.join(timeout)
        self.proc.stdout.close()
        return rc


class StoreRepl:
    """Real TCPStore clients in a torch Python, driven through tests/integration/store_repl.py.

    `python_cmd` is the interpreter command (e.g. [PYTHON] or torch2_python())."""

    def __init__(self, python_cmd, tag, host, port, extra_env=None):
        here = os.path.realpath(os.path.dirname(__file__))
        # cwd = this directory: in_root.sh shows the current directory inside its root.
        self.proc = subprocess.Popen(
            list(python_cmd) + [os.path.join(here, "store_repl.py"), host, str(port)],
            env=tagged_env(tag, extra_env), cwd=here, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self._results = {}
        self._cond = threading.Condition()
        self._next = 0
        self._stderr = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self._results[msg["id"]] = msg
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self):
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def start(self, cmd):
        with self._cond:
            self._next += 1
            cmd = dict(cmd, id=self._next)
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return cmd["id"]

    def result(self, ident, timeout=60):
        with self._cond:
            ok = self._cond.wait_for(
                lambda: ident in self._results or self.proc.poll() is not None, timeout)
            if ident in self._results:
                return self._results.pop(ident)
        raise RuntimeError("no result for command %s within %ss (driver rc %s); stderr:\n%s"
                           % (ident, timeout if ok else timeout, self.proc.poll(),
                              "\n".join(self._stderr[-30:])))

    def run(self, cmd, timeout=60):
        return self.result(self.start(cmd), timeout)

    def open(self, name, world_size=None, timeout=10):
        r = self.run({"cmd": "open", "name": name, "world_size": world_size, "timeout": timeout})
        if not r["ok"]:
            raise RuntimeError("TCPStore(%s) failed: %s" % (name, r["error"]))

    def call(self, name, method, *args, timeout=60):
        """Calls store.method(*args); returns the result or raises RuntimeError."""
        r = self.run({"cmd": "call", "name": name, "method": method, "args": list(args)}, timeout)
        if not r["ok"]:
            raise RuntimeError("%s.%s%r failed: %s" % (name, method, args, r["error"]))
        return r["result"]

    def try_call(self, name, method, *args, timeout=60):
        """Like call, but returns the whole result record (for calls expected to fail)."""
        return self.run({"cmd": "call", "name": name, "method": method, "args": list(args)},
                        timeout)

    def call_async(self, name, method, *args):
        return self.start({"cmd": "call", "name": name, "method": method, "args": list(args),
                           "async": True})

    def close(self, timeout=20):
        if self.proc.poll() is None:
            try:
                self.start({"cmd": "exit"})
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def hexb(data):
    """bytes -> the REPL's {"hex": ...} argument form."""
    return {"hex": data.hex()}


def unhex(value):
    """The REPL's {"hex": ...} result form -> bytes."""
    return bytes.fromhex(value["hex"])


def write_no_libuv_sitecustomize(directory):
    """A test-only sitecustomize for Debian's torch 2.x (built without libuv): when
    GLTEST_TCPSTORE_NO_LIBUV=1, the env:// rendezvous's TCPStore defaults to use_libuv=False.
    It changes no byte on the wire (see docs/worker-environment.md, section 3)."""
    path = os.path.join(directory, "sitecustomize.py")
    with open(path, "w") as f:
        f.write(
            "import os\n"
            "if os.environ.get('GLTEST_TCPSTORE_NO_LIBUV') == '1':\n"
            "    import functools\n"
            "    import importlib\n"
            "    # import_module: torch.distributed.rendezvous is also the name of a function\n"
            "    _rdzv = importlib.import_module('torch.distributed.rendezvous')\n"
            "    _rdzv.TCPStore = functools.partial(_rdzv.TCPStore, use_libuv=False)\n")
    return path


def listening_socket_owner(port):
    """Pids whose fds include the TCP socket listening on `port` (IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, state, inode = fields[1], fields[3], fields[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add("socket:[%s]" % inode)
        except OSError:
            continue
    owners = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % name)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (name, fd)) in inodes:
                    owners.append(int(name))
                    break
            except OSError:
                continue
    return owners


# ---- simulated hosts: network namespaces (tests/integration/test_multinode.py, benchmarks) ----

class SimulatedHosts:
    """`count` hosts on this machine: one network namespace each ("<prefix>-h<i>", with `lo`
    up and `eth0` = 198.18.0.<i+1>/24) plus a switch namespace ("<prefix>-sw") whose bridge
    joins them through veth pairs.  Nothing is created in, or attached to, the namespace the
    tests run in; 198.18.0.0/15 (reserved for benchmarking) exists only inside these
    namespaces.  Names are unique per instance, and close() deletes exactly the namespaces
    this instance created (use it as a context manager so that a failing test still cleans
    up).  Processes are started inside with `ip netns exec` (command_prefix)."""

    SUBNET = "198.18.0."

    def __init__(self, count, ipv6=False):
        self.prefix = "glmn%d%s" % (os.getpid(), uuid.uuid4().hex[:4])
        self.switch = self.prefix + "-sw"
        self.hosts = ["%s-h%d" % (self.prefix, i) for i in range(count)]
        self._created = []
        try:
            self._ip("netns", "add", self.switch)
            self._created.append(self.switch)
            self._ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            self._ip("-n", self.switch, "link", "set", "br0", "up")
            for i, ns in enumerate(self.hosts):
                self._ip("netns", "add", ns)
                self._created.append(ns)
                self._ip("-n", ns, "link", "set", "lo", "up")
                # Both ends are created straight inside the namespaces.
                self._ip("-n", self.switch, "link", "add", "p%d" % i, "type", "veth", "peer",
                         "name", "eth0", "netns", ns)
                self._ip("-n", self.switch, "link", "set", "p%d" % i, "master", "br0")
                self._ip("-n", self.switch, "link", "set", "p%d" % i, "up")
                self._ip("-n", ns, "addr", "add", self.addr(i) + "/24", "dev", "eth0")
                self._ip("-n", ns, "link", "set", "eth0", "up")
        except Exception:
            self.close()
            raise

    @staticmethod
    def _ip(*args):
        out = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError("ip %s failed: %s" % (" ".join(args), out.stderr.strip()))

    def addr(self, i):
        return self.SUBNET + str(i + 1)

    def command_prefix(self, i):
        return ["ip", "netns", "exec", self.hosts[i]]

    def pids_in(self, i):
        """Pids of processes whose network namespace is host i's."""
        out = subprocess.run(["ip", "netns", "pids", self.hosts[i]], capture_output=True,
                             text=True, timeout=30)
        return [int(p) for p in out.stdout.split()]

    def wait_empty(self, i, timeout=15):
        """Waits until no process is left in host i; returns what is left (empty on success).
        A killed node's guardian carries no test tag (it runs with an empty environment), so
        waiting for tagged processes does not wait for it: it may still be finishing its
        cleanup for a moment."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids_in(i)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.05)

    def unplug(self, i):
        """Host i vanishes from the network (its veth goes down on the switch side)."""
        self._ip("-n", self.switch, "link", "set", "p%d" % i, "down")

    def plug(self, i):
        """Host i is back on the network."""
        self._ip("-n", self.switch, "link", "set", "p%d" % i, "up")

    def close(self):
        for ns in reversed(self._created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._created = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class NodeJob(Job):
    """One simulated node's gculaunch: a Job run inside host `index` of `hosts` with the
    variables a Volcano/KubeBrain-style platform sets (WORLD_SIZE = nodes, RANK = node index,
    MASTER_ADDR, MASTER_PORT) and GLOO_SOCKET_IFNAME=eth0."""

    def __init__(self, hosts, index, nnodes, port, args, tag, extra_env=None,
                 master_addr=None):
        env = {
            "WORLD_SIZE": str(nnodes),
            "RANK": str(index),
            "MASTER_ADDR": master_addr or hosts.addr(0),
            "MASTER_PORT": str(port),
            "GLOO_SOCKET_IFNAME": "eth0",
        }
        env.update(extra_env or {})
        super().__init__(args, tag=tag, extra_env=env, prefix=hosts.command_prefix(index))
        self.index = index


# ---- simulated hosts: additions for the rejoin tests (tests/integration/test_rejoin.py) ----

def add_host(hosts):
    """Adds one more host to `hosts` (a SimulatedHosts), attached to the same bridge, with the
    next address (198.18.0.<i+1>): a spare that a replacement node can start in.  Returns its
    index.  Its namespace is deleted by hosts.close() like the others."""
    i = len(hosts.hosts)
    ns = "%s-h%d" % (hosts.prefix, i)
    hosts._ip("netns", "add", ns)
    hosts._created.append(ns)
    hosts.hosts.append(ns)
    hosts._ip("-n", ns, "link", "set", "lo", "up")
    hosts._ip("-n", hosts.switch, "link", "add", "p%d" % i, "type", "veth", "peer", "name",
              "eth0", "netns", ns)
    hosts._ip("-n", hosts.switch, "link", "set", "p%d" % i, "master", "br0")
    hosts._ip("-n", hosts.switch, "link", "set", "p%d" % i, "up")
    hosts._ip("-n", ns, "addr", "add", hosts.addr(i) + "/24", "dev", "eth0")
    hosts._ip("-n", ns, "link", "set", "eth0", "up")
    return i


class HostsFileNames:
    """Host names that only the simulated hosts know: `ip netns exec NS` bind-mounts
    /etc/netns/NS/hosts over /etc/hosts for the process it starts, so writing that file for
    every namespace of `hosts` gives each of them the same private name table.  Create it
    BEFORE starting processes (the bind mount is made at exec time); set() rewrites the files
    in place (same inode), so processes already running see the change.  close() removes
    exactly the files and directories it created."""

    def __init__(self, hosts):
        self.hosts = hosts
        self.names = {}
        self._made_dirs = []
        self._made_files = []
        self.sync()

    def _path(self, ns):
        return os.path.join("/etc/netns", ns, "hosts")

    def sync(self):
        """Writes the table for every namespace of `hosts` (call again after add_host)."""
        text = "127.0.0.1\tlocalhost\n::1\tlocalhost\n" + "".join(
            "%s\t%s\n" % (addr, name) for name, addr in sorted(self.names.items()))
        for ns in self.hosts.hosts:
            directory = os.path.dirname(self._path(ns))
            if not os.path.isdir(directory):
                os.makedirs(directory)
                self._made_dirs.append(directory)
            path = self._path(ns)
            if path not in self._made_files:
                if os.path.exists(path):
                    raise RuntimeError("%s exists already: not ours to overwrite" % path)
                self._made_files.append(path)
            # "w" truncates and writes the same inode: a bind mount of it sees the new text.
            with open(path, "w") as f:
                f.write(text)

    def set(self, name, addr):
        """`name` resolves to `addr` in every simulated host from now on."""
        self.names[name] = addr
        self.sync()

    def close(self):
        for path in self._made_files:
            try:
                os.unlink(path)
            except OSError:
                pass
        for directory in reversed(self._made_dirs):
            try:
                os.rmdir(directory)
            except OSError:
                pass
        self._made_files = []
        self._made_dirs = []


def write_script(directory, name, text):
    """Writes the executable file `directory`/`name` holding `text`; returns its path."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def interpreter_file(directory, command):
    """An executable file `directory`/python3 that stands for the interpreter `command` (a
    list, e.g. torch2_python()), since --python takes one path.  It execs the command, so the
    rank's pid stays the interpreter's."""
    import shlex
    path = os.path.join(directory, "python3")
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec %s "$@"\n' % " ".join(shlex.quote(c) for c in command))
    os.chmod(path, 0o755)
    return path


# ---- the checkpointing example (examples/ckpt_train.py) ----

CKPT_EXAMPLE = os.path.join(SOURCE_DIR, "examples", "ckpt_train.py")


def ckpt_example():
    """examples/ckpt_train.py as a module (it imports torch only in main()): its simulate()
    gives the states every correct run must go through."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("ckpt_train", CKPT_EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_ckpt_journal(directory):
    """{rank: [record, ...]} from the example's --journal directory, in file order."""
    out = {}
    for name in sorted(os.listdir(directory)):
        m = re.fullmatch(r"rank(\d+)\.jsonl", name)
        if not m:
            continue
        with open(os.path.join(directory, name)) as f:
            out[int(m.group(1))] = [json.loads(line) for line in f if line.strip()]
    return out


def ckpt_journal_problems(directory, steps, ckpt_every, world):
    """What is wrong with a finished run's journal (an empty list: nothing).  Checks, for every
    rank of a job of `world` ranks: each line's value is the undisturbed run's value at that
    step and its world size is `world`; the lines come in attempts (TORCHELASTIC_RESTART_COUNT,
    increasing), each a run of consecutive steps; the first attempt starts at step 1 and the
    last one ends at `steps`; every later attempt starts right after a checkpoint step (a
    multiple of `ckpt_every`) at or before where the previous one stopped (no step lost) and
    at most `ckpt_every` steps before it (only steps after the last checkpoint repeated).
    For rank 0, which writes the checkpoint before its journal line, the resume point must be
    exactly the last checkpoint: the last multiple of `ckpt_every` among the steps it journaled,
    or the next one when it was stopped between the checkpoint and the line."""
    values = [ckpt_example().value_of(s) for s in ckpt_example().simulate(steps)]
    journal = read_ckpt_journal(directory)
    problems = []
    if sorted(journal) != list(range(world)):
        return ["journal files for ranks %s, expected 0..%d" % (sorted(journal), world - 1)]
    for rank, records in sorted(journal.items()):
        where = "rank %d" % rank
        groups = []  # [attempt, [steps]]
        for r in records:
            if not 1 <= r["step"] <= steps or r["value"] != values[r["step"]]:
                problems.append("%s: %r has a wrong value (expected %s)"
                                % (where, r, values[r["step"]] if 1 <= r["step"] <= steps
                                   else "no such step"))
            if r["world"] != world:
                problems.append("%s: %r: world size is not %d" % (where, r, world))
            if groups and groups[-1][0] == r["attempt"]:
                groups[-1][1].append(r["step"])
            elif groups and groups[-1][0] > r["attempt"]:
                problems.append("%s: attempt %d after attempt %d" % (where, r["attempt"],
                                                                    groups[-1][0]))
            else:
                groups.append([r["attempt"], [r["step"]]])
        if not groups:
            problems.append("%s: no step at all" % where)
            continue
        for attempt, done in groups:
            if done != list(range(done[0], done[0] + len(done))):
                problems.append("%s: attempt %d: steps not consecutive: %s"
                                % (where, attempt, done))
        if groups[0][1][0] != 1:
            problems.append("%s: first step %d, not 1" % (where, groups[0][1][0]))
        if groups[-1][1][-1] != steps:
            problems.append("%s: last step %d, not %d" % (where, groups[-1][1][-1], steps))
        for (_, before), (attempt, after) in zip(groups, groups[1:]):
            last, resumed = before[-1], after[0] - 1
            ok = (resumed % ckpt_every == 0 and resumed <= last + 1
                  and last - resumed <= ckpt_every)
            if rank == 0:
                ok = ok and resumed in (last // ckpt_every * ckpt_every,
                                        (last + 1) // ckpt_every * ckpt_every)
            if not ok:
                problems.append("%s: attempt %d resumed after step %d, but the previous attempt "
                                "stopped after step %d (checkpoint every %d)"
                                % (where, attempt, resumed, last, ckpt_every))
    return problems


def ckpt_attempts(directory):
    """The attempts (TORCHELASTIC_RESTART_COUNT values) that executed steps, per rank."""
    return {rank: sorted({r["attempt"] for r in records})
            for rank, records in read_ckpt_journal(directory).items()}


# ---- the checkpointing example on simulated hosts: shared by test_rejoin.py and test_elastic.py ----

import unittest  # noqa: E402


class CheckpointJobCase(unittest.TestCase):
    """A test case that runs examples/ckpt_train.py on simulated hosts: a private work
    directory per test (checkpoint, journal, result), one tag for every gculaunch it starts,
    hosts that are removed afterwards, and bounded waits that fail at once when a gculaunch
    exits first.  Subclasses set WORK_PREFIX."""

    WORK_PREFIX = "gltest-ckpt-"

    def setUp(self):
        require_binary()
        self.started = time.monotonic()
        self.tmp = TempDir(prefix=self.WORK_PREFIX)
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        os.chmod(self.work, 0o755)
        self.ckpt = os.path.join(self.work, "ckpt")
        self.journal = os.path.join(self.work, "journal")
        self.result = os.path.join(self.work, "result.json")
        self.tag = new_tag()

    def tearDown(self):
        eprint("  %s: %.1f s" % (self._testMethodName, time.monotonic() - self.started))

    def hosts(self, count, spares=0):
        """`count` hosts plus `spares` more on the same bridge (198.18.0.<count+1>, ...)."""
        hosts = SimulatedHosts(count)
        self.addCleanup(hosts.close)
        self.addCleanup(kill_tagged, self.tag)
        for _ in range(spares):
            add_host(hosts)
        return hosts

    def records(self):
        """The checkpoint journal so far: {rank: [record, ...]}."""
        if not os.path.isdir(self.journal):
            return {}
        return read_ckpt_journal(self.journal)

    def worlds(self):
        """(world size, attempt) pairs journaled by rank 0, in the order they first appeared."""
        out = []
        for r in self.records().get(0, []):
            if not out or out[-1] != (r["world"], r["attempt"]):
                out.append((r["world"], r["attempt"]))
        return out

    def wait_world(self, world, attempt, jobs, timeout=60):
        """Waits until every rank of a `world`-rank job journaled a step of `attempt`."""
        def running():
            recs = self.records()
            return all(any(r["world"] == world and r["attempt"] == attempt
                           for r in recs.get(rank, [])) for rank in range(world))
        self.wait_until(running, "%d ranks running in attempt %d" % (world, attempt), jobs,
                        timeout)

    def wait_until(self, predicate, what, jobs, timeout=60):
        """Polls predicate() (bounded); fails at once when one of `jobs` exits first."""
        deadline = time.monotonic() + timeout
        while not predicate():
            for job in jobs:
                job._pump(0)
                if job.proc.poll() is not None:
                    job.wait(timeout=10)
                    self.fail("a gculaunch exited (code %s) while waiting for %s\n--- its "
                              "stderr:\n%s" % (job.proc.returncode, what, job.stderr[-4000:]))
            if time.monotonic() >= deadline:
                self.fail("timed out after %s s waiting for %s\n%s"
                          % (timeout, what, "\n".join("--- stderr:\n" + j.stderr[-3000:]
                                                      for j in jobs)))
            time.sleep(0.1)

    def checkpoint_step(self):
        """The step of the example's last checkpoint (0: none yet)."""
        try:
            with open(os.path.join(self.ckpt, "checkpoint.json")) as f:
                return json.load(f)["step"]
        except FileNotFoundError:
            return 0


# ---- the hang tests' script: shared by test_hang.py and test_hang_multinode.py ----

_HANG_SCRIPT = r"""
import os, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]

def stuck_in_my_own_function():
    print("rank %d is stuck" % rank, flush=True)
    while True:
        time.sleep(0.2)

if rank == STUCK_RANK and attempt == "0":
    stuck_in_my_own_function()
print("rank %d enters all_reduce in attempt %s" % (rank, attempt), flush=True)
t = torch.ones(1)
dist.all_reduce(t)
print("rank %d done: %d" % (rank, int(t.item())), flush=True)
"""


def hang_script(stuck_rank):
    """A gloo job whose rank `stuck_rank` never enters the all_reduce the others wait in (in
    its first attempt only: gloo's own timeout is 30 minutes), stuck in a function of its own
    (stuck_in_my_own_function) that prints "rank N is stuck" once.  In later attempts every
    rank takes part and prints "rank N done: <world size>"."""
    return _HANG_SCRIPT.replace("STUCK_RANK", str(int(stuck_rank)))


# ---- etcd members on simulated hosts (the etcd rendezvous tests, docs/etcd.md) ----

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


class EtcdCluster:
    """Debian's etcd as a 1- or 3-member cluster, member i listening on host `members[i]` of
    `hosts` (a SimulatedHosts) at <addr>:2379 (clients) and <addr>:2380 (peers).  Each member
    runs in a process group of its own, with a data directory under `workdir`; stop(i) ends
    exactly that group (kill -9 with `hard`), start(i) brings the member back with its data.
    close() stops every member this instance started.  A missing etcd binary raises (a test
    that needs etcd fails, it is never skipped).

    Optional, off by default: `tls`, a dict of PEM files {"ca", "cert", "key"} (the server's
    certificate and key, signed by "ca") and optionally "client_cert"/"client_key" (what
    etcdctl presents) and "client_cert_auth" (True: etcd requires a client certificate
    signed by "ca"); client URLs are then https (peers stay http).  `auth_token_ttl`: etcd's
    --auth-token-ttl in seconds.  `ctl_user` ("user:password") is passed to etcdctl once the
    test enabled authentication."""

    def __init__(self, hosts, members, workdir, token=None, tls=None, auth_token_ttl=None):
        if not os.access(ETCD, os.X_OK):
            raise RuntimeError("etcd is not installed (Debian's etcd-server): run "
                               "scripts/bootstrap.sh as root")
        self.hosts = hosts
        self.members = list(members)
        self.workdir = workdir
        self.token = token or ("gl-" + uuid.uuid4().hex[:8])
        self.tls = dict(tls) if tls else None
        self.auth_token_ttl = auth_token_ttl
        self.ctl_user = None
        self.procs = [None] * len(self.members)
        self._logs = [None] * len(self.members)
        try:
            for i in range(len(self.members)):
                self.start(i, wait=False)
            for i in range(len(self.members)):
                self.wait_healthy(i)
        except Exception:
            self.close()
            raise

    def addr(self, i):
        return self.hosts.addr(self.members[i])

    def endpoint(self, i):
        return "%s:2379" % self.addr(i)

    def scheme(self):
        return "https" if self.tls else "http"

    def _ctl_flags(self):
        flags = []
        if self.tls:
            flags += ["--cacert", self.tls["ca"]]
            if self.tls.get("client_cert"):
                flags += ["--cert", self.tls["client_cert"], "--key", self.tls["client_key"]]
        if self.ctl_user:
            flags += ["--user", self.ctl_user]
        return flags

    def endpoints(self):
        return ",".join(self.endpoint(i) for i in range(len(self.members)))

    def _args(self, i):
        name = "m%d" % i
        peers = ",".join("m%d=http://%s:2380" % (k, self.addr(k))
                         for k in range(len(self.members)))
        client = "%s://%s:2379" % (self.scheme(), self.addr(i))
        extra = []
        if self.tls:
            extra += ["--cert-file", self.tls["cert"], "--key-file", self.tls["key"]]
            if self.tls.get("client_cert_auth"):
                # etcd 3.4 asks for client certificates as soon as a trusted CA is given.
                extra += ["--trusted-ca-file", self.tls["ca"], "--client-cert-auth"]
        if self.auth_token_ttl is not None:
            extra += ["--auth-token-ttl", str(self.auth_token_ttl)]
        return [ETCD, "--name", name,
                "--data-dir", os.path.join(self.workdir, "etcd-" + name),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", "http://%s:2380" % self.addr(i),
                "--initial-advertise-peer-urls", "http://%s:2380" % self.addr(i),
                "--initial-cluster", peers, "--initial-cluster-token", self.token,
                "--initial-cluster-state", "new"] + extra

    def start(self, i, wait=True):
        if self.procs[i] is not None and self.procs[i].poll() is None:
            raise RuntimeError("etcd member %d is already running" % i)
        log = open(os.path.join(self.workdir, "etcd-m%d.log" % i), "ab")
        self._logs[i] = log
        self.procs[i] = subprocess.Popen(
            self.hosts.command_prefix(self.members[i]) + self._args(i), stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True)
        if wait:
            self.wait_healthy(i)

    def healthy(self, i):
        out = subprocess.run(
            self.hosts.command_prefix(self.members[i]) +
            [ETCDCTL, "--endpoints", self.endpoint(i), "--command-timeout=2s"] +
            self._ctl_flags() + ["endpoint", "health"], capture_output=True, text=True,
            timeout=20)
        return out.returncode == 0

    def wait_healthy(self, i, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[i].poll() is not None:
                raise RuntimeError("etcd member %d exited at start: %s" % (i, self.log(i)))
            if self.healthy(i):
                return
            time.sleep(0.2)
        raise RuntimeError("etcd member %d not healthy within %d s: %s" %
                           (i, timeout, self.log(i)))

    def log(self, i):
        try:
            with open(os.path.join(self.workdir, "etcd-m%d.log" % i), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self, i, hard=False):
        proc = self.procs[i]
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL if hard else signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs[i] = None
        if self._logs[i] is not None:
            self._logs[i].close()
            self._logs[i] = None

    def etcdctl(self, *args, via=0, timeout=20):
        """Runs etcdctl against member `via`; returns its CompletedProcess."""
        return subprocess.run(
            self.hosts.command_prefix(self.members[via]) +
            [ETCDCTL, "--endpoints", self.endpoint(via)] + self._ctl_flags() + list(args),
            capture_output=True, text=True, timeout=timeout)

    def close(self):
        for i in range(len(self.members)):
            self.stop(i)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
