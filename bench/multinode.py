"""bench/multinode.py - multi-node timings on simulated hosts (network namespaces, as in
tests/integration/test_multinode.py), for 2 and 3 nodes, against Debian's torchrun 1.13
(through bench/torchrun113.py) in the same setup.  A benchmark, not a test: it prints
numbers and asserts nothing.  Needs root (ip netns); every namespace it creates is
deleted at the end, and every process it starts is killed by its process group (or by
pid: the workers that outlive a killed torchrun).

  python3 -m bench.multinode [--reps 5] [--torchrun-reps 3] [--parts base rejoin elastic] ...

Ranks are trivial Python programs (no torch import), --nproc (2) per node, that write
a start timestamp named by their pid.  Measures, per node count:
  rendezvous    the last node's gculaunch started -> every rank of the job started (node 0
                starts 0.5 s before the others, so its store is listening)
  restart       a rank exits 1 (--max-restarts 1) -> every rank on every node started
                again (counted by fresh processes, not by restart counters: torchrun's
                are per node)
  failure exit  a rank exits 1 (no restarts) -> every node's launcher exited
  lost node     SIGKILL of the last node's gculaunch -> every other node's gculaunch exited
  vanished host the last host's veth goes down (no FIN, no RST) -> the others exited
  floor         the same Pythons started at once by this script without a launcher: the
                process start time that rendezvous and restart cannot beat
  torchrun      restart as above: c10d rendezvous (the only torchrun 1.13 rendezvous that
                restarts every node; --rdzv_conf is_host on node 0) with the default
                --monitor_interval (5 s) and with 0.1 s; and static rendezvous
                (--master_addr/--master_port), where only the failing node restarts:
                reported as whether the other nodes restarted within 20 s
  node back     (rejoin) once every rank runs, node 1's gculaunch is SIGKILLed and at once
                started again with the same command and RANK (--max-restarts 1): from
                that second start until every rank of every node runs again (each rank
                counted by a fresh process started after the kill).  The same for node 0,
                the store host.  A gculaunch that cannot rejoin ends the job instead: that
                is printed as "job ended: exit 4 (which node, when)".
  torchrun back the same with torchrun 1.13, --rdzv_backend c10d --max_restarts 1, node 0's
                agent hosting the store (is_host=1); only the agent process is killed, as
                for gculaunch.  Each case waits its whole 60 s when the job does not come
                back.  What torchrun 1.13 does (its source; logs kept with --log-dir):
                - its workers are plain children (no session of their own, no parent-death
                  signal): they outlive a SIGKILLed agent; printed as old workers still
                  running at the end (the script then kills them by pid).
                - node 1 back: the new agent cannot join while the dead one still counts as
                  a participant (the round is complete at max_nodes); a participant is
                  dropped only when its rendezvous heartbeat is 15 s old (keep-alive every
                  5 s, 3 attempts, fixed in 1.13), i.e. 10-15 s after the kill.  Only then
                  does the new agent reach the wait list, which the others see at their
                  next monitor poll and restart their workers: so the re-form takes about
                  that long however fast the agent restarts.
                - node 0 back: the c10d store lived inside the killed agent.  The other
                  agents' next monitor poll (num_nodes_waiting) fails with
                  RendezvousConnectionError; they stop their workers and exit 1.  The new
                  node 0 agent opens a fresh store and waits for agents that will not come:
                  the job never re-forms.  Printed as "never (within 60 s)" with what
                  happened (exits, the error found in the logs).
  shrink/grow   (elastic) 3 hosts, --nnodes 2:3, torchrun-style flags on both sides
                (--rdzv-backend c10d --rdzv-endpoint host0:port --rdzv-id, no platform
                variables), --max-restarts 3, defaults otherwise (last call 30 s).  The
                ranks import torch and all_reduce over gloo in a loop, so a lost peer
                shows up in the survivors' collective, as in training.  shrink: node 2's
                launcher and its ranks (its process group) SIGKILLed for good -> every rank
                of the 2-node world (WORLD_SIZE = 2 x --nproc) started.  grow: then a
                new launcher on node 2 -> every rank of the 3-node world started.  Ranks are
                counted when they run their first line (before `import torch`); each event
                happens once every rank of the current world is inside its loop.
                --parts elastic runs this part alone; --elastic-reps (2) each side,
                --elastic-sides (gculaunch torchrun).
Prints median and p90 (nearest rank) in milliseconds, and torchrun/gculaunch ratios.

Options (each defaults to the environment variable named in its help, so that the old
variables still work): see --help.  Run from the top of the repository.
"""
import argparse
import os
import signal
import subprocess
import tempfile
import time

