#!/usr/bin/env bash
# bench_etcd.sh - the etcd job rendezvous (--rdzv-backend etcd, docs/etcd.md) against
# gculaunch's built-in rendezvous and against Debian's torchrun 1.13 with its c10d
# rendezvous (scripts/torchrun113.py), on simulated hosts (network namespaces made by
# tests/integration/gltest.py SimulatedHosts; one extra host runs a one-member etcd,
# gltest.EtcdCluster).  A benchmark, not a test: it prints numbers and asserts nothing.
# Needs root (ip netns) and Debian's etcd-server.  Every namespace it creates is deleted at
# the end, every process it starts is killed by its process group.
#
#   nice -n 19 scripts/bench_etcd.sh      (BENCH_REPS=3, BENCH_NODES="3 8", BENCH_NPROC=1)
#
# Ranks are trivial Python programs (no torch import) that write their start time, rank and
# world size to a file named by their pid.  Rows, per node count N:
#   rendezvous  from the moment the last node's launcher was started until every rank of the
#               job has run its first line.  Node 0 is started 0.5 s before the others on
#               every side (it hosts the store for the built-in and c10d sides).  torchrun's
#               number includes its own start (Python importing torch), as a user sees it.
#                 built-in: MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK given to each node, as a
#                   platform does (gculaunch's TCPStore on node 0).
#                 etcd: --rdzv-backend etcd --rdzv-endpoint <etcd host>:2379 --rdzv-id,
#                   --nnodes N, nothing else (the nodes elect the leader in etcd).
#                 torchrun: --rdzv_backend c10d, node 0's agent hosts the store.
#   restart     in the same run (--max-restarts 1): the last rank exits 1 once every rank
#               runs; from that exit until every rank of every node has started again (fresh
#               processes, counted over all nodes).  torchrun with its default monitor
#               interval (5 s): that poll is most of its number.
#   node loss   etcd only, 3 nodes, --nnodes 2:3, last_call_timeout=1, lease_ttl = 2, 5 and
#               10 s.  Once every rank runs, one node's gculaunch and its ranks (its process
#               group) get SIGKILL; from the kill until every rank of the 2-node job has
#               started on the two other nodes.  The etcd nodes talk to each other only
#               through etcd, so a killed node is noticed when its lease ends (up to one TTL
#               after its last refresh, which came at most TTL/3 before the kill); then the
#               job re-forms on the two left.  Printed also as a multiple of the TTL.
#                 non-leader: a node that does not lead the term: the leader sees its
#                   heartbeat key deleted and re-forms the job.
#                 leader: the node named by /gculaunch/<id>/leader in etcd: the other two see
#                   the leader key deleted, elect a new leader (a new term, a new ranks'
#                   store) and form the 2-node job there (last call 1 s).
#               (torchrun 1.13's own etcd backend needs etcd's v2 API, which Debian's etcd
#               3.4 serves only with --enable-v2: it is not compared here.)
# Prints the median (and how many runs completed) in milliseconds, torchrun/etcd and
# etcd/built-in ratios.  The whole run is bounded (BENCH_BUDGET seconds, default 900): rows
# left when the budget is spent are printed as "-".
#
# Environment: GCULAUNCH_BIN (default build/launcher/gculaunch), BENCH_REPS (3), BENCH_NODES
# ("3 8"), BENCH_NPROC (1 rank per node), BENCH_TTLS ("2 5 10"), BENCH_BUDGET (900),
# BENCH_LOG_DIR (keep every launcher's output there).
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
gculaunch=${GCULAUNCH_BIN:-$top/build/launcher/gculaunch}
[ -x "$gculaunch" ] || { echo "bench_etcd: error: no gculaunch at $gculaunch (build it: scripts/build.sh, or set GCULAUNCH_BIN)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench_etcd: error: needs root for ip netns (run it as root)" >&2; exit 2; }
[ -x /usr/bin/etcd ] || { echo "bench_etcd: error: etcd is not installed (run scripts/bootstrap.sh as root)" >&2; exit 2; }

