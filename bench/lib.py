"""The one harness of gculaunch's benchmarks: paths, rank programs, timing, medians, tables.

Every benchmark under bench/ is a module run from the top of the repository:

    python3 -m bench.NAME [options]

so that `bench` and `tests.integration.gltest` (simulated hosts, etcd, process tagging)
import as packages.  What more than one benchmark needs lives here and only here: the
paths of the build and of the torchrun shims, the trivial rank programs, `Run` (one
launcher per simulated host), the time budget, waiting and polling, process tagging for
single-host runs, and the statistics (`med`, `p90`, `ms`, `ratio`).  Nothing is asserted:
benchmarks print numbers.
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid

from tests.integration import gltest

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(TOP, "bench")
SCRIPTS = os.path.join(TOP, "scripts")
PYTHON = "/usr/bin/python3"  # Debian's python3 with python3-torch 1.13
# Debian's torchrun 1.13, made to start on this Python (bench/torchrun113.py)
TORCHRUN113 = os.path.join(BENCH, "torchrun113.py")
# torch 2.6's torchrun inside the root of scripts/make_torch2_root.sh, entered through
# scripts/in_root.sh, which shows bench/ (IN_ROOT_BINDS) inside the root
TORCHRUN26 = os.path.join(BENCH, "torchrun26.py")
IN_ROOT = os.path.join(SCRIPTS, "in_root.sh")
MAKE_TORCH2_ROOT = os.path.join(SCRIPTS, "make_torch2_root.sh")
CACHE_DIR = os.environ.get("GCULAUNCH_CACHE_DIR",
                           os.path.join(os.path.expanduser("~"), ".cache", "gculaunch"))


# ---- paths and options ----

def build_dir():
    return os.environ.get("BUILD_DIR") or os.path.join(TOP, "build")


def default_gculaunch():
    """$GCULAUNCH_BIN, else the build's gculaunch."""
    return os.environ.get("GCULAUNCH_BIN") or os.path.join(build_dir(), "launcher", "gculaunch")


def env_int(name, default):
    return int(os.environ.get(name, default))


def env_float(name, default):
    return float(os.environ.get(name, default))


def env_list(name, default, kind=int):
    """A space-separated list from the environment, e.g. BENCH_NODES="2 3"."""
    return [kind(x) for x in os.environ.get(name, default).split()]


def die(prog, message, code=2):
    print("%s: error: %s" % (prog, message), file=sys.stderr)
    sys.exit(code)