from bench import lib
from tests.integration import gltest

PROG = "bench.multinode"
RUN_TIMEOUT = 60          # seconds per launch
GCU_REJOIN_WAIT = 30      # a restarted node: how long the others get to run again
TORCHRUN_REJOIN_WAIT = 60
ELASTIC_WAIT = 90        # seconds for one shrink or grow to complete
TOTAL_BUDGET = 40 * 60    # the whole benchmark
PYTHON = lib.PYTHON
TORCHRUN = lib.TORCHRUN113
# Set by main() from the options:
GCULAUNCH = None
REPS = TREPS = TREPS0 = NPROC = EREPS = 2
NODE_COUNTS, PARTS, ELASTIC_SIDES = [], [], []
LOG_DIR = None
BUDGET = None

def restarted_all(out, world):
    """Seconds from the failure until `world` ranks started after it, or None."""
    t_fail = lib.read_fail(out)
    if t_fail is None:
        return None
    after = sorted(t for t, _, _, _ in lib.starts(out) if t > t_fail)
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
    run = launch(hosts, [gcu_cmd("fail", out, ["--max-restarts", "1"])
                      for k in range(n)], gcu_env(hosts, n, port))
    first = lib.wait_for(lambda: sorted(lib.starts(out))[world - 1][0]
                     if len(lib.starts(out)) >= world else None, RUN_TIMEOUT)
    if first is not None:
        result["rendezvous"] = first - run.launch_times[-1]
    result["restart"] = lib.wait_for(lambda: restarted_all(out, world), RUN_TIMEOUT)
    codes_ok = run.wait_exits(range(n)) is not None
    run.kill()
    if not codes_ok:
        result["restart"] = None
    # a failure without restarts: every node's gculaunch exits
    out = new_out(root, "gf%d" % rep)
    run = launch(hosts, [gcu_cmd("fail", out) for k in range(n)],
              gcu_env(hosts, n, port))
    exits = run.wait_exits(range(n))
    t_fail = lib.read_fail(out)
    if exits and t_fail:
        result["failure exit"] = max(exits) - t_fail
    run.kill()
    # the last node's gculaunch SIGKILLed: the others exit
    out = new_out(root, "gl%d" % rep)
    run = launch(hosts, [gcu_cmd("hold", out) for k in range(n)],
              gcu_env(hosts, n, port))
    if lib.wait_for(lambda: True if len(lib.starts(out)) >= world else None, RUN_TIMEOUT):
        t_kill = time.time()
        os.kill(run.procs[-1].pid, signal.SIGKILL)
        exits = run.wait_exits(range(n - 1))
        if exits:
            result["lost node"] = max(exits) - t_kill
    run.kill()
    # the last host drops off the network: heartbeats, not closed connections, tell
    out = new_out(root, "gv%d" % rep)
    run = launch(hosts, [gcu_cmd("hold", out) for k in range(n)],
              gcu_env(hosts, n, port))
    if lib.wait_for(lambda: True if len(lib.starts(out)) >= world else None, RUN_TIMEOUT):
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
    last = lib.wait_for(lambda: sorted(lib.starts(out))[-1][0] if len(lib.starts(out)) >= n * NPROC
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

    run = launch(hosts, [cmd(k) for k in range(n)], lambda k: {"GLOO_SOCKET_IFNAME": "eth0"})
    limit = 20 if backend == "static" else RUN_TIMEOUT
    t_fail = lib.wait_for(lambda: lib.read_fail(out), RUN_TIMEOUT)
    value = None
    failing_node_only = None
    if t_fail is not None:
        value = lib.wait_for(lambda: restarted_all(out, world), limit)
        if value is None and backend == "static":
            # Which ranks did restart?
            failing_node_only = sorted({r for t, r, _, _ in lib.starts(out) if t > t_fail})
    run.kill()
    return value, failing_node_only


def ended(run, nodes):
    """{node: exit code} of the first launchers of `nodes` that exited already."""
    return {k: run.codes[(k, 0)] for k in nodes if (k, 0) in run.codes}


def rejoin_outcome(run, out, world, victim, t_kill, t_back, limit, wait_full=False):
    """Waits (up to `limit` s) until every rank of the job runs again after t_kill.  Unless
    `wait_full`, it stops early when the job ended: a launcher other than the victim's first
    one exited.  Returns (seconds from t_back, None) or (None, what happened instead)."""
    others = [k for k in range(len(run.commands)) if k != victim]

    def gone():
        return ended(run, others) or run.codes.get((victim, 1)) is not None

    def settled():
        t = lib.all_started(out, world, t_kill)
        if t is not None:
            return ("ok", t)
        return ("ended",) if gone() and not wait_full else None

    result = lib.wait_for(settled, limit)
    if result is not None and result[0] == "ok":
        return result[1] - t_back, None
    if not gone():
        return None, "never (within %d s): no launcher exited, the ranks did not all start" % limit
    lib.wait_for(lambda: True if len(ended(run, others)) == len(others) else None, 3)
    exits = [(run.exit_times[(k, 0)], "node %d exit %d" % (k, code))
             for k, code in ended(run, others).items()]
    if (victim, 1) in run.codes:
        exits.append((run.exit_times[(victim, 1)], "returning node %d exit %d"
                      % (victim, run.codes[(victim, 1)])))
    what = ", ".join("%s %.1f s after the kill" % (text, t - t_kill) for t, text in sorted(exits))
    if result is None:
        return None, "never (within %d s): %s" % (limit, what)
    codes = sorted({run.codes[(k, 0)] for k in ended(run, others)}
                   | ({run.codes[(victim, 1)]} if (victim, 1) in run.codes else set()))
    return None, "job ended: exit %s (%s)" % ("/".join(str(c) for c in codes), what)


def gculaunch_rejoin_round(hosts, n, root, rep, victim):
    """Node `victim`'s gculaunch SIGKILLed once every rank runs, and started again at once
    (the same command, same host, same RANK): seconds from that second start until every
    rank of every node runs again.  Today's gculaunch (no rejoin) ends the job with exit 4
    on the other nodes instead: reported as such."""
    world = n * NPROC
    port = 30000 + rep
    out = new_out(root, "gj%d_%d" % (victim, rep))
    run = launch(hosts, [gcu_cmd("hold", out, ["--max-restarts", "1"]) for k in range(n)],
              gcu_env(hosts, n, port), name="gcu-rejoin-node%d-%d" % (victim, rep))
    try:
        if lib.wait_for(lambda: True if len(lib.starts(out)) >= world else None,
                        RUN_TIMEOUT) is None:
            return None, "the job never started"
        t_kill = time.time()
        old = run.procs[victim]
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        t_back = run.again(victim)
        return rejoin_outcome(run, out, world, victim, t_kill, t_back, GCU_REJOIN_WAIT)
    finally:
        run.kill()


def torchrun_rejoin_round(hosts, n, root, rep, victim, interval):
    """The same with torchrun 1.13: c10d rendezvous (node 0's agent hosts the store,
    is_host=1), --max_restarts 1; node `victim`'s torchrun (the agent process alone, as for
    gculaunch) SIGKILLed and started again at once, with the same command.  Always waits the
    whole TORCHRUN_REJOIN_WAIT, so that "never" means never within it.  Returns (seconds or
    None, what happened instead, "k of m" of the victim's old workers still running then,
    seconds from the kill until a first rank of the job ran again)."""
    world = n * NPROC
    port = 30500 + rep
    out = new_out(root, "tj%d_%s_%d" % (victim, interval, rep))
    logs = os.path.join(root, "logs")
    os.makedirs(logs, exist_ok=True)

    def cmd(k):
        c = [PYTHON, TORCHRUN, "--nnodes", str(n), "--node_rank", str(k),
             "--nproc_per_node", str(NPROC), "--max_restarts", "1"]
        if interval is not None:
            c += ["--monitor_interval", str(interval)]
        return c + ["--rdzv_backend", "c10d", "--rdzv_endpoint", "%s:%d" % (hosts.addr(0), port),
                    "--rdzv_id", "benchrejoin%d" % rep, "--rdzv_conf", "is_host=%d" % (k == 0),
                    os.path.join(root, "rank.py"), "hold", out]

    run = launch(hosts, [cmd(k) for k in range(n)], torchrun_env, logs=logs,
              name="torchrun-rejoin-node%d-%s-%d" % (victim, interval, rep))
    workers = []
    try:
        if lib.wait_for(lambda: True if len(lib.starts(out)) >= world else None,
                        RUN_TIMEOUT) is None:
            return None, "the job never started", "?", None
        in_victim = set(hosts.pids_in(victim))
        workers = [pid for _, _, _, pid in lib.starts(out) if pid in in_victim]
        t_kill = time.time()
        old = run.procs[victim]
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        t_back = run.again(victim)
        value, what = rejoin_outcome(run, out, world, victim, t_kill, t_back,
                                     TORCHRUN_REJOIN_WAIT, wait_full=True)
        if what is not None:
            lost_store = [k for k in range(n) if k != victim
                          and run.log_has(k, "RendezvousConnectionError")]
            if lost_store:
                what += "; %s: RendezvousConnectionError (the c10d store was in the killed agent)" \
                    % ", ".join("node %d" % k for k in lost_store)
            if run.procs[victim].poll() is None:
                what += "; the returning node %d's torchrun still waits for the others" % victim
        again = [t for t, _, _, _ in lib.starts(out) if t > t_kill]
        first = min(again) - t_kill if again else None
        left = "%d of %d" % (sum(1 for pid in workers if lib.alive(pid)), len(workers))
        return value, what, left, first
    finally:
        for pid in workers:  # the victim's old workers, if they outlived their agent
            if lib.alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        run.kill()


def torchrun_env(k):
    env = {"GLOO_SOCKET_IFNAME": "eth0"}
    if LOG_DIR:
        env["LOGLEVEL"] = "INFO"  # the agent's rendezvous steps, in the kept logs
    return env


def gculaunch_rejoins(hosts, n, root, rep, g):
    for victim, key in ((1, "node 1 back"), (0, "node 0 back")):
        value, what = gculaunch_rejoin_round(hosts, n, root, rep + 100 * n, victim)
        g[key].append(value)
        if what is not None:
            g[key + " what"].append(what)


def torchrun_rejoins(hosts, n, root):
    """{(victim, interval): ([seconds or None], [what happened instead], [old workers left],
    [seconds from the kill until a first rank ran again])}"""
    t = {}
    for victim, interval, reps in ((1, None, TREPS), (1, 0.1, TREPS), (0, None, TREPS0)):
        vals, whats, orphans, noticed = [], [], [], []
        for rep in range(reps):
            if BUDGET.left() < TORCHRUN_REJOIN_WAIT + 60:
                break
            value, what, left, first = torchrun_rejoin_round(hosts, n, root,
                                                             rep + 100 * n + 10 * len(t),
                                                             victim, interval)
            vals.append(value)
            noticed.append(first)
            orphans.append(left)
            if what is not None:
                whats.append(what)
        t[(victim, interval)] = (vals, whats, orphans, noticed)
    return t


def print_outcomes(whats, count):
    """What happened instead of a re-form, once per distinct text (times vary: first one)."""
    seen = []
    for what in whats:
        head = what.split(":")[0]
        if head not in [h for h, _ in seen]:
            seen.append((head, what))
    for head, what in seen:
        times = sum(1 for w in whats if w.split(":")[0] == head)
        print("      %d of %d: %s" % (times, count, what))


# An elastic rank: records (rank, world, start time) at once, then a gloo all_reduce loop
# until killed (a lost peer makes the collective fail: the rank exits 1).
ELASTIC_RANK = r"""
import os, sys, time
t0 = time.time()
out = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
with open(os.path.join(out, "estart.%d" % os.getpid()), "w") as f:
    f.write("%d %d %r" % (rank, world, t0))
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
with open(os.path.join(out, "eloop.%d" % os.getpid()), "w") as f:
    f.write("%d %d" % (rank, world))
t = torch.ones(1)
deadline = time.time() + 600
while time.time() < deadline:
    dist.all_reduce(t)
    time.sleep(0.05)
"""


def elastic_world_running(out, after, world):
    """The time by which ranks 0..world-1 of a `world`-sized job all started after `after`
    (each rank's first such start), or None."""
    first = {}
    for name in os.listdir(out):
        if not name.startswith("estart."):
            continue
        try:
            with open(os.path.join(out, name)) as f:
                rank, w, t = f.read().split()
        except (OSError, ValueError):
            continue
        rank, w, t = int(rank), int(w), float(t)
        if w == world and t > after and (rank not in first or t < first[rank]):
            first[rank] = t
    if all(r in first for r in range(world)):
        return max(first.values())
    return None


def elastic_in_loop(out, world):
    """True once `world` ranks of a `world`-sized job are inside their all_reduce loop."""
    count = 0
    for name in os.listdir(out):
        if name.startswith("eloop."):
            try:
                with open(os.path.join(out, name)) as f:
                    count += int(f.read().split()[1]) == world
            except (OSError, ValueError, IndexError):
                pass
    return True if count >= world else None


def elastic_round(hosts, root, rep, side):
    """side "gculaunch" or "torchrun": (shrink seconds or None, grow seconds or None)."""
    port = 31000 + rep + (500 if side == "torchrun" else 0)
    out = new_out(root, "el_%s_%d" % (side, rep))
    script = os.path.join(root, "elastic_rank.py")
    endpoint = "%s:%d" % (hosts.addr(0), port)

    def cmd(k):
        if side == "gculaunch":
            return [GCULAUNCH, "--nnodes", "2:3", "--nproc-per-node", str(NPROC), "--device",
                    "cpu", "--max-restarts", "3", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                    endpoint, "--rdzv-id", "benchel%d" % rep, "--python", PYTHON, script, out]
        # torchrun 1.13's c10d hands its ranks MASTER_ADDR = the FQDN of the host of group
        # rank 0; simulated hosts share the machine's host name, so each torchrun gets a UTS
        # namespace of its own with a name that the hosts' private name table resolves.
        return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', "elhost%d" % k,
                PYTHON, TORCHRUN, "--nnodes", "2:3", "--nproc_per_node", str(NPROC),
                "--max_restarts", "3", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint,
                "--rdzv_id", "benchel%d" % rep, "--rdzv_conf", "is_host=%d" % (k == 0),
                script, out]

    names = gltest.HostsFileNames(hosts)
    for k in range(3):
        names.set("elhost%d" % k, hosts.addr(k))
    run = launch(hosts, [cmd(k) for k in range(3)], torchrun_env,
              name="elastic-%s-%d" % (side, rep))
    shrink = grow = None
    try:
        full = 3 * NPROC
        if lib.wait_for(lambda: elastic_in_loop(out, full), RUN_TIMEOUT) is None:
            return None, None
        time.sleep(0.5)
        t_kill = time.time()
        os.killpg(run.procs[2].pid, signal.SIGKILL)
        run.procs[2].wait()
        t = lib.wait_for(lambda: elastic_world_running(out, t_kill, 2 * NPROC), ELASTIC_WAIT)
        if t is None:
            return None, None
        shrink = t - t_kill
        lib.wait_for(lambda: elastic_in_loop(out, 2 * NPROC), RUN_TIMEOUT)
        time.sleep(0.5)
        t_back = run.again(2)
        t = lib.wait_for(lambda: elastic_world_running(out, t_back, full), ELASTIC_WAIT)
        grow = None if t is None else t - t_back
        return shrink, grow
    finally:
        run.kill()
        names.close()