exec /usr/bin/python3 - "$top" "$gculaunch" "$here/torchrun113.py" <<'PY'
import json, os, signal, statistics, subprocess, sys, tempfile, threading, time

TOP, GCULAUNCH, TORCHRUN = sys.argv[1], sys.argv[2], sys.argv[3]
REPS = int(os.environ.get("BENCH_REPS", "3"))
NODE_COUNTS = [int(n) for n in os.environ.get("BENCH_NODES", "3 8").split()]
NPROC = int(os.environ.get("BENCH_NPROC", "1"))
TTLS = [int(t) for t in os.environ.get("BENCH_TTLS", "2 5 10").split()]
BUDGET = float(os.environ.get("BENCH_BUDGET", "900"))
LOG_DIR = os.environ.get("BENCH_LOG_DIR") or None
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import gltest  # SimulatedHosts, EtcdCluster, process tagging

PYTHON = "/usr/bin/python3"
RUN_TIMEOUT = 60      # seconds for one rendezvous, one restart, one exit
STARTED = time.monotonic()
if LOG_DIR:
    os.makedirs(LOG_DIR, exist_ok=True)

# A rank: "<rank> <world> <time>" in start.<pid> first.  fail: the last rank waits (bounded)
# until every rank of the job started, records the time and exits 1; ranks started after that
# exit 0 at once (the job ends).  hold: sleep until killed.
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


def budget_left():
    return BUDGET - (time.monotonic() - STARTED)


class Run:
    """One launcher per command, each on its simulated host and in its own process group;
    node 0 starts `lead` seconds before the others."""

    def __init__(self, hosts, commands, env, name, lead=0.5):
        self.tag = gltest.new_tag()
        self.procs, self.exit_times, self.launch_times = [], {}, []
        for i, cmd in enumerate(commands):
            if i == 1 and lead:
                time.sleep(lead)
            log = subprocess.DEVNULL
            if LOG_DIR:
                log = open(os.path.join(LOG_DIR, "%s.node%d.log" % (name, i)), "w")
            self.launch_times.append(time.time())
            p = subprocess.Popen(hosts.command_prefix(i) + cmd,
                                 env=gltest.tagged_env(self.tag, extra=env(i)),
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 start_new_session=True)
            if LOG_DIR:
                log.close()
            self.procs.append(p)
            threading.Thread(target=self._wait, args=(i, p), daemon=True).start()

    def _wait(self, i, p):
        p.wait()
        self.exit_times[i] = time.time()

    def wait_exits(self, which, timeout=RUN_TIMEOUT):
        return wait_for(lambda: True if all(i in self.exit_times for i in which) else None,
                        timeout)

    def kill_node(self, i):
        try:
            os.killpg(self.procs[i].pid, signal.SIGKILL)
        except OSError:
            pass

    def kill(self):
        for i in range(len(self.procs)):
            if self.procs[i].poll() is None:
                self.kill_node(i)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        gltest.wait_no_tagged(self.tag, 3)
        gltest.kill_tagged(self.tag)


def starts(out):
    """[(time, rank, world)] of every rank process started so far."""
    found = []
    for name in os.listdir(out):
        if name.startswith("start."):
            try:
                with open(os.path.join(out, name)) as f:
                    rank, world, t = f.read().split()
                found.append((float(t), int(rank), int(world)))
            except (OSError, ValueError):
                pass
    return found


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value is not None:
            return value
        time.sleep(0.005)
    return None


def read_fail(out):
    try:
        with open(os.path.join(out, "fail")) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def all_started(out, world, after=0.0):
    """The time by which ranks 0..world-1 of a `world`-sized job each had a process started
    after `after` (their first such start), or None."""
    first = {}
    for t, rank, w in starts(out):
        if w == world and t > after and (rank not in first or t < first[rank]):
            first[rank] = t
    return max(first.values()) if all(r in first for r in range(world)) else None


def rank_cmd(root, mode, out):
    return [os.path.join(root, "rank.py"), mode, out]


