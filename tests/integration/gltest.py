"""Shared helpers for gculaunch's integration tests.

Tests drive the real binary ($GCULAUNCH_BIN) with real Python/PyTorch
workers.  Every process a test starts carries a unique tag in its environment
(GCULAUNCH_TEST_TAG), so survivors are found by scanning /proc/*/environ for
the tag: nothing outside the test is ever looked at or signalled.
"""
import os
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
SHARED_DIR = os.environ.get("GCULAUNCH_SHARED_DIR", os.path.join(SOURCE_DIR, "..", "shared"))
CACHE_DIR = os.environ.get("GCULAUNCH_CACHE_DIR",
                           os.path.join(os.path.expanduser("~"), ".cache", "gculaunch"))
PYTHON = "/usr/bin/python3"  # Debian's python3 with python3-torch 1.13


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
    """Runs gculaunch (or anything) to completion; returns CompletedProcess with text output."""
    return subprocess.run(args, env=env, cwd=cwd, input=input, capture_output=True,
                          text=True, timeout=timeout)


def torch2_python():
    """Path of a python3 with torch 2.x (Debian trixie chroot), creating the cached chroot
    when it is missing.  Raises if it cannot be made: a test needing it must fail, not skip."""
    root = os.path.join(CACHE_DIR, "torch2-trixie")
    tools = os.path.join(SHARED_DIR, "tools")
    env_sh = os.path.join(tools, "torch2-env.sh")
    runner = os.path.join(tools, "torch2-python")
    if not os.path.exists(env_sh):
        raise RuntimeError("missing %s (is shared/ beside the checkout?)" % env_sh)
    os.makedirs(CACHE_DIR, exist_ok=True)
    out = subprocess.run(["bash", env_sh, root], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0 or "torch 2." not in out.stdout:
        raise RuntimeError("could not make the torch 2.x chroot at %s:\n%s\n%s"
                           % (root, out.stdout, out.stderr[-3000:]))
    return runner, root


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


class Job:
    """A running gculaunch with piped stdout/stderr and a tagged environment.

    Use as a context manager: on exit every process carrying the tag is
    SIGKILLed (the cleanup a failed test still owes), then the pipes are closed.
    """

    def __init__(self, args, tag=None, extra_env=None, stdin=subprocess.DEVNULL, prefix=None,
                 cwd=None):
        self.tag = tag or new_tag()
        self.env = tagged_env(self.tag, extra=extra_env)
        cmd = list(prefix or []) + [require_binary()] + list(args)
        self.proc = subprocess.Popen(cmd, env=self.env, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, start_new_session=True)
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