def elastic_rounds(hosts, root):
    """{side: {"shrink": [...], "grow": [...]}}, interleaved sides."""
    e = {side: {"shrink": [], "grow": []} for side in ("gculaunch", "torchrun")}
    for rep in range(EREPS):
        for side in ELASTIC_SIDES:
            if BUDGET.left() < 2 * ELASTIC_WAIT + 60:
                break
            shrink, grow = elastic_round(hosts, root, rep, side)
            e[side]["shrink"].append(shrink)
            e[side]["grow"].append(grow)
    return e


def print_elastic(e):
    print()
    print("elastic, 3 hosts, --nnodes 2:3, %d ranks per node, gloo all_reduce loop; times in ms,"
          " median / p90 (n completed of tried)" % NPROC)
    for key, label in (("shrink", "shrink: node 2 killed -> 2-node world runs"),
                       ("grow", "grow: node 2 back -> 3-node world runs")):
        g_med = lib.stats(e["gculaunch"][key])[0]
        for side in ("gculaunch", "torchrun"):
            med, p90, cnt = lib.stats(e[side][key])
            ratio = ""
            if side == "torchrun" and med is not None and g_med:
                ratio = "  ratio %.1fx" % (med / g_med)
            print("  %-9s %-44s %6s / %6s  (%d of %d)%s"
                  % (side, label, lib.ms(med), lib.ms(p90), cnt, len(e[side][key]), ratio))