def gcu_cmd(root, mode, out, extra):
    return [GCULAUNCH, "--nproc-per-node", str(NPROC), "--device", "cpu", "--grace-period",
            "5", *extra, "--python", PYTHON, *rank_cmd(root, mode, out)]


def command(side, hosts, etcd, n, root, out, k, ident, rep):
    """Node k's command of a fixed-size, --max-restarts 1 job on one side."""
    if side == "builtin":
        return gcu_cmd(root, "fail", out, ["--max-restarts", "1"])
    if side == "etcd":
        return gcu_cmd(root, "fail", out, [
            "--max-restarts", "1", "--nnodes", str(n), "--rdzv-backend", "etcd",
            "--rdzv-endpoint", etcd.endpoints(), "--rdzv-id", ident, "--rdzv-timeout", "60"])
    return [PYTHON, TORCHRUN, "--nnodes", str(n), "--node_rank", str(k), "--nproc_per_node",
            str(NPROC), "--max_restarts", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
            "%s:%d" % (hosts.addr(0), 29400 + rep), "--rdzv_id", ident, "--rdzv_conf",
            "is_host=%d" % (k == 0), *rank_cmd(root, "fail", out)]


def env_of(side, hosts, n, rep):
    if side == "builtin":  # the platform's variables (docs/multinode.md)
        return lambda k: {"WORLD_SIZE": str(n), "RANK": str(k), "MASTER_ADDR": hosts.addr(0),
                          "MASTER_PORT": str(29600 + rep)}
    return lambda k: {"GLOO_SOCKET_IFNAME": "eth0"}


def job_round(side, hosts, etcd, n, root, rep):
    """{"rendezvous": s, "restart": s} (a key missing when that step did not complete)."""
    world = n * NPROC
    name = "%s-n%d-r%d" % (side, n, rep)
    out = os.path.join(root, name)
    os.makedirs(out)
    run = Run(hosts, [command(side, hosts, etcd, n, root, out, k, name, rep)
                    for k in range(n)], env_of(side, hosts, n, rep), name)
    result = {}
    try:
        t = wait_for(lambda: all_started(out, world), RUN_TIMEOUT)
        if t is None:
            return result
        result["rendezvous"] = t - run.launch_times[-1]
        t_fail = wait_for(lambda: read_fail(out), RUN_TIMEOUT)
        if t_fail is None:
            return result
        t = wait_for(lambda: all_started(out, world, t_fail), RUN_TIMEOUT)
        if t is not None:
            result["restart"] = t - t_fail
        run.wait_exits(range(n), timeout=30)  # the job ends on its own (exit 0 everywhere)
        return result
    finally:
        run.kill()


def leader_pid(etcd, ident):
    out = etcd.etcdctl("get", "--print-value-only", "/gculaunch/%s/leader" % ident)
    if out.returncode != 0 or not out.stdout.strip():
        return None
    try:
        return json.loads(out.stdout.strip().splitlines()[0]).get("pid")
    except ValueError:
        return None


def loss_round(hosts, etcd, root, ttl, which, rep):
    """3 nodes, --nnodes 2:3, lease_ttl=ttl: seconds from the SIGKILL of the leader's or of a
    non-leader's process group until the 2-node job runs on the two others, or None."""
    name = "loss-%s-ttl%d-r%d" % (which, ttl, rep)
    out = os.path.join(root, name)
    os.makedirs(out)
    extra = ["--max-restarts", "3", "--nnodes", "2:3", "--rdzv-backend", "etcd",
             "--rdzv-endpoint", etcd.endpoints(), "--rdzv-id", name, "--rdzv-timeout", "60",
             "--rdzv-conf", "lease_ttl=%d,last_call_timeout=1" % ttl]
    run = Run(hosts, [gcu_cmd(root, "hold", out, extra) for _ in range(3)],
              lambda k: {}, name)
    try:
        if wait_for(lambda: all_started(out, 3 * NPROC), RUN_TIMEOUT) is None:
            return None
        pid = wait_for(lambda: leader_pid(etcd, name), 10)
        pids = [p.pid for p in run.procs]
        if pid not in pids:
            return None
        lead = pids.index(pid)
        victim = lead if which == "leader" else (lead + 1) % 3
        t_kill = time.time()
        run.kill_node(victim)
        run.procs[victim].wait(10)
        t = wait_for(lambda: all_started(out, 2 * NPROC, t_kill), ttl + RUN_TIMEOUT)
        return None if t is None else t - t_kill
    finally:
        run.kill()


