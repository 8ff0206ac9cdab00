#!/usr/bin/env python3
"""bench/scale.py - the control plane at scale: thousands of simulated nodes on one machine.

  python3 -m bench.scale --nodes N --ranks-per-node R [--torch 1.13|2.x] [--store-proxy]
                        [--json] ...

Node 0 is the real gculaunch (its store, coordinator and agent, with R simulated ranks as
processes: `scale_sim rank`).  Nodes 1..N-1 are simulated by `scale_sim nodes` (bench/scale/):
each is the real agent code of a gculaunch started with `--node-rank k` (the same front end,
NodeAgent, job board and agent link to node 0's store), many per process on one event loop,
with simulated ranks in place of processes.  Every simulated rank does to the store what a
torch rank of an NCCL job does at start-up (bench/scale/sim_rank.h): connect (twice for torch
1.13), ADD init/, the store barrier of init_process_group, the unique id published by rank 0
and waited for by every other rank.  The ranks of node k connect from their own source
address 127.64.x.y (one address has about 28k ephemeral ports towards one store port), the
agents meet node 0 at 127.0.<k/4096>.1.  With --store-proxy every simulated node also runs
gculaunch's store proxy (rendezvous/proxy.h) on its source address and its ranks connect
there, so node 0 sees one upstream connection per node besides the agents'.

Measured, in this order (each phase bounded by --phase seconds):
  rendezvous_s       node 0 started -> every node started its ranks (the plan reached all)
  connect_barrier_s  node 0 started -> every rank connected and past the barrier
  unique_id_s        node 0 started -> every rank has the unique id
  restart_s          a rank of node N-1 fails -> every rank of the new attempt past the barrier
  node_lost_s        node N-1's gculaunch killed and started again -> every rank past the
                     barrier again (a fixed-size job re-forms once the node is back)
  node 0's CPU seconds (utime + stime) per phase and its peak memory (VmHWM), the store's
  connections, the harness's own CPU and memory.

Needs a build (scripts/build.sh: build/launcher/gculaunch and build/bench/scale/scale_sim).
As root it runs in a private network namespace (unshare --net, loopback only), where it may
widen net.ipv4.ip_local_port_range without touching the machine's; every process it starts is
in a process group of its own and ended at the end.  It raises its open-file limit
(RLIMIT_NOFILE) to what the job needs and checks fs.nr_open, fs.file-max and the port range,
and says so when it cannot.  The whole run is bounded by --timeout.  Nothing is asserted:
it prints numbers (with --json, one JSON line per measurement); the exit code is 1 when a
phase failed or ran out of time, 2 for a setup that cannot work.
"""
import argparse
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from bench import lib

PROG = "bench.scale"
NETNS_ENV = "_GCULAUNCH_BENCH_SCALE_NETNS"  # set once inside the private network namespace
TICK = os.sysconf("SC_CLK_TCK")
MARGIN_FDS = 1024   # descriptors a process needs besides the job's connections


class PhaseFailed(Exception):
    pass