def measure():
    with tempfile.TemporaryDirectory(prefix="bench-mn-") as root:
        os.chmod(root, 0o755)
        with open(os.path.join(root, "rank.py"), "w") as f:
            f.write(lib.RANK)
        with open(os.path.join(root, "elastic_rank.py"), "w") as f:
            f.write(ELASTIC_RANK)
        report = []
        elastic = None
        if "elastic" in PARTS:
            with gltest.SimulatedHosts(3) as hosts:
                elastic = elastic_rounds(hosts, root)
        for n in (NODE_COUNTS if PARTS != ["elastic"] else []):
            with gltest.SimulatedHosts(n) as hosts:
                g = {"rendezvous": [], "restart": [], "failure exit": [], "lost node": [],
                     "vanished host": [], "baseline": [], "node 1 back": [],
                     "node 1 back what": [], "node 0 back": [], "node 0 back what": []}
                for rep in range(REPS):
                    if BUDGET.left() < 60:
                        break
                    if "base" in PARTS:
                        r = gculaunch_round(hosts, n, root, rep + 100 * n)
                        for key in r:
                            g[key].append(r[key])
                    if "rejoin" in PARTS:
                        gculaunch_rejoins(hosts, n, root, rep, g)
                    g["baseline"].append(baseline_round(hosts, n, root, rep + 100 * n))
                t = {}
                static_note = None
                for variant in (("c10d", None), ("c10d", 0.1), ("static", 0.1)):
                    vals = []
                    for rep in range(TREPS if "base" in PARTS else 0):
                        if BUDGET.left() < 120:
                            break
                        value, only = torchrun_round(hosts, n, root, rep + 100 * n + 10 * len(t),
                                                     variant)
                        vals.append(value)
                        if only is not None:
                            static_note = only
                    t[variant] = vals
                tj = torchrun_rejoins(hosts, n, root) if "rejoin" in PARTS else {}
                report.append((n, g, t, static_note, tj))
        print()
        print("multi-node timings, %d ranks per node, simulated hosts (network namespaces)"
              % NPROC)
        print("gculaunch: %d repetitions; torchrun 1.13: %d (node 0 back: %d); times in ms, "
              "median / p90 (n)" % (REPS, TREPS, TREPS0))
        for n, g, t, static_note, tj in report:
            print()
            print("%d nodes (%d ranks)" % (n, n * NPROC))
            med, p90, cnt = lib.stats(g["baseline"])
            print("  %-44s %6s / %6s  (%d)" % ("floor: %d Pythons started directly" % (n * NPROC),
                                              lib.ms(med), lib.ms(p90), cnt))
            if "base" in PARTS:
                print_base(g, t, static_note)
            if "rejoin" in PARTS:
                print_rejoin(g, tj)
        if elastic is not None:
            print_elastic(elastic)


