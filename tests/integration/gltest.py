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