def require_gculaunch(prog, path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        die(prog, "no gculaunch at %s (build it: scripts/build.sh, or set GCULAUNCH_BIN or "
            "--gculaunch)" % path)
    gltest.BIN = path  # gltest's jobs (NodeJob) run this binary
    return path


def require_root(prog, why="ip netns"):
    if os.geteuid() != 0:
        die(prog, "needs root for %s (run it as root)" % why)


def make_torch2_root():
    """The torch 2.6 root (made once: minutes, needs root); its path, or None with the
    maker's error on stderr."""
    out = subprocess.run([MAKE_TORCH2_ROOT], stdout=subprocess.PIPE, text=True)
    lines = out.stdout.strip().splitlines()
    return lines[-1] if out.returncode == 0 and lines else None


def torchrun26_command(root):
    """torch 2.6's torchrun, run inside `root`, with the environment it needs
    (Debian's torch 2.6 is built without libuv)."""
    cmd = [IN_ROOT, root, "/usr/bin/python3", TORCHRUN26]
    env = {"IN_ROOT_BINDS": BENCH, "USE_LIBUV": "0", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    return cmd, env


def write_script(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


# ---- rank programs ----

# A rank of a multi-node job: "<rank> <world> <time>" in start.<pid> first, then by mode.
#   hold: sleep until killed.
#   fail: the last rank waits (bounded) until every rank of the job started, records the
#         failure time in `fail` and exits 1; ranks started after a failure exit 0 at once
#         (the job ends); the others sleep.
RANK = r'''
import os, sys, time
t0 = time.time()
mode, out = sys.argv[1], sys.argv[2]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
with open(os.path.join(out, "start.%d" % os.getpid()), "w") as f:
    f.write("%d %d %r" % (rank, world, t0))
failed = os.path.join(out, "fail")
if os.path.exists(failed):
    os._exit(0)
if mode == "fail" and rank == world - 1:
    deadline = time.time() + 60
    while time.time() < deadline:
        if sum(1 for n in os.listdir(out) if n.startswith("start.")) >= world:
            break
        time.sleep(0.005)
    t = time.time()
    with open(failed + ".tmp", "w") as f:
        f.write(repr(t))
    os.rename(failed + ".tmp", failed)
    os._exit(1)
time.sleep(300)
'''

# A rank of a one-node job: start.<attempt>.<rank> holds its start time, then by mode.
#   ok:         end.<rank> holds its end time; exit 0.
#   fail:       rank 1 waits until every rank of attempt 0 started, records `fail`, exits 1.
#   restart:    the same in attempt 0; ranks of later attempts exit 0.
#   grandchild: starts a `sleep 120` grandchild, records gc.<rank>, sleeps.
#   storm:      exits 1 at once.
#   hold<S>:    sleeps S seconds, exits 0.
WORKER = r'''
import os, sys, time
t0 = time.time()
mode, out = sys.argv[1], sys.argv[2]
rank, attempt = os.environ["RANK"], os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
def put(name, t):
    with open(os.path.join(out, name), "w") as f:
        f.write(repr(t))
put("start.%s.%s" % (attempt, rank), t0)
def wait_all_started():
    deadline = time.time() + 60
    world = int(os.environ["WORLD_SIZE"])
    while time.time() < deadline:
        if sum(1 for n in os.listdir(out) if n.startswith("start.%s." % attempt)) >= world:
            return
        time.sleep(0.005)
if mode == "storm":
    os._exit(1)
if mode == "ok":
    put("end.%s" % rank, time.time())
    os._exit(0)
if mode == "grandchild":
    import subprocess
    subprocess.Popen(["sleep", "120"])
    put("gc.%s" % rank, time.time())
if attempt == "0" and rank == "1" and mode in ("fail", "restart"):
    wait_all_started()
    put("fail", time.time())
    os._exit(1)
if mode == "restart" and attempt != "0":
    os._exit(0)
if mode.startswith("hold"):
    time.sleep(float(mode[4:]))
    os._exit(0)
time.sleep(120)
'''


def starts(out):
    """[(time, rank, world, pid)] of every RANK process started so far in `out`."""
    found = []
    for name in os.listdir(out):
        if name.startswith("start."):
            try:
                with open(os.path.join(out, name)) as f:
                    rank, world, t = f.read().split()
                found.append((float(t), int(rank), int(world), int(name.split(".")[1])))
            except (OSError, ValueError):
                pass
    return found


def read_fail(out):
    """The time RANK recorded its failure, or None."""
    try:
        with open(os.path.join(out, "fail")) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def all_started(out, world, after=0.0):
    """The time by which ranks 0..world-1 of a `world`-sized job each had a process started
    after `after` (their first such start), or None."""
    first = {}
    for t, rank, w, _ in starts(out):
        if w == world and t > after and (rank not in first or t < first[rank]):
            first[rank] = t
    return max(first.values()) if all(r in first for r in range(world)) else None


def read_time(path):
    with open(path) as f:
        return float(f.read())


# ---- time ----

class Budget:
    """The whole benchmark's time bound: rows left when it is spent are skipped."""

    def __init__(self, seconds):
        self.seconds, self.started = seconds, time.monotonic()

    def left(self):
        return self.seconds - (time.monotonic() - self.started)

    def used(self):
        return time.monotonic() - self.started


def wait_for(predicate, timeout, poll=0.002):
    """The first value of predicate() that is not None, or None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value is not None:
            return value
        time.sleep(poll)
    return None


# ---- launchers on simulated hosts ----

class Run:
    """One launch on every simulated host (gltest.SimulatedHosts); each launcher in its own
    process group.  Node 0 starts `lead` seconds before the others (its store is listening
    by then).  again(i) starts node i's launcher once more (its previous one is gone):
    procs[i] becomes the new process, and exit_times/codes are keyed by (i, how many
    launches of node i before); exit_times[i] is the first launch's exit.  With `logs` (a
    directory) each launcher's output is kept there as NAME.nodeI.GENERATION.log."""

    def __init__(self, hosts, commands, env, lead=0.5, name="run", logs=None, timeout=60):
        self.tag = gltest.new_tag()
        self.hosts, self.commands, self.env, self.name = hosts, commands, env, name
        self.logs, self.timeout = logs, timeout
        self.procs, self.exit_times, self.codes, self.launches = [], {}, {}, {}
        self.launch_times = []
        self.all_procs = []
        for i in range(len(commands)):
            if i == 1 and lead:
                time.sleep(lead)
            self.procs.append(None)
            self.launch_times.append(self._start(i))

    def _start(self, i):
        e = gltest.tagged_env(self.tag, extra=self.env(i))
        generation = self.launches.get(i, 0)
        self.launches[i] = generation + 1
        log = subprocess.DEVNULL
        if self.logs:
            log = open(self.log_path(i, generation), "w")
        t = time.time()
        p = subprocess.Popen(self.hosts.command_prefix(i) + self.commands[i], env=e,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
        if self.logs:
            log.close()
        self.procs[i] = p
        self.all_procs.append(p)
        threading.Thread(target=self._wait, args=((i, generation), p), daemon=True).start()
        return t

    def log_path(self, i, generation=0):
        return os.path.join(self.logs, "%s.node%d.%d.log" % (self.name, i, generation))

    def log_has(self, i, text, generation=0):
        try:
            with open(self.log_path(i, generation), errors="replace") as f:
                return text in f.read()
        except (OSError, TypeError):
            return False

    def again(self, i):
        """Starts node i's launcher again; returns the time just before it was started."""
        return self._start(i)

    def _wait(self, key, p):
        code = p.wait()
        self.codes[key] = code
        self.exit_times[key] = time.time()
        if key[1] == 0:
            self.exit_times[key[0]] = self.exit_times[key]

    def wait_exits(self, which, timeout=None):
        """The exit times of the first launchers of nodes `which`, or None after `timeout`."""
        return wait_for(lambda: [self.exit_times[i] for i in which]
                        if all(i in self.exit_times for i in which) else None,
                        self.timeout if timeout is None else timeout)

    def kill_node(self, i):
        """SIGKILL to node i's launcher's process group (its ranks too)."""
        try:
            os.killpg(self.procs[i].pid, signal.SIGKILL)
        except OSError:
            pass

    def kill(self):
        for p in self.all_procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in self.all_procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        gltest.wait_no_tagged(self.tag, 3)
        gltest.kill_tagged(self.tag)


# ---- processes of single-host runs, tagged by GCULAUNCH_BENCH_TAG ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_tag():
    return uuid.uuid4().hex


def tagged_pids(tag):
    """Every process whose environment has GCULAUNCH_BENCH_TAG=tag."""
    needle = ("GCULAUNCH_BENCH_TAG=" + tag).encode()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/environ" % name, "rb") as f:
                    if needle in f.read().split(b"\0"):
                        pids.append(int(name))
            except OSError:
                pass
    return pids


def alive(pid):
    """pid still runs (and is not a zombie)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def tagged_alive(tag):
    """The tagged processes that still run (zombies excluded)."""
    return [pid for pid in tagged_pids(tag) if alive(pid)]


def kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def guardian_alive(launcher_pid):
    """Whether the guardian of gculaunch `launcher_pid` (or an orphaned one) still runs."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    head, _, rest = f.read().rpartition(b")")
                fields = rest.split()
                if head.endswith(b"(gculaunch-guard") and fields[0] not in (b"Z", b"X") \
                        and int(fields[1]) in (launcher_pid, 1):
                    return True
            except (OSError, ValueError, IndexError):
                pass
    return False


def vm_hwm_kb(pid):
    """The peak resident set (VmHWM) of pid in kB, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


# ---- statistics and tables ----

def median(values):
    """The median of the values that are not None (or NaN), or None."""
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else None


def med(values):
    """(median or None, how many values counted) of the values that are not None."""
    values = [v for v in values if v is not None and v == v]
    return (statistics.median(values) if values else None), len(values)


def p90(values):
    """The 90th percentile (nearest rank) of the values that are not None, or None."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    return values[min(len(values) - 1, max(0, int(round(0.9 * len(values))) - 1))]


def stats(values):
    """(median, p90, count) of the values that are not None."""
    m, n = med(values)
    return m, p90(values), n


def quantile(values, q):
    """The value at index q * n of the sorted values (NaN if none): p50, p99 of latencies."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def ms(seconds):
    """Seconds as whole milliseconds, "-" for None."""
    return "-" if seconds is None else "%.0f" % (seconds * 1000)


def ratio(a, b):
    """a / b as "N.Nx", "-" when either is missing."""
    return "-" if a is None or not b else "%.1fx" % (a / b)