def print_base(g, t, static_note):
    for key in ("rendezvous", "restart", "failure exit", "lost node", "vanished host"):
        med, p90, cnt = lib.stats(g[key])
        print("  gculaunch %-34s %6s / %6s  (%d)" % (key, lib.ms(med), lib.ms(p90), cnt))
    g_med = lib.stats(g["restart"])[0]
    for variant, label in ((("c10d", None), "restart, c10d, monitor 5 s (default)"),
                           (("c10d", 0.1), "restart, c10d, monitor 0.1 s"),
                           (("static", 0.1), "restart, static, monitor 0.1 s")):
        med, p90, cnt = lib.stats(t[variant])
        ratio = "" if med is None or not g_med else "  ratio %.1fx" % (med / g_med)
        extra = ""
        if variant[0] == "static" and cnt == 0 and t[variant]:
            extra = ("  never within 20 s: only the failing node's ranks %s restarted"
                     % (static_note if static_note is not None else "?"))
        print("  torchrun  %-34s %6s / %6s  (%d)%s%s"
              % (label, lib.ms(med), lib.ms(p90), cnt, ratio, extra))


def print_rejoin(g, tj):
    """A node's launcher SIGKILLed and started again: from that start until every rank of
    every node runs again (what happened instead, when it did not)."""
    print("  a node's launcher SIGKILLed and started again at once -> every rank runs again,"
          " from that start:")
    for key, label in (("node 1 back", "node 1 restarted"),
                       ("node 0 back", "node 0 (the store host) restarted")):
        med, p90, cnt = lib.stats(g[key])
        floor = lib.stats(g["baseline"])[0]
        over = "" if med is None or floor is None else "  %s over the floor" % lib.ms(med - floor)
        print("  gculaunch %-34s %6s / %6s  (%d)%s" % (label, lib.ms(med), lib.ms(p90), cnt, over))
        print_outcomes(g[key + " what"], len(g[key]))
    for (victim, interval), label in (((1, None), "node 1 restarted, monitor 5 s"),
                                      ((1, 0.1), "node 1 restarted, monitor 0.1 s"),
                                      ((0, None), "node 0 restarted, monitor 5 s")):
        vals, whats, orphans, noticed = tj[(victim, interval)]
        med, p90, cnt = lib.stats(vals)
        g_med = lib.stats(g["node %d back" % victim])[0]
        ratio = "" if med is None or not g_med else "  ratio %.1fx" % (med / g_med)
        print("  torchrun  %-34s %6s / %6s  (%d)%s" % (label, lib.ms(med), lib.ms(p90), cnt, ratio))
        print_outcomes(whats, len(vals))
        med = lib.stats(noticed)[0]
        if med is not None:
            print("      the first rank ran again %.1f s after the kill (median)" % med)
        if orphans:
            print("      node %d's old workers still running at the end (outlived their "
                  "agent): %s" % (victim, ", ".join(orphans)))


