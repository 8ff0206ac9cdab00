"""bench/liveness.py - slow is not dead (issue 39): many nodes on one machine, and how fast a
dead node is noticed while a stopped one is not.  A benchmark, not a test: it prints numbers
and asserts nothing.

  sudo python3 -m bench.liveness [--parts scale reaction] [--nodes 256 512 1024 2048]

  scale      N full gculaunch processes on loopback (127.0.0.1, a free port), one rank each
             (`sleep --hold` seconds, --no-python), platform variables WORLD_SIZE=N, RANK=i:
             from the first launch to the last exit, how many exited 0, how many logged a
             lost node, the load average before and after, the peak of running processes,
             the longest silence of node 0 that a node warned about and survived, and node
             0's longest pause of its own (from their log lines).  Each N is bounded by
             --scale-limit seconds; what is still running then is killed and counted as
             failed.
  reaction   two simulated hosts (network namespaces, tests/integration/gltest.py), one rank
             each, --max-restarts 0, for node 0 and node 1 as the victim:
               kill -9           the victim's gculaunch SIGKILLed
               link pulled       the victim's veth set down inside the switch namespace
               SIGSTOP 8 s       the victim's gculaunch stopped for 8 s, then continued
               SIGSTOP for good  stopped and never continued (a wedged host)
             the time from the event to the other node's reaction in its events.jsonl (its
             own timestamps: the node_loss line, or its rank stopped, whichever is first);
             for the 8 s stop, whether the job still finished with 0.

Each gculaunch of the scale part keeps its stderr in <log dir>/node<i>.log when --log-dir is
given (else a temporary directory that is removed).  Needs root for the reaction part (ip netns)
and a raised open-file limit for node 0 at 2048 nodes (two connections per node): the
benchmark raises its own soft limit to the hard limit, and the launchers inherit it.
"""
import argparse
import glob
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import time

from bench import lib
from tests.integration import gltest

PROG = "bench.liveness"
EVENTS = ("kill -9", "link pulled", "SIGSTOP 8 s", "SIGSTOP for good")
TOTAL_BUDGET = 3600


# ---------------------------------------------------------------- scale: N loopback nodes

def running_processes():
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


SILENCE = re.compile(r"answered again after ([0-9.]+) s of silence")
LATE = re.compile(r"this gculaunch did not run for ([0-9.]+) s")


