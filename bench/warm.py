"""bench/warm.py - warm ranks (--warm-ranks, issue 29): how long from a rank's failure until
the restarted group has finished init_process_group, for gculaunch with standbys, gculaunch
cold, torchrun 1.13 and torchrun 2.6 (c10d, --monitor_interval 0.1; 2.6 from the root of
scripts/make_torch2_root.sh, with its own torch 2.6 ranks), interleaved, on this machine.

    python3 -m bench.warm [--reps 3] [--nproc 2,8]

Every launcher runs the same real PyTorch rank program (gloo on CPU, --max-restarts 1).  In
attempt 0 each rank runs init_process_group and a barrier, then waits until the launcher is
ready to restart fast: for gculaunch --warm-ranks until every standby said ready (its ready
file beside TORCHELASTIC_ERROR_FILE); for the others a fixed --settle time, the same or
longer.  Then rank 0 records the time and every rank exits 1 ("the failure").  In attempt 1
every rank records the time at which its init_process_group returned.  The number is the
last of those minus the failure: a restart as the job feels it, interpreter start and
`import torch` included.  Then (--parts rejoin, root) two simulated hosts with real torch
ranks: node 1's gculaunch is SIGKILLed and started again at once; the number is the kill ->
every rank of both nodes finished init_process_group again, gculaunch warm against cold
(node 1's own ranks start cold either way unless the rendezvous waits longer than the import:
its standbys start with it).  Then (--parts early) the case where standbys must not get in
the way: rank 0 fails right after init_process_group, before any standby could be ready (4
ranks by default, --max-restarts 2, so the restarted attempt has standbys beside it too), with
and without --warm-ranks: the failure -> every rank of attempt 1 finished init_process_group,
and gculaunch's start -> the same, medians and ranges (min-max).  A benchmark, not a test: it
prints numbers and asserts nothing.  Run from the top of the repository.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

from bench import lib
from tests.integration import gltest

PROG = "bench.warm"
RUN_TIMEOUT = 240

RANK = r'''
import glob, json, os, sys, time
out, settle, warm = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "warm"
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
inited = time.time()
if attempt == 1:
    with open(os.path.join(out, "init.%d" % rank), "w") as f:
        f.write(repr(inited))
    dist.barrier()
    sys.exit(0)
dist.barrier()
deadline = time.monotonic() + 120
if warm:
    root = os.environ["TORCHELASTIC_ERROR_FILE"].split("/attempt_")[0]
    local = int(os.environ["LOCAL_WORLD_SIZE"])
    while time.monotonic() < deadline:
        if len(glob.glob(os.path.join(root, "standbys", "standby-*"))) >= local:
            break
        time.sleep(0.02)
ready = time.time()
dist.barrier()
if rank == 0:
    with open(os.path.join(out, "ready"), "w") as f:
        f.write(repr(ready))
time.sleep(max(0.0, settle - (time.time() - inited)))
dist.barrier()
if rank == 0:
    with open(os.path.join(out, "fail"), "w") as f:
        f.write(repr(time.time()))
sys.exit(1)
'''


def command(launcher, nproc, script, out, settle):
    if launcher.startswith("gculaunch"):
        cmd = [GCULAUNCH, "--standalone", "--nproc-per-node", str(nproc), "--device", "cpu",
               "--max-restarts", "1", "--restart-backoff", "off", "--python", lib.PYTHON]
        if launcher == "gculaunch-warm":
            cmd += ["--warm-ranks"]
        mode = "warm" if launcher == "gculaunch-warm" else "cold"
    else:
        base = TORCHRUN2 if launcher == "torchrun-2.6" else [lib.PYTHON, lib.TORCHRUN113]
        cmd = base + ["--nnodes", "1", "--nproc_per_node", str(nproc),
               "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % lib.free_port(),
               "--rdzv_id", lib.new_tag(), "--monitor_interval", "0.1", "--max_restarts", "1"]
        mode = "cold"
    return cmd + [script, out, str(settle), mode]


def one(launcher, nproc, script, settle):
    out = tempfile.mkdtemp(prefix="gculaunch-bench-warm-")
    tmp = os.path.join(out, "tmp")
    os.mkdir(tmp)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "TMPDIR": tmp,
           "GCULAUNCH_BENCH_TAG": lib.new_tag()}
    try:
        if launcher == "torchrun-2.6":
            env.update(TORCHRUN2_ENV)
        proc = subprocess.run(command(launcher, nproc, script, out, settle), env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=RUN_TIMEOUT)
        inits = []
        for r in range(nproc):
            path = os.path.join(out, "init.%d" % r)
            if os.path.exists(path):
                inits.append(float(open(path).read()))
        if proc.returncode != 0 or len(inits) != nproc:
            sys.stderr.write("%s: %s exited %d:\n%s\n" % (PROG, launcher, proc.returncode,
                                                          proc.stderr.decode()[-2000:]))
            return None
        failed = float(open(os.path.join(out, "fail")).read())
        return max(inits) - failed
    finally:
        subprocess.run(["rm", "-rf", out])


TORCHRUN2, TORCHRUN2_ENV = None, None

REJOIN_RANK = r'''
import os, sys, time
out = sys.argv[1]
epoch = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
with open(os.path.join(out, "init.%d.%d" % (epoch, rank)), "w") as f:
    f.write(repr(time.time()))
dist.barrier()
time.sleep(600)
'''


def standbys_ready(tag, count):
    """True once `count` standbys of the tagged launchers said ready (their ready files)."""
    ready = 0
    for pid in gltest.pids_with_tag(tag):
        try:
            path = gltest.read_environ(pid).get("GCULAUNCH_STANDBY_READY")
        except OSError:
            continue
        if path and os.path.exists(path):
            ready += 1
    return True if ready >= count else None


def rejoin_once(hosts, warm, nproc, script, rep):
    """Two simulated hosts, `nproc` real torch ranks each (platform variables, --max-restarts
    1).  Once every rank initialised (and, warm, node 0's standbys are ready), node 1's
    gculaunch is SIGKILLed and started again at once: seconds from the kill until every rank
    of both nodes finished init_process_group again."""
    out = tempfile.mkdtemp(prefix="gculaunch-bench-rejoin-")
    world = 2 * nproc
    port = 31000 + rep
    cmd = [GCULAUNCH, "--nproc-per-node", str(nproc), "--device", "cpu", "--max-restarts", "1",
           "--grace-period", "5", "--restart-backoff", "off"] + (["--warm-ranks"] if warm else [])
    cmd += ["--python", lib.PYTHON, script, out]
    env = lambda k: {"WORLD_SIZE": "2", "RANK": str(k), "MASTER_ADDR": hosts.addr(0),
                     "MASTER_PORT": str(port), "GLOO_SOCKET_IFNAME": "eth0",
                     "OMP_NUM_THREADS": "1"}
    run = lib.Run(hosts, [cmd, cmd], env, name="rejoin", timeout=RUN_TIMEOUT)
    try:
        inits = lambda epoch: [f for f in os.listdir(out) if f.startswith("init.%d." % epoch)]
        if lib.wait_for(lambda: True if len(inits(0)) >= world else None, RUN_TIMEOUT) is None:
            return None
        if warm and lib.wait_for(lambda: standbys_ready(run.tag, 2 * nproc), 120) is None:
            return None
        t_kill = time.time()
        old = run.procs[1]
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        run.again(1)
        if lib.wait_for(lambda: True if len(inits(1)) >= world else None, RUN_TIMEOUT) is None:
            return None
        return max(float(open(os.path.join(out, f)).read()) for f in inits(1)) - t_kill
    finally:
        run.kill()
        subprocess.run(["rm", "-rf", out])


EARLY_RANK = r'''
import os, sys, time
out = sys.argv[1]
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
inited = time.time()
if attempt == 0:
    if rank == 0:
        with open(os.path.join(out, "fail"), "w") as f:
            f.write(repr(time.time()))
        sys.exit(1)
    time.sleep(120)  # stopped by the teardown
with open(os.path.join(out, "init.%d" % rank), "w") as f:
    f.write(repr(inited))
dist.barrier()
sys.exit(0)
'''


def early_once(warm, nproc, script):
    """One run of the early failure: (failure -> attempt 1 initialised, start -> the same), in
    seconds; None on a failed run."""
    out = tempfile.mkdtemp(prefix="gculaunch-bench-early-")
    tmp = os.path.join(out, "tmp")
    os.mkdir(tmp)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "TMPDIR": tmp,
           "GCULAUNCH_BENCH_TAG": lib.new_tag()}
    cmd = [GCULAUNCH, "--standalone", "--nproc-per-node", str(nproc), "--device", "cpu",
           "--max-restarts", "2", "--restart-backoff", "off", "--python", lib.PYTHON]
    cmd += (["--warm-ranks"] if warm else []) + [script, out]
    try:
        began = time.time()
        proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=RUN_TIMEOUT)
        inits = [os.path.join(out, "init.%d" % r) for r in range(nproc)]
        if proc.returncode != 0 or not all(os.path.exists(p) for p in inits):
            sys.stderr.write("%s: early failure run exited %d:\n%s\n"
                             % (PROG, proc.returncode, proc.stderr.decode()[-2000:]))
            return None
        last = max(float(open(p).read()) for p in inits)
        failed = float(open(os.path.join(out, "fail")).read())
        return last - failed, last - began
    finally:
        subprocess.run(["rm", "-rf", out])


def early_rows(opts, budget):
    """The early failure, warm and cold interleaved, `opts.reps` each."""
    work = tempfile.mkdtemp(prefix="gculaunch-bench-early-prog-")
    script = lib.write_script(work, "rank.py", EARLY_RANK)
    nproc = opts.early_nproc
    print()
    print("rank 0 fails right after init_process_group (%d ranks, torch %s, %d CPUs, "
          "--max-restarts 2): failure -> attempt 1 initialised / start -> attempt 1 "
          "initialised, median [min-max] of %d" % (nproc, torch_version(), os.cpu_count(),
                                                   opts.reps))
    results = {True: [], False: []}
    for _ in range(opts.reps):
        for warm in (True, False):
            if budget.left() < RUN_TIMEOUT:
                break
            results[warm].append(early_once(warm, nproc, script))
    print("%-22s %26s %26s" % ("", "failure -> initialised", "start -> initialised"))
    for warm in (True, False):
        row = []
        for part in (0, 1):
            values = [r[part] for r in results[warm] if r is not None]
            mid, _ = lib.med(values)
            span = "[%s-%s]" % (lib.ms(min(values)), lib.ms(max(values))) if values else ""
            row.append("%s ms %s" % (lib.ms(mid), span))
        print("%-22s %26s %26s" % ("gculaunch --warm-ranks" if warm else "gculaunch",
                                   row[0], row[1]))
    sys.stdout.flush()
    subprocess.run(["rm", "-rf", work])


def rejoin_rows(opts, budget):
    """The rejoin part: gculaunch warm and cold, `opts.reps` each, interleaved."""
    lib.require_root(PROG)
    work = tempfile.mkdtemp(prefix="gculaunch-bench-rejoin-prog-")
    script = lib.write_script(work, "rank.py", REJOIN_RANK)
    print()
    print("node 1's gculaunch SIGKILLed and started again -> every rank of both nodes finished "
          "init_process_group again (2 simulated hosts), median of %d" % opts.reps)
    print("%-14s %10s %10s %10s" % ("ranks", "warm ms", "cold ms", "warm/cold"))
    with gltest.SimulatedHosts(2) as hosts:
        for nproc in [int(n) for n in opts.nproc.split(",") if n]:
            results = {True: [], False: []}
            for rep in range(opts.reps):
                for warm in (True, False):
                    if budget.left() < RUN_TIMEOUT:
                        break
                    results[warm].append(rejoin_once(hosts, warm, nproc, script,
                                                     rep * 2 + (1 if warm else 0)))
            warm_ms, _ = lib.med(results[True])
            cold_ms, _ = lib.med(results[False])
            print("%-14s %10s %10s %10s" % (
                "2 x %d" % nproc, lib.ms(warm_ms), lib.ms(cold_ms),
                "-" if warm_ms is None or not cold_ms else "%.2f" % (warm_ms / cold_ms)))
            sys.stdout.flush()
    subprocess.run(["rm", "-rf", work])


def main():
    global GCULAUNCH
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 3))
    parser.add_argument("--nproc", default=os.environ.get("BENCH_NPROC", "2,8"),
                        help="rank counts, comma-separated (default 2,8)")
    parser.add_argument("--settle", type=float, default=8.0,
                        help="seconds attempt 0 runs after init_process_group before it fails, "
                             "at least (standbys ready, for --warm-ranks)")
    parser.add_argument("--gculaunch", default=lib.default_gculaunch())
    parser.add_argument("--parts", nargs="+", choices=("failure", "rejoin", "early"),
                        default=["failure", "rejoin", "early"],
                        help="which rows: a rank's failure on one node, a node's launcher "
                             "killed and started again on two simulated hosts (needs root), "
                             "and a failure right after init_process_group, before the "
                             "standbys are ready")
    parser.add_argument("--early-nproc", type=int, default=4,
                        help="ranks of the early-failure rows (default 4)")
    opts = parser.parse_args()
    GCULAUNCH = opts.gculaunch
    lib.require_gculaunch(PROG, GCULAUNCH)
    work = tempfile.mkdtemp(prefix="gculaunch-bench-warm-prog-")
    script = lib.write_script(work, "rank.py", RANK)
    budget = lib.Budget(45 * 60)
    if "failure" in opts.parts:
        failure_rows(opts, script, budget)
    if "rejoin" in opts.parts:
        rejoin_rows(opts, budget)
    if "early" in opts.parts:
        early_rows(opts, budget)
    subprocess.run(["rm", "-rf", work])


def failure_rows(opts, script, budget):
    global TORCHRUN2, TORCHRUN2_ENV
    launchers = ["gculaunch-warm", "gculaunch-cold", "torchrun-1.13", "torchrun-2.6"]
    root = lib.make_torch2_root()
    if root is None:
        print("(no torch 2.6 root: torchrun 2.6 left out)")
        launchers.pop()
    else:
        TORCHRUN2, TORCHRUN2_ENV = lib.torchrun26_command(root)
    print("rank failure -> every restarted rank finished init_process_group (torch %s, gloo, "
          "CPU; %d CPUs), median of %d" % (torch_version(), os.cpu_count(), opts.reps))
    print("%-6s %10s %10s %12s %12s %10s %14s" % ("ranks", "warm ms", "cold ms", "tr-1.13 ms",
                                                   "tr-2.6 ms", "warm/cold", "tr-1.13/warm"))
    for nproc in [int(n) for n in opts.nproc.split(",") if n]:
        results = {name: [] for name in launchers}
        for _ in range(opts.reps):
            for name in launchers:
                if budget.left() < RUN_TIMEOUT:
                    break
                results[name].append(one(name, nproc, script, opts.settle))
        warm, _ = lib.med(results["gculaunch-warm"])
        cold, _ = lib.med(results["gculaunch-cold"])
        torchrun, _ = lib.med(results["torchrun-1.13"])
        torchrun2, _ = lib.med(results.get("torchrun-2.6", []))
        print("%-6d %10s %10s %12s %12s %10s %14s" % (
            nproc, lib.ms(warm), lib.ms(cold), lib.ms(torchrun), lib.ms(torchrun2),
            "-" if warm is None or not cold else "%.2f" % (warm / cold),
            lib.ratio(torchrun, warm)))
        sys.stdout.flush()


def torch_version():
    out = subprocess.run([lib.PYTHON, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    main()