def launch(hosts, commands, env, **kw):
    """A lib.Run with the benchmark's log directory (--log-dir), if any."""
    kw["logs"] = LOG_DIR or kw.get("logs")
    return lib.Run(hosts, commands, env, timeout=RUN_TIMEOUT, **kw)


def parse_args():
    ap = argparse.ArgumentParser(prog=PROG, description="Multi-node timings on simulated "
                                 "hosts against torchrun 1.13 (needs root).")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 5),
                    help="gculaunch repetitions (BENCH_REPS, 5)")
    ap.add_argument("--torchrun-reps", type=int, default=lib.env_int("TORCHRUN_REPS", 3),
                    help="torchrun repetitions (TORCHRUN_REPS, 3)")
    ap.add_argument("--torchrun-node0-reps", type=int,
                    default=lib.env_int("TORCHRUN_NODE0_REPS", 1),
                    help="torchrun node-0-back repetitions, 60 s each (TORCHRUN_NODE0_REPS, 1)")
    ap.add_argument("--nproc", type=int, default=lib.env_int("BENCH_NPROC", 2),
                    help="ranks per node (BENCH_NPROC, 2)")
    ap.add_argument("--nodes", type=int, nargs="+", default=lib.env_list("BENCH_NODES", "2 3"),
                    help="node counts (BENCH_NODES, \"2 3\")")
    ap.add_argument("--parts", nargs="+", choices=("base", "rejoin", "elastic"),
                    default=os.environ.get("BENCH_PARTS", "base rejoin elastic").split(),
                    help="which rows (BENCH_PARTS, \"base rejoin elastic\")")
    ap.add_argument("--elastic-reps", type=int, default=lib.env_int("ELASTIC_REPS", 2),
                    help="shrink/grow repetitions per side (ELASTIC_REPS, 2)")
    ap.add_argument("--elastic-sides", nargs="+", choices=("gculaunch", "torchrun"),
                    default=os.environ.get("ELASTIC_SIDES", "gculaunch torchrun").split(),
                    help="(ELASTIC_SIDES, \"gculaunch torchrun\")")
    ap.add_argument("--log-dir", default=os.environ.get("BENCH_LOG_DIR") or None,
                    help="keep every launcher's output there, torchrun's at LOGLEVEL=INFO "
                    "(BENCH_LOG_DIR)")
    ap.add_argument("--budget", type=float, default=TOTAL_BUDGET,
                    help="seconds for the whole run (%d)" % TOTAL_BUDGET)
    return ap.parse_args()


def main():
    global GCULAUNCH, REPS, TREPS, TREPS0, NPROC, EREPS, NODE_COUNTS, PARTS, ELASTIC_SIDES
    global LOG_DIR, BUDGET
    args = parse_args()
    GCULAUNCH = lib.require_gculaunch(PROG, args.gculaunch)
    lib.require_root(PROG)
    REPS, TREPS, TREPS0 = args.reps, args.torchrun_reps, args.torchrun_node0_reps
    NPROC, EREPS, NODE_COUNTS = args.nproc, args.elastic_reps, args.nodes
    PARTS, ELASTIC_SIDES = args.parts, args.elastic_sides
    LOG_DIR = args.log_dir
    if LOG_DIR:
        os.makedirs(LOG_DIR, exist_ok=True)
    BUDGET = lib.Budget(args.budget)
    measure()


if __name__ == "__main__":
    main()
