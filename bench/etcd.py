"""bench/etcd.py - the etcd job rendezvous (--rdzv-backend etcd, docs/etcd.md) against
gculaunch's built-in rendezvous and against Debian's torchrun 1.13 with its c10d
rendezvous (bench/torchrun113.py), on simulated hosts (network namespaces made by
tests/integration/gltest.py SimulatedHosts; one extra host runs a one-member etcd,
gltest.EtcdCluster).  A benchmark, not a test: it prints numbers and asserts nothing.
Needs root (ip netns) and Debian's etcd-server.  Every namespace it creates is deleted at
the end, every process it starts is killed by its process group.

  nice -n 19 python3 -m bench.etcd [--reps 3] [--nodes 3 8] [--nproc 1] [--budget 900]

Ranks are trivial Python programs (no torch import) that write their start time, rank and
world size to a file named by their pid.  Rows, per node count N:
  rendezvous  from the moment the last node's launcher was started until every rank of the
              job has run its first line.  Node 0 is started 0.5 s before the others on
              every side (it hosts the store for the built-in and c10d sides).  torchrun's
              number includes its own start (Python importing torch), as a user sees it.
                built-in: MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK given to each node, as a
                  platform does (gculaunch's TCPStore on node 0).
                etcd: --rdzv-backend etcd --rdzv-endpoint <etcd host>:2379 --rdzv-id,
                  --nnodes N, nothing else (the nodes elect the leader in etcd).
                torchrun: --rdzv_backend c10d, node 0's agent hosts the store.
  restart     in the same run (--max-restarts 1): the last rank exits 1 once every rank
              runs; from that exit until every rank of every node has started again (fresh
              processes, counted over all nodes).  torchrun with its default monitor
              interval (5 s): that poll is most of its number.
  node loss   etcd only, 3 nodes, --nnodes 2:3, last_call_timeout=1, lease_ttl = 2, 5 and
              10 s.  Once every rank runs, one node's gculaunch and its ranks (its process
              group) get SIGKILL; from the kill until every rank of the 2-node job has
              started on the two other nodes.  The etcd nodes talk to each other only
              through etcd, so a killed node is noticed when its lease ends (up to one TTL
              after its last refresh, which came at most TTL/3 before the kill); then the
              job re-forms on the two left.  Printed also as a multiple of the TTL.
                non-leader: a node that does not lead the term: the leader sees its
                  heartbeat key deleted and re-forms the job.
                leader: the node named by /gculaunch/<id>/leader in etcd: the other two see
                  the leader key deleted, elect a new leader (a new term, a new ranks'
                  store) and form the 2-node job there (last call 1 s).
              (torchrun 1.13's own etcd backend needs etcd's v2 API, which Debian's etcd
              3.4 serves only with --enable-v2: it is not compared here.)
Prints the median (and how many runs completed) in milliseconds, torchrun/etcd and
etcd/built-in ratios.  The whole run is bounded (--budget seconds, default 900): rows
left when the budget is spent are printed as "-".

Options (each defaults to the environment variable named in its help): see --help.  Run
from the top of the repository.
"""
import argparse
import json
import os
import tempfile
import time

from bench import lib
from tests.integration import gltest

PROG = "bench.etcd"
PYTHON = lib.PYTHON
TORCHRUN = lib.TORCHRUN113
RUN_TIMEOUT = 60      # seconds for one rendezvous, one restart, one exit
# Set by main() from the options:
GCULAUNCH = None
REPS = NPROC = 1
NODE_COUNTS, TTLS = [], []
LOG_DIR = None
BUDGET = None


def launch(hosts, commands, env, name):
    """One launcher per command (lib.Run), with the benchmark's log directory, if any."""
    return lib.Run(hosts, commands, env, name=name, logs=LOG_DIR, timeout=RUN_TIMEOUT)


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
    run = launch(hosts, [command(side, hosts, etcd, n, root, out, k, name, rep)
                    for k in range(n)], env_of(side, hosts, n, rep), name)
    result = {}
    try:
        t = lib.wait_for(lambda: lib.all_started(out, world), RUN_TIMEOUT)
        if t is None:
            return result
        result["rendezvous"] = t - run.launch_times[-1]
        t_fail = lib.wait_for(lambda: lib.read_fail(out), RUN_TIMEOUT)
        if t_fail is None:
            return result
        t = lib.wait_for(lambda: lib.all_started(out, world, t_fail), RUN_TIMEOUT)
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
    run = launch(hosts, [gcu_cmd(root, "hold", out, extra) for _ in range(3)],
              lambda k: {}, name)
    try:
        if lib.wait_for(lambda: lib.all_started(out, 3 * NPROC), RUN_TIMEOUT) is None:
            return None
        pid = lib.wait_for(lambda: leader_pid(etcd, name), 10)
        pids = [p.pid for p in run.procs]
        if pid not in pids:
            return None
        lead = pids.index(pid)
        victim = lead if which == "leader" else (lead + 1) % 3
        t_kill = time.time()
        run.kill_node(victim)
        run.procs[victim].wait(10)
        t = lib.wait_for(lambda: lib.all_started(out, 2 * NPROC, t_kill), ttl + RUN_TIMEOUT)
        return None if t is None else t - t_kill
    finally:
        run.kill()