def free_port():
    """A port that nothing on 127.0.0.1 listens on now (the kernel's choice for port 0): a fixed
    port collides with another job or benchmark on the same machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_sysctl(name):
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as f:
            return f.read().split()
    except OSError:
        return None


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    except OSError:
        return None


def status_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def count_sockets(pid):
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"):
                    n += 1
            except OSError:
                pass
    except OSError:
        return None
    return n


# ---- limits: descriptors and ports ----

def needed_descriptors(args):
    """(node 0's, the largest simulating process's) descriptors."""
    per_rank = 2 if args.torch == "1.13" else 1
    share = -(-(args.nodes - 1) // args.procs)
    if args.store_proxy:
        # Node 0: its own ranks, and per node one upstream (it carries the node's ranks and
        # its agent's two connections).  A simulating process: both ends of every rank
        # connection and of the agent's two, and per node the upstream and the proxy's
        # listener.
        node0 = args.ranks_per_node * per_rank + args.nodes + MARGIN_FDS
        sim = share * (2 * args.ranks_per_node * per_rank + 6) + MARGIN_FDS
        return node0, sim
    node0 = args.nodes * args.ranks_per_node * per_rank + 2 * args.nodes + MARGIN_FDS
    sim = share * (args.ranks_per_node * per_rank + 2) + MARGIN_FDS
    return node0, sim


def raise_limits(args, notes):
    """Raises RLIMIT_NOFILE (children inherit it) and checks the sysctls; returns False when
    the job cannot fit."""
    node0, sim = needed_descriptors(args)
    want = max(node0, sim)
    nr_open = int((read_sysctl("fs.nr_open") or ["1048576"])[0])
    file_max = int((read_sysctl("fs.file-max") or ["0"])[0])
    ok = True
    if want > nr_open:
        notes.append("fs.nr_open is %d, node 0 needs %d descriptors (fix: sysctl -w fs.nr_open=%d)"
                     % (nr_open, want, want))
        ok = False
    total = node0 + sim * args.procs
    if file_max and total > file_max:
        notes.append("fs.file-max is %d, the run needs about %d descriptors (fix: sysctl -w "
                     "fs.file-max=%d)" % (file_max, total, total))
        ok = False
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(want, nr_open)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(hard, target)))
        except (ValueError, OSError) as e:
            notes.append("cannot raise the open-file limit from %d to %d: %s (fix: ulimit -n %d, "
                         "as root)" % (soft, target, e, target))
            ok = False
    args.open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ok


def check_ports(args, notes):
    """The most connections from one source address to one destination is the ephemeral port
    range: the ranks of one node (one source) and the agents meeting node 0 at one address."""
    lo, hi = (int(x) for x in (read_sysctl("net.ipv4.ip_local_port_range") or ["32768", "60999"]))
    per_rank = 2 if args.torch == "1.13" else 1
    worst = max(args.ranks_per_node * per_rank, 2 * min(args.nodes, 4096))
    if hi - lo + 1 < worst and os.environ.get(NETNS_ENV) == "1":
        subprocess.run(["sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65535"])
        lo, hi = (int(x) for x in read_sysctl("net.ipv4.ip_local_port_range"))
    args.port_range = "%d-%d" % (lo, hi)
    if hi - lo + 1 < worst:
        notes.append("net.ipv4.ip_local_port_range %s has %d ports, one source address needs %d "
                     "(fix: sysctl -w net.ipv4.ip_local_port_range='1024 65535')"
                     % (args.port_range, hi - lo + 1, worst))
        return False
    return True


# ---- the processes ----

class Harness:
    """Node 0 (gculaunch), the simulating processes, their output and the phases."""

    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.sel = selectors.DefaultSelector()
        self.sims = []       # Popen of `scale_sim nodes`
        self.node0 = None    # Popen of gculaunch
        self.buffers = {}
        self.events = []     # (source, event dict)
        self.failures = []
        self.t0 = None
        self.cpu_samples = []  # (monotonic time, node 0's CPU seconds), while waiting

    def flags(self):
        a = self.args
        return (["--nnodes", str(a.nodes), "--nproc-per-node", str(a.ranks_per_node),
                "--master-port", str(a.store_port), "--max-restarts", "3", "--rdzv-id", "scale",
                "--rdzv-timeout", str(int(a.phase)), "--restart-backoff", "off"]
                + (["--store-proxy"] if a.store_proxy else [])
                + ["--no-python", a.scale_sim, "rank", "--dialect", self.dialect(), "--hold",
                   str(int(a.timeout))])

    def dialect(self):
        return "v1" if self.args.torch == "1.13" else "v2"

    def _watch(self, proc, name):
        os.set_blocking(proc.stdout.fileno(), False)
        self.buffers[proc.stdout.fileno()] = b""
        self.sel.register(proc.stdout, selectors.EVENT_READ, name)

    def start_sims(self):
        a = self.args
        nodes = list(range(1, a.nodes))
        share = -(-len(nodes) // a.procs)
        for i in range(0, len(nodes), share):
            chunk = nodes[i:i + share]
            cmd = [a.scale_sim, "nodes", "--first", str(chunk[0]), "--count", str(len(chunk)),
                   "--dialect", self.dialect(), "--work-dir", self.work, "--"] + self.flags()
            err = open(os.path.join(self.work, "sim-%d.err" % chunk[0]), "w")
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                 start_new_session=True)
            err.close()
            p.first, p.count = chunk[0], len(chunk)
            self.sims.append(p)
            self._watch(p, "sim%d" % chunk[0])

    def start_node0(self):
        a = self.args
        cmd = [a.gculaunch, "--node-rank", "0", "--master-addr", "127.0.0.1"] + self.flags()
        err = open(os.path.join(self.work, "node0.err"), "w")
        self.t0 = time.monotonic()
        self.node0 = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=err, start_new_session=True)
        err.close()
        self._watch(self.node0, "node0")

    def send(self, sim, line):
        try:
            sim.stdin.write((line + "\n").encode())
            sim.stdin.flush()
        except OSError:
            pass

    def sim_of(self, node):
        for p in self.sims:
            if p.first <= node < p.first + p.count:
                return p
        raise PhaseFailed("node %d is not simulated" % node)

    def pump(self, timeout):
        """Reads what the processes printed for at most `timeout` seconds."""
        for key, _ in self.sel.select(timeout):
            fd = key.fileobj.fileno()
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                self.sel.unregister(key.fileobj)
                if key.data == "node0" or key.data.startswith("sim"):
                    self.failures.append("%s ended (exit code %s)" % (key.data, self._code(key.data)))
                continue
            buf = self.buffers[fd] + data
            *lines, self.buffers[fd] = buf.split(b"\n")
            for line in lines:
                self._line(key.data, line.decode(errors="replace"))

    def _code(self, name):
        proc = self.node0 if name == "node0" else next(
            (p for p in self.sims if "sim%d" % p.first == name), None)
        if proc is None:
            return "?"
        try:
            return proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return "still running"

    def _line(self, source, line):
        at = line.find('{"event"')
        if at < 0:
            return
        try:
            event = json.loads(line[at:])
        except ValueError:
            return
        if event.get("event") == "failed":
            self.failures.append("%s: %s" % (source, event.get("what")))
        self.events.append((source, event))

    def wait(self, what, predicate, limit):
        deadline = time.monotonic() + limit
        while not predicate():
            if self.failures:
                raise PhaseFailed("%s: %s" % (what, self.failures[0]))
            left = deadline - time.monotonic()
            if left <= 0:
                raise PhaseFailed("%s: not done within %.0f s (--phase)" % (what, limit))
            self.sample_cpu()
            self.pump(min(left, 0.2))

    def sample_cpu(self):
        """Records node 0's CPU time now and then (at most every 0.1 s), to split it by phase."""
        if self.node0 is None or self.node0.poll() is not None:
            return
        now = time.monotonic()
        if self.cpu_samples and now - self.cpu_samples[-1][0] < 0.1:
            return
        cpu = cpu_seconds(self.node0.pid)
        if cpu is not None:
            self.cpu_samples.append((now, cpu))

    def node0_cpu_at(self, t):
        """Node 0's CPU seconds at monotonic time `t`, from the nearest samples (None: none)."""
        before = [c for at, c in self.cpu_samples if at <= t]
        after = [c for at, c in self.cpu_samples if at >= t]
        if not before or not after:
            return None
        return (before[-1] + after[0]) / 2.0

    def harness_cpu(self):
        """CPU seconds the simulating processes used so far (read from /proc)."""
        return sum(cpu_seconds(p.pid) or 0.0 for p in self.sims)

    def found(self, kind, epoch, source=None):
        return [e for s, e in self.events
                if e.get("event") == kind and e.get("epoch") == epoch
                and (source is None or s == source)]

    def epoch_times(self, epoch):
        """(started, barrier, uid): the latest time of each over every node, or None."""
        sims = [self.found(k, epoch) for k in ("started", "barrier", "uid")]
        if any(len(x) < len(self.sims) for x in sims):
            return None
        ranks = {e["rank"]: e for e in self.found("rank", epoch, "node0")}
        if len(ranks) < self.args.ranks_per_node:
            return None
        started = max(e["t"] for e in sims[0])
        barrier = max([e["t"] for e in sims[1]] + [e["barrier"] for e in ranks.values()])
        uid = max([e["t"] for e in sims[2]] + [e["uid"] for e in ranks.values()])
        return started, barrier, uid

    def check_ranks(self, epoch):
        """Raises PhaseFailed unless the nodes of `epoch` together hold every global rank of
        the world exactly once, with one WORLD_SIZE; returns how many ranks that is."""
        world = self.args.nodes * self.args.ranks_per_node
        covered = [0] * world
        for rank in self.found("rank", epoch, "node0"):
            if 0 <= rank["rank"] < world:
                covered[rank["rank"]] += 1
        for started in self.found("started", epoch):
            if started.get("duplicates") or started.get("world_sizes") != [world]:
                raise PhaseFailed("epoch %d: a rank planned twice or a wrong WORLD_SIZE: %s"
                                  % (epoch, started))
            for lo, hi in started["ranks"]:
                if lo < 0 or hi >= world:
                    raise PhaseFailed("epoch %d: ranks %d-%d outside the world of %d"
                                      % (epoch, lo, hi, world))
                for r in range(lo, hi + 1):
                    covered[r] += 1
        wrong = [r for r, n in enumerate(covered) if n != 1]
        if wrong:
            raise PhaseFailed("epoch %d: %d ranks not held by exactly one node (first: rank %d, "
                              "%d times)" % (epoch, len(wrong), wrong[0], covered[wrong[0]]))
        return world

    def node0_usage(self):
        pid = self.node0.pid
        return {"cpu_s": cpu_seconds(pid), "rss_kb": status_kb(pid, "VmRSS"),
                "hwm_kb": status_kb(pid, "VmHWM"), "sockets": count_sockets(pid)}

    def sim_stats(self):
        for p in self.sims:
            self.send(p, "stats")
        got = lambda: len([e for _, e in self.events if e.get("event") == "stats"]) >= len(self.sims)
        self.wait("harness stats", got, 30)
        stats = [e for _, e in self.events if e.get("event") == "stats"][-len(self.sims):]
        self.events = [(s, e) for s, e in self.events if e.get("event") != "stats"]
        return (sum(e["cpu_s"] for e in stats), sum(e["hwm_kb"] for e in stats))

    def stop(self):
        for p in self.sims:
            self.send(p, "exit")
        procs = [p for p in [self.node0] + self.sims if p is not None]
        if self.node0 is not None and self.node0.poll() is None:
            os.killpg(self.node0.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the group each was started in
            except ProcessLookupError:
                pass
            p.wait()


def wait_listening(port, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.002)
    return False


def run_phases(h, results):
    a = h.args
    h.start_sims()
    h.wait("preparing the simulated nodes",
           lambda: len([e for _, e in h.events if e.get("event") == "prepared"]) >= len(h.sims),
           a.phase)
    cpu0 = None
    h.start_node0()
    if not wait_listening(a.store_port, 30):
        raise PhaseFailed("node 0's store did not listen within 30 s (see node0.err)")
    for p in h.sims:
        h.send(p, "go")
    h.wait("rendezvous, connect and barrier", lambda: h.epoch_times(0) is not None, a.phase)
    started, barrier, uid = h.epoch_times(0)
    results["ranks_checked"] = h.check_ranks(0)
    results["rendezvous_s"] = started - h.t0
    results["connect_barrier_s"] = barrier - h.t0
    results["unique_id_s"] = uid - h.t0
    usage = h.node0_usage()
    results["node0_cpu_connect_s"] = usage["cpu_s"]
    results["harness_cpu_connect_s"] = h.harness_cpu()
    rendezvous_cpu = h.node0_cpu_at(started)
    if rendezvous_cpu is not None:
        results["node0_cpu_rendezvous_s"] = rendezvous_cpu
    results["store_sockets"] = usage["sockets"]
    cpu0 = usage["cpu_s"]
    victim = a.nodes - 1
    if "restart" in a.parts:
        t1 = time.monotonic()
        h.send(h.sim_of(victim), "fail %d" % victim)
        h.wait("restart after a rank failure", lambda: h.epoch_times(1) is not None, a.phase)
        results["restart_s"] = h.epoch_times(1)[1] - t1
        h.check_ranks(1)
        usage = h.node0_usage()
        results["node0_cpu_restart_s"] = usage["cpu_s"] - cpu0
        cpu0 = usage["cpu_s"]
    if "lost" in a.parts:
        epoch = 2 if "restart" in a.parts else 1
        t2 = time.monotonic()
        h.send(h.sim_of(victim), "kill %d" % victim)
        h.send(h.sim_of(victim), "rejoin %d" % victim)
        h.wait("re-forming after a lost node", lambda: h.epoch_times(epoch) is not None, a.phase)
        results["node_lost_s"] = h.epoch_times(epoch)[1] - t2
        h.check_ranks(epoch)
        usage = h.node0_usage()
        results["node0_cpu_lost_s"] = usage["cpu_s"] - cpu0
    usage = h.node0_usage()
    results["node0_cpu_s"] = usage["cpu_s"]
    results["node0_peak_rss_mb"] = usage["hwm_kb"] / 1024.0
    results["node0_rss_mb"] = usage["rss_kb"] / 1024.0
    sim_cpu, sim_hwm = h.sim_stats()
    results["harness_cpu_s"] = sim_cpu
    results["harness_peak_rss_mb"] = sim_hwm / 1024.0


def report(args, results, notes, error):
    context = {"nodes": args.nodes, "ranks_per_node": args.ranks_per_node, "torch": args.torch,
               "store_proxy": args.store_proxy,
               "cpus": os.cpu_count(), "load_avg_start": args.load_start,
               "load_avg_end": float(open("/proc/loadavg").read().split()[0])}
    if args.json:
        for name, value in results.items():
            print(json.dumps(dict(context, measurement=name, value=value)), flush=True)
        if error:
            print(json.dumps(dict(context, measurement="error", value=error)), flush=True)
        return
    print("scale: %d nodes x %d ranks (%d ranks), torch %s dialect%s, %d CPUs, load average %.1f "
          "-> %.1f, open-file limit %s, ports %s, somaxconn %s"
          % (args.nodes, args.ranks_per_node, args.nodes * args.ranks_per_node, args.torch,
             ", store proxy" if args.store_proxy else "",
             os.cpu_count(), args.load_start, context["load_avg_end"], args.open_files,
             args.port_range, (read_sysctl("net.core.somaxconn") or ["?"])[0]))
    for note in notes:
        print("  note: " + note)
    for name, value in results.items():
        print("  %-22s %s" % (name, ("%.3f" % value) if isinstance(value, float) else value))
    if error:
        print("  FAILED: " + error)


def enter_netns(args):
    cmd = ["unshare", "--net", "env", "%s=1" % NETNS_ENV, "timeout", "--kill-after=10",
           str(int(args.timeout)), lib.PYTHON, "-m", "bench.scale"] + sys.argv[1:]
    path = os.pathsep.join(p for p in (lib.TOP, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=path)).returncode


def parse_args():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, required=True, help="nodes in the job (>= 2)")
    ap.add_argument("--ranks-per-node", type=int, required=True, help="ranks per node")
    ap.add_argument("--torch", choices=("1.13", "2.x"), default="1.13",
                    help="whose store traffic the ranks make (default 1.13: two connections "
                    "per rank, a polling barrier)")
    ap.add_argument("--json", action="store_true", help="one JSON line per measurement")
    ap.add_argument("--store-proxy", action="store_true",
                    help="every simulated node runs gculaunch's store proxy (--store-proxy): its "
                         "ranks connect to it, and node 0 sees one upstream per node")
    ap.add_argument("--parts", default="restart,lost",
                    help="after connecting: restart, lost (comma-separated; '' for none)")
    ap.add_argument("--procs", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                    help="processes simulating nodes 1..N-1 (default: CPUs - 1)")
    ap.add_argument("--phase", type=float, default=120, help="seconds allowed per phase")
    ap.add_argument("--timeout", type=float, default=900, help="seconds for the whole run")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="node 0's gculaunch (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--scale-sim", default=os.path.join(lib.build_dir(), "bench", "scale",
                                                        "scale_sim"),
                    help="default build/bench/scale/scale_sim (BUILD_DIR sets build/)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (logs of node 0 and of the simulated nodes)")
    ap.add_argument("--no-netns", action="store_true",
                    help="stay in this network namespace (loopback still; the default when "
                    "not root)")
    args = ap.parse_args()
    if args.nodes < 2 or args.ranks_per_node < 1:
        lib.die(PROG, "--nodes must be at least 2 and --ranks-per-node at least 1 (fix: e.g. "
                "--nodes 64 --ranks-per-node 8)")
    args.parts = [p for p in args.parts.split(",") if p]
    for p in args.parts:
        if p not in ("restart", "lost"):
            lib.die(PROG, "--parts: unknown part %r (fix: restart, lost or both)" % p)
    args.procs = max(1, min(args.procs, args.nodes - 1))
    args.gculaunch = os.path.abspath(args.gculaunch)
    args.scale_sim = os.path.abspath(args.scale_sim)
    for path in (args.gculaunch, args.scale_sim):
        if not os.access(path, os.X_OK):
            lib.die(PROG, "%s is missing (fix: scripts/build.sh, or --gculaunch / --scale-sim)"
                    % path)
    return args