def med(values):
    values = [v for v in values if v is not None]
    return (statistics.median(values) if values else None), len(values)


def ms(v):
    return "-" if v is None else "%.0f" % (v * 1000)


def main():
    table = []  # (label, {side: [seconds]}) or ("loss", ...)
    losses = {}
    with tempfile.TemporaryDirectory(prefix="bench-etcd-") as root:
        os.chmod(root, 0o755)
        with open(os.path.join(root, "rank.py"), "w") as f:
            f.write(RANK)
        for n in NODE_COUNTS:
            hosts = gltest.SimulatedHosts(n + 1)  # host n: etcd
            etcd = None
            try:
                work = os.path.join(root, "etcd-n%d" % n)  # a fresh data directory
                os.makedirs(work)
                etcd = gltest.EtcdCluster(hosts, [n], work, token="bench-n%d" % n)
                res = {key: {s: [] for s in ("builtin", "etcd", "torchrun")}
                       for key in ("rendezvous", "restart")}
                for rep in range(REPS):
                    for side in ("builtin", "etcd", "torchrun"):
                        if budget_left() < 90:
                            break
                        r = job_round(side, hosts, etcd, n, root, rep)
                        for key in res:
                            res[key][side].append(r.get(key))
                table.append((n, res))
                if n == 3:
                    for ttl in TTLS:
                        for which in ("non-leader", "leader"):
                            vals = losses.setdefault((ttl, which), [])
                            for rep in range(REPS):
                                if budget_left() < ttl + 60:
                                    break
                                vals.append(loss_round(hosts, etcd, root, ttl, which, rep))
            finally:
                if etcd is not None:
                    etcd.close()
                hosts.close()
    report(table, losses)


def ratio(a, b):
    return "-" if a is None or not b else "%.1fx" % (a / b)


def report(table, losses):
    print()
    print("etcd rendezvous benchmark: %d rank(s) per node, simulated hosts, one etcd member;"
          " median ms (runs completed of tried)" % NPROC)
    print("%-26s %14s %14s %14s %10s %10s" % ("row", "built-in", "etcd", "torchrun c10d",
                                              "tr/etcd", "etcd/bi"))
    for n, res in table:
        for key in ("rendezvous", "restart"):
            cells, meds = [], {}
            for side in ("builtin", "etcd", "torchrun"):
                m, c = med(res[key][side])
                meds[side] = m
                cells.append("%s (%d/%d)" % (ms(m), c, len(res[key][side])))
            print("%-26s %14s %14s %14s %10s %10s" % (
                "%s, %d nodes" % (key, n), cells[0], cells[1], cells[2],
                ratio(meds["torchrun"], meds["etcd"]), ratio(meds["etcd"], meds["builtin"])))
    if losses:
        print()
        print("node loss on etcd, 3 nodes, --nnodes 2:3, last_call_timeout=1: SIGKILL of a"
              " node's process group -> the 2-node job runs")
        print("%-26s %14s %10s" % ("row", "etcd", "/ TTL"))
        for (ttl, which), vals in sorted(losses.items()):
            m, c = med(vals)
            print("%-26s %14s %10s" % ("%s, lease_ttl %d s" % (which, ttl),
                                       "%s (%d/%d)" % (ms(m), c, len(vals)),
                                       "-" if m is None else "%.2f" % (m / ttl)))
    print()
    print("total %.0f s" % (time.monotonic() - STARTED))


main()
PY