def measure():
    table = []  # (label, {side: [seconds]}) or ("loss", ...)
    losses = {}
    with tempfile.TemporaryDirectory(prefix="bench-etcd-") as root:
        os.chmod(root, 0o755)
        with open(os.path.join(root, "rank.py"), "w") as f:
            f.write(lib.RANK)
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
                        if BUDGET.left() < 90:
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
                                if BUDGET.left() < ttl + 60:
                                    break
                                vals.append(loss_round(hosts, etcd, root, ttl, which, rep))
            finally:
                if etcd is not None:
                    etcd.close()
                hosts.close()
    report(table, losses)


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
                m, c = lib.med(res[key][side])
                meds[side] = m
                cells.append("%s (%d/%d)" % (lib.ms(m), c, len(res[key][side])))
            print("%-26s %14s %14s %14s %10s %10s" % (
                "%s, %d nodes" % (key, n), cells[0], cells[1], cells[2],
                lib.ratio(meds["torchrun"], meds["etcd"]),
                lib.ratio(meds["etcd"], meds["builtin"])))
    if losses:
        print()
        print("node loss on etcd, 3 nodes, --nnodes 2:3, last_call_timeout=1: SIGKILL of a"
              " node's process group -> the 2-node job runs")
        print("%-26s %14s %10s" % ("row", "etcd", "/ TTL"))
        for (ttl, which), vals in sorted(losses.items()):
            m, c = lib.med(vals)
            print("%-26s %14s %10s" % ("%s, lease_ttl %d s" % (which, ttl),
                                       "%s (%d/%d)" % (lib.ms(m), c, len(vals)),
                                       "-" if m is None else "%.2f" % (m / ttl)))
    print()
    print("total %.0f s" % (BUDGET.used()))


def parse_args():
    ap = argparse.ArgumentParser(prog=PROG, description="The etcd job rendezvous against the "
                                 "built-in one and torchrun 1.13's c10d (needs root, etcd).")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 3),
                    help="repetitions (BENCH_REPS, 3)")
    ap.add_argument("--nodes", type=int, nargs="+", default=lib.env_list("BENCH_NODES", "3 8"),
                    help="node counts (BENCH_NODES, \"3 8\")")
    ap.add_argument("--nproc", type=int, default=lib.env_int("BENCH_NPROC", 1),
                    help="ranks per node (BENCH_NPROC, 1)")
    ap.add_argument("--ttls", type=int, nargs="*", default=lib.env_list("BENCH_TTLS", "2 5 10"),
                    help="lease TTLs of the node-loss rows (BENCH_TTLS, \"2 5 10\")")
    ap.add_argument("--budget", type=float, default=lib.env_float("BENCH_BUDGET", 900),
                    help="seconds for the whole run (BENCH_BUDGET, 900)")
    ap.add_argument("--log-dir", default=os.environ.get("BENCH_LOG_DIR") or None,
                    help="keep every launcher's output there (BENCH_LOG_DIR)")
    return ap.parse_args()


def main():
    global GCULAUNCH, REPS, NPROC, NODE_COUNTS, TTLS, LOG_DIR, BUDGET
    args = parse_args()
    GCULAUNCH = lib.require_gculaunch(PROG, args.gculaunch)
    lib.require_root(PROG)
    if not os.access(gltest.ETCD, os.X_OK):
        lib.die(PROG, "etcd is not installed (run scripts/bootstrap.sh as root)")
    REPS, NPROC, NODE_COUNTS, TTLS = args.reps, args.nproc, args.nodes, args.ttls
    LOG_DIR = args.log_dir
    if LOG_DIR:
        os.makedirs(LOG_DIR, exist_ok=True)
    BUDGET = lib.Budget(args.budget)
    measure()


if __name__ == "__main__":
    main()