def main():
    args = parse_args()
    if os.geteuid() == 0 and not args.no_netns and os.environ.get(NETNS_ENV) != "1":
        return enter_netns(args)
    if os.environ.get(NETNS_ENV) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    args.load_start = float(open("/proc/loadavg").read().split()[0])
    notes = []
    if os.geteuid() != 0:
        notes.append("not root: no private network namespace, the machine's limits as they are")
    fits = raise_limits(args, notes)
    fits = check_ports(args, notes) and fits
    results = {}
    if not fits:
        report(args, results, notes, "the job does not fit the limits above")
        return 2
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    args.store_port = free_port()
    work = tempfile.mkdtemp(prefix="gculaunch-scale-", dir=base)
    h = Harness(args, work)
    error = None
    try:
        run_phases(h, results)
    except PhaseFailed as e:
        error = str(e)
        if h.node0 is not None and h.node0.poll() is None:  # what node 0 had used by then
            usage = h.node0_usage()
            results.setdefault("node0_cpu_s", usage["cpu_s"])
            results.setdefault("node0_peak_rss_mb", (usage["hwm_kb"] or 0) / 1024.0)
    finally:
        h.stop()
    if error:
        for name in sorted(os.listdir(work)):
            if name.endswith((".err", ".log")):
                with open(os.path.join(work, name), errors="replace") as f:
                    tail = f.read()[-1500:]
                if tail.strip():
                    print("---- %s (last lines)\n%s" % (name, tail), file=sys.stderr)
    if args.keep:
        print("%s: logs kept in %s" % (PROG, work), file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    report(args, results, notes, error)
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