def scale_round(gculaunch, n, hold, limit, logs, node_timeout):
    port = lib.free_port()
    procs = []
    load_before = os.getloadavg()[0]
    t0 = time.time()
    for i in range(n):
        env = dict(os.environ, WORLD_SIZE=str(n), RANK=str(i), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        with open(os.path.join(logs, "node%d.log" % i), "w") as log:
            procs.append(subprocess.Popen(
                [gculaunch, "--nproc-per-node", "1", "--device", "cpu", "--max-restarts", "0",
                 "--rdzv-timeout", str(limit)]
                + (["--node-timeout", "%g" % node_timeout] if node_timeout else [])
                + ["--no-python", "/bin/sleep", str(hold)],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True))
    launched = time.time() - t0
    peak = running_processes()
    deadline = time.monotonic() + limit
    codes = {}
    while len(codes) < n and time.monotonic() < deadline:
        for i, p in enumerate(procs):
            if i not in codes and p.poll() is not None:
                codes[i] = p.returncode
        peak = max(peak, running_processes())
        time.sleep(0.2)
    took = time.time() - t0
    killed = 0
    for i, p in enumerate(procs):
        if i not in codes:
            killed += 1
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            pass
    lost, silence, late = 0, 0.0, 0.0
    for i in range(n):
        with open(os.path.join(logs, "node%d.log" % i), errors="replace") as f:
            text = f.read()
        lost += "was lost" in text
        silence = max([silence] + [float(x) for x in SILENCE.findall(text)])
        late = max([late] + [float(x) for x in LATE.findall(text)])
    return {"n": n, "took": took, "launched": launched, "ok": sum(1 for c in codes.values()
                                                                  if c == 0),
            "failed": n - sum(1 for c in codes.values() if c == 0), "killed": killed,
            "lost": lost, "load_before": load_before, "load_after": os.getloadavg()[0],
            "peak": peak, "silence": silence, "late": late}


def scale(args, budget):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print("scale: N gculaunch processes on 127.0.0.1, one rank each (/bin/sleep %g), "
          "--max-restarts 0; open-file limit %d (was %d)" % (args.hold, hard, soft))
    print("%6s %9s %9s %5s %7s %7s %5s %11s %7s" % ("nodes", "total s", "launch s", "ok",
                                                    "failed", "killed", "lost", "load before",
                                                    "after"))
    for n in args.nodes:
        if budget.left() < args.scale_limit:
            print("%6d skipped: the time budget is spent" % n)
            continue
        logs = os.path.join(args.log_dir, "scale%d" % n) if args.log_dir else \
            tempfile.mkdtemp(prefix="bench-liveness-%d-" % n)
        os.makedirs(logs, exist_ok=True)
        try:
            r = scale_round(args.gculaunch, n, args.hold, args.scale_limit, logs,
                            args.node_timeout)
        finally:
            if not args.log_dir:
                shutil.rmtree(logs, ignore_errors=True)
        print("%6d %9.1f %9.1f %5d %7d %7d %5d %11.2f %7.2f   (peak %d processes; longest "
              "silence of node 0 a node saw and survived %.1f s, node 0's longest own pause "
              "%.1f s)"
              % (r["n"], r["took"], r["launched"], r["ok"], r["failed"], r["killed"], r["lost"],
                 r["load_before"], r["load_after"], r["peak"], r["silence"], r["late"]),
              flush=True)


# ---------------------------------------------------------------- reaction: two hosts

RANK = r'''
import os, sys, time
work = sys.argv[1]
open(os.path.join(work, "ready.%s" % os.environ["RANK"]), "w").close()
deadline = time.monotonic() + 120
while not os.path.exists(os.path.join(work, "release")) and time.monotonic() < deadline:
    time.sleep(0.05)
'''


def events(work, i):
    for path in glob.glob(os.path.join(work, "logs%d" % i, "*", "events.jsonl")):
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    return []


def reaction_time(work, i):
    """When node i reacted: its node_loss line, or its rank stopped by its gculaunch (a signal),
    whichever came first (gculaunch before issue 39 wrote node_loss on node 0 only)."""
    times = [e["ts"] for e in events(work, i)
             if e["event"] == "node_loss" or (e["event"] == "rank_exit" and e.get("signal"))]
    return min(times) if times else None


def reaction_round(how, victim, node_timeout):
    """Seconds from the event to the other node's node_loss (None: not lost), and the exit
    codes of both nodes (None where one did not exit in time)."""
    tag = gltest.new_tag()
    work = tempfile.mkdtemp(prefix="bench-liveness-")
    os.chmod(work, 0o755)
    rank = lib.write_script(work, "rank.py", RANK)
    other = 1 - victim
    with gltest.SimulatedHosts(2) as hosts:
        extra = ["--node-timeout", str(node_timeout)] if node_timeout else []
        # A fixed port is safe here: node 0's address lives in the benchmark's own namespace.
        jobs = [gltest.NodeJob(hosts, i, 2, 29500,
                               ["--nproc-per-node", "1", "--device", "cpu", "--max-restarts",
                                "0", "--grace-period", "2", "--rdzv-timeout", "60",
                                "--log-dir", os.path.join(work, "logs%d" % i)] + extra
                               + ["--python", lib.PYTHON, rank, work], tag)
                for i in range(2)]
        try:
            jobs[0].wait_for(lambda out, err: all(
                os.path.exists(os.path.join(work, "ready.%d" % r)) for r in range(2)),
                timeout=120, what="both ranks ready")
            if how == "kill -9":
                jobs[victim].signal(signal.SIGKILL)
            elif how == "link pulled":
                hosts.unplug(victim)
            else:
                jobs[victim].signal(signal.SIGSTOP)
            t0 = time.time()
            if how == "SIGSTOP 8 s":
                time.sleep(8)
                jobs[victim].signal(signal.SIGCONT)
                open(os.path.join(work, "release"), "w").close()
            codes = []
            for i in (other, victim):
                try:
                    codes.append(jobs[i].wait(timeout=90))
                except AssertionError:
                    codes.append(None)
                if how == "SIGSTOP for good":
                    break
            lost = reaction_time(work, other)
            return (None if lost is None else lost - t0), codes
        finally:
            for job in jobs:
                if how.startswith("SIGSTOP"):
                    try:
                        job.signal(signal.SIGCONT)
                    except OSError:
                        pass
                job.__exit__(None, None, None)
            gltest.kill_tagged(tag)
            shutil.rmtree(work, ignore_errors=True)


def reaction(args, budget):
    print("reaction: two simulated hosts, one rank each, --max-restarts 0%s; seconds from the "
          "event to the other node's reaction (node_loss, or its rank stopped; medians of %d)"
          % (", --node-timeout %g" % args.node_timeout if args.node_timeout else "", args.reps))
    print("%-18s %-7s %12s %s" % ("event", "victim", "reaction s", "exit codes (other, victim)"))
    for how in args.events:
        for victim in (0, 1):
            if budget.left() < 120:
                print("%-18s node %d skipped: the time budget is spent" % (how, victim))
                continue
            took, all_codes = [], []
            for _ in range(args.reps):
                t, codes = reaction_round(how, victim, args.node_timeout)
                took.append(t)
                all_codes.append(codes)
            lost = [t for t in took if t is not None]
            shown = "%.2f" % lib.median(lost) if lost else "not lost"
            if lost and len(lost) < len(took):
                shown += " (%d of %d lost)" % (len(lost), len(took))
            print("%-18s node %d %12s %s" % (how, victim, shown, all_codes), flush=True)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description="Slow is not dead: many loopback "
                                 "nodes, and the reaction to a dead, cut-off or stopped node.")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--parts", nargs="+", choices=("scale", "reaction"),
                    default=["scale", "reaction"])
    ap.add_argument("--nodes", type=int, nargs="+",
                    default=lib.env_list("BENCH_NODES", "256 512 1024 2048"),
                    help="node counts of the scale part (BENCH_NODES)")
    ap.add_argument("--hold", type=float, default=5,
                    help="seconds each rank of the scale part runs (default 5)")
    ap.add_argument("--scale-limit", type=float, default=600,
                    help="seconds one node count may take before it is killed (default 600)")
    ap.add_argument("--events", nargs="+", choices=EVENTS, default=list(EVENTS),
                    help="the reaction part's rows (default: all)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 3),
                    help="repetitions of each reaction row (BENCH_REPS, 3)")
    ap.add_argument("--node-timeout", type=float, default=0,
                    help="--node-timeout of every launcher (default: gculaunch's own)")
    ap.add_argument("--log-dir", default=None, help="keep the scale part's logs here")
    ap.add_argument("--budget", type=float, default=TOTAL_BUDGET,
                    help="seconds for the whole benchmark (default %d)" % TOTAL_BUDGET)
    args = ap.parse_args()
    args.gculaunch = lib.require_gculaunch(PROG, args.gculaunch)
    budget = lib.Budget(args.budget)
    if "scale" in args.parts:
        scale(args, budget)
    if "reaction" in args.parts:
        lib.require_root(PROG)
        reaction(args, budget)


if __name__ == "__main__":
    main()
