#!/usr/bin/env bash
# bench_multinode.sh - multi-node timings on simulated hosts (network namespaces, as in
# tests/integration/test_multinode.py), for 2 and 3 nodes, against Debian's torchrun 1.13
# (through scripts/torchrun113.py) in the same setup.  A benchmark, not a test: it prints
# numbers and asserts nothing.  Needs root (ip netns); every namespace it creates is
# deleted at the end, and every process it starts is killed by its process group.
#
#   scripts/bench_multinode.sh     (BENCH_REPS=5 gculaunch repetitions, TORCHRUN_REPS=3)
#
# Ranks are trivial Python programs (no torch import), BENCH_NPROC (2) per node, that write
# a start timestamp named by their pid.  Measures, per node count:
#   rendezvous    the last node's gculaunch started -> every rank of the job started (node 0
#                 starts 0.5 s before the others, so its store is listening)
#   restart       a rank exits 1 (--max-restarts 1) -> every rank on every node started
#                 again (counted by fresh processes, not by restart counters: torchrun's
#                 are per node)
#   failure exit  a rank exits 1 (no restarts) -> every node's launcher exited
#   lost node     SIGKILL of the last node's gculaunch -> every other node's gculaunch exited
#   vanished host the last host's veth goes down (no FIN, no RST) -> the others exited
#   floor         the same Pythons started at once by this script without a launcher: the
#                 process start time that rendezvous and restart cannot beat
#   torchrun      restart as above: c10d rendezvous (the only torchrun 1.13 rendezvous that
#                 restarts every node; --rdzv_conf is_host on node 0) with the default
#                 --monitor_interval (5 s) and with 0.1 s; and static rendezvous
#                 (--master_addr/--master_port), where only the failing node restarts:
#                 reported as whether the other nodes restarted within 20 s
# Prints median and p90 (nearest rank) in milliseconds, and torchrun/gculaunch ratios.
#
# Environment: GCULAUNCH_BIN (default build/launcher/gculaunch), BENCH_REPS, TORCHRUN_REPS,
# BENCH_NPROC, BENCH_NODES (default "2 3").
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
gculaunch=${GCULAUNCH_BIN:-$top/build/launcher/gculaunch}
torchrun=$here/torchrun113.py
[ -x "$gculaunch" ] || { echo "bench: build gculaunch first (scripts/build.sh) or set GCULAUNCH_BIN" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: needs root for ip netns" >&2; exit 2; }

exec /usr/bin/python3 - "$top" "$gculaunch" "$torchrun" "${BENCH_REPS:-5}" \
  "${TORCHRUN_REPS:-3}" "${BENCH_NPROC:-2}" "${BENCH_NODES:-2 3}" <<'PY'
import os, signal, statistics, subprocess, sys, tempfile, threading, time

TOP, GCULAUNCH, TORCHRUN = sys.argv[1], sys.argv[2], sys.argv[3]
REPS, TREPS, NPROC = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
NODE_COUNTS = [int(n) for n in sys.argv[7].split()]
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import gltest  # SimulatedHosts, tagging

PYTHON = "/usr/bin/python3"
RUN_TIMEOUT = 60          # seconds per launch
TOTAL_BUDGET = 40 * 60    # the whole benchmark
STARTED = time.monotonic()

# A rank: start timestamp first (file named by pid), then by mode.
#   hold: sleep until killed.
#   fail: the last rank waits until every rank of the job started, records the failure time
#         and exits 1; ranks started after a failure exit 0 at once; the others sleep.
RANK = r'''
import os, sys, time
t0 = time.time()
mode, out = sys.argv[1], sys.argv[2]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
with open(os.path.join(out, "start.%d" % os.getpid()), "w") as f:
    f.write("%d %r" % (rank, t0))
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
    return TOTAL_BUDGET - (time.monotonic() - STARTED)


class Run:
    """One launch on every simulated node; each launcher in its own process group.  Node 0
    starts `lead` seconds before the others (its store is listening by then)."""

    def __init__(self, hosts, commands, env, lead=0.5):
        self.tag = gltest.new_tag()
        self.procs, self.exit_times = [], {}
        self.launch_times = []
        for i, cmd in enumerate(commands):
            if i == 1 and lead:
                time.sleep(lead)
            e = gltest.tagged_env(self.tag, extra=env(i))
            self.launch_times.append(time.time())
            p = subprocess.Popen(hosts.command_prefix(i) + cmd, env=e, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
            self.procs.append(p)
            threading.Thread(target=self._wait, args=(i, p), daemon=True).start()

    def _wait(self, i, p):
        p.wait()
        self.exit_times[i] = time.time()

    def wait_exits(self, which, timeout=RUN_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(i in self.exit_times for i in which):
                return [self.exit_times[i] for i in which]
            time.sleep(0.002)
        return None

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        gltest.wait_no_tagged(self.tag, 3)
        gltest.kill_tagged(self.tag)


def starts(out):
    """[(time, rank)] of every rank process started so far."""
    found = []
    for name in os.listdir(out):
        if name.startswith("start."):
            try:
                with open(os.path.join(out, name)) as f:
                    rank, t = f.read().split()
                found.append((float(t), int(rank)))
            except (OSError, ValueError):
                pass
    return found


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value is not None:
            return value
        time.sleep(0.002)
    return None


def read_fail(out):
    try:
        with open(os.path.join(out, "fail")) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def restarted_all(out, world):
    """Seconds from the failure until `world` ranks started after it, or None."""
    t_fail = read_fail(out)
    if t_fail is None:
        return None
    after = sorted(t for t, _ in starts(out) if t > t_fail)
    return after[world - 1] - t_fail if len(after) >= world else None


def gcu_cmd(mode, out, extra=()):
    return [GCULAUNCH, "--nproc-per-node", str(NPROC), "--device", "cpu", "--grace-period", "5",
            *extra, "--python", PYTHON, os.path.join(os.path.dirname(out), "rank.py"), mode, out]


def gcu_env(hosts, n, port):
    return lambda k: {"WORLD_SIZE": str(n), "RANK": str(k), "MASTER_ADDR": hosts.addr(0),
                      "MASTER_PORT": str(port)}


def new_out(root, name):
    out = os.path.join(root, name)
    os.makedirs(out)
    return out


def gculaunch_round(hosts, n, root, rep):
    world = n * NPROC
    port = 29500 + rep
    result = {}
    # rendezvous, and a failure that restarts every node
    out = new_out(root, "gr%d" % rep)
    run = Run(hosts, [gcu_cmd("fail", out, ["--max-restarts", "1"])
                      for k in range(n)], gcu_env(hosts, n, port))
    first = wait_for(lambda: sorted(starts(out))[world - 1][0]
                     if len(starts(out)) >= world else None, RUN_TIMEOUT)
    if first is not None:
        result["rendezvous"] = first - run.launch_times[-1]
    result["restart"] = wait_for(lambda: restarted_all(out, world), RUN_TIMEOUT)
    codes_ok = run.wait_exits(range(n)) is not None
    run.kill()
    if not codes_ok:
        result["restart"] = None
    # a failure without restarts: every node's gculaunch exits
    out = new_out(root, "gf%d" % rep)
    run = Run(hosts, [gcu_cmd("fail", out) for k in range(n)],
              gcu_env(hosts, n, port))
    exits = run.wait_exits(range(n))
    t_fail = read_fail(out)
    if exits and t_fail:
        result["failure exit"] = max(exits) - t_fail
    run.kill()
    # the last node's gculaunch SIGKILLed: the others exit
    out = new_out(root, "gl%d" % rep)
    run = Run(hosts, [gcu_cmd("hold", out) for k in range(n)],
              gcu_env(hosts, n, port))
    if wait_for(lambda: True if len(starts(out)) >= world else None, RUN_TIMEOUT):
        t_kill = time.time()
        os.kill(run.procs[-1].pid, signal.SIGKILL)
        exits = run.wait_exits(range(n - 1))
        if exits:
            result["lost node"] = max(exits) - t_kill
    run.kill()
    # the last host drops off the network: heartbeats, not closed connections, tell
    out = new_out(root, "gv%d" % rep)
    run = Run(hosts, [gcu_cmd("hold", out) for k in range(n)],
              gcu_env(hosts, n, port))
    if wait_for(lambda: True if len(starts(out)) >= world else None, RUN_TIMEOUT):
        t_cut = time.time()
        hosts.unplug(n - 1)
        exits = run.wait_exits(range(n - 1))
        if exits:
            result["vanished host"] = max(exits) - t_cut
        run.wait_exits([n - 1], timeout=15)
        hosts.plug(n - 1)
    run.kill()
    return result


def baseline_round(hosts, n, root, rep):
    """The floor: every rank's Python started at once by this script, NPROC per host, with no
    launcher; seconds until the last one ran its first line."""
    out = new_out(root, "b%d" % rep)
    tag = gltest.new_tag()
    procs = []
    t0 = time.time()
    for k in range(n):
        for r in range(NPROC):
            env = gltest.tagged_env(tag, extra={"RANK": str(k * NPROC + r),
                                                "WORLD_SIZE": str(n * NPROC)})
            procs.append(subprocess.Popen(hosts.command_prefix(k) + [
                PYTHON, "-u", os.path.join(root, "rank.py"), "hold", out], env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True))
    last = wait_for(lambda: sorted(starts(out))[-1][0] if len(starts(out)) >= n * NPROC
                    else None, RUN_TIMEOUT)
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()
    return None if last is None else last - t0


def torchrun_round(hosts, n, root, rep, variant):
    """variant: ("c10d", interval) or ("static", interval)."""
    backend, interval = variant
    world = n * NPROC
    port = 29400 + rep
    out = new_out(root, "t%s%s%d" % (backend, interval, rep))

    def cmd(k):
        c = [PYTHON, TORCHRUN, "--nnodes", str(n), "--node_rank", str(k),
             "--nproc_per_node", str(NPROC), "--max_restarts", "1"]
        if interval is not None:
            c += ["--monitor_interval", str(interval)]
        if backend == "c10d":
            c += ["--rdzv_backend", "c10d", "--rdzv_endpoint", "%s:%d" % (hosts.addr(0), port),
                  "--rdzv_id", "bench%d" % rep, "--rdzv_conf", "is_host=%d" % (k == 0)]
        else:
            c += ["--master_addr", hosts.addr(0), "--master_port", str(port)]
        return c + [os.path.join(root, "rank.py"), "fail", out]

    run = Run(hosts, [cmd(k) for k in range(n)], lambda k: {"GLOO_SOCKET_IFNAME": "eth0"})
    limit = 20 if backend == "static" else RUN_TIMEOUT
    t_fail = wait_for(lambda: read_fail(out), RUN_TIMEOUT)
    value = None
    failing_node_only = None
    if t_fail is not None:
        value = wait_for(lambda: restarted_all(out, world), limit)
        if value is None and backend == "static":
            # Which ranks did restart?
            failing_node_only = sorted({r for t, r in starts(out) if t > t_fail})
    run.kill()
    return value, failing_node_only


def stats(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None, None, 0
    p90 = values[min(len(values) - 1, max(0, int(round(0.9 * len(values))) - 1))]
    return statistics.median(values), p90, len(values)


def ms(v):
    return "-" if v is None else "%.0f" % (v * 1000)


def main():
    with tempfile.TemporaryDirectory(prefix="bench-mn-") as root:
        os.chmod(root, 0o755)
        with open(os.path.join(root, "rank.py"), "w") as f:
            f.write(RANK)
        report = []
        for n in NODE_COUNTS:
            with gltest.SimulatedHosts(n) as hosts:
                g = {"rendezvous": [], "restart": [], "failure exit": [], "lost node": [],
                     "vanished host": [], "baseline": []}
                for rep in range(REPS):
                    if budget_left() < 60:
                        break
                    r = gculaunch_round(hosts, n, root, rep + 100 * n)
                    r["baseline"] = baseline_round(hosts, n, root, rep + 100 * n)
                    for key in g:
                        g[key].append(r.get(key))
                t = {}
                static_note = None
                for variant in (("c10d", None), ("c10d", 0.1), ("static", 0.1)):
                    vals = []
                    for rep in range(TREPS):
                        if budget_left() < 120:
                            break
                        value, only = torchrun_round(hosts, n, root, rep + 100 * n + 10 * len(t),
                                                     variant)
                        vals.append(value)
                        if only is not None:
                            static_note = only
                    t[variant] = vals
                report.append((n, g, t, static_note))
        print()
        print("multi-node timings, %d ranks per node, simulated hosts (network namespaces)"
              % NPROC)
        print("gculaunch: %d repetitions; torchrun 1.13: %d; times in ms, median / p90 (n)"
              % (REPS, TREPS))
        for n, g, t, static_note in report:
            print()
            print("%d nodes (%d ranks)" % (n, n * NPROC))
            med, p90, cnt = stats(g["baseline"])
            print("  %-44s %6s / %6s  (%d)" % ("floor: %d Pythons started directly" % (n * NPROC),
                                              ms(med), ms(p90), cnt))
            for key in ("rendezvous", "restart", "failure exit", "lost node", "vanished host"):
                med, p90, cnt = stats(g[key])
                print("  gculaunch %-34s %6s / %6s  (%d)" % (key, ms(med), ms(p90), cnt))
            g_med = stats(g["restart"])[0]
            for variant, label in ((("c10d", None), "restart, c10d, monitor 5 s (default)"),
                                   (("c10d", 0.1), "restart, c10d, monitor 0.1 s"),
                                   (("static", 0.1), "restart, static, monitor 0.1 s")):
                med, p90, cnt = stats(t[variant])
                ratio = "" if med is None or not g_med else "  ratio %.1fx" % (med / g_med)
                extra = ""
                if variant[0] == "static" and cnt == 0 and t[variant]:
                    extra = ("  never within 20 s: only the failing node's ranks %s restarted"
                             % (static_note if static_note is not None else "?"))
                print("  torchrun  %-34s %6s / %6s  (%d)%s%s"
                      % (label, ms(med), ms(p90), cnt, ratio, extra))


main()
PY
