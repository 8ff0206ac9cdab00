"""bench/supervision.py - what the safer supervision (issue 24) costs, in one interleaved run:
this gculaunch, optionally an older build (--old, e.g. one built from the
commit before), and torchrun 1.13 (Debian's torch, bench/torchrun113.py) with
--monitor_interval 0.1.  A benchmark, not a test: it prints numbers and asserts nothing.

  python3 -m bench.supervision [--reps 5] [--nproc 8] [--old GCULAUNCH]

Ranks are trivial Pythons (no torch import) that record timestamps.  Per repetition and
launcher, in turn:
  start     launch -> every rank has run its first line
  failure   a rank exits 1 (the others sleep) -> launcher exit
  gone      the same failure -> no process the launcher started is alive (its guardian
            included)
  kill9     SIGKILL of the launcher while 8 ranks each have a grandchild -> no rank,
            grandchild or guardian alive (torchrun: its workers' grandchildren are never
            killed, so the row shows how many were left)
  storm     a rank that fails at once under --max-restarts 100000, for --storm-seconds
            (default 10): the attempts started (gculaunch backs off quick failures;
            --restart-backoff)
Medians are printed with ratios against this gculaunch.

Options (each defaults to the environment variable named in its help): see --help.  Run
from the top of the repository.
"""
import argparse
import os
import signal
import subprocess
import tempfile
import time

from bench import lib

PROG = "bench.supervision"
PYTHON = lib.PYTHON
TORCHRUN = lib.TORCHRUN113
# Set by main() from the options:
GCULAUNCH = OLD = None
REPS = NPROC = 1
STORM = 10.0


def command(launcher, mode, out, script):
    if launcher.startswith("gculaunch"):
        binary = GCULAUNCH if launcher == "gculaunch" else OLD
        cmd = [binary, "--standalone", "--nproc-per-node", str(NPROC), "--python", PYTHON]
        if mode == "storm":
            cmd += ["--max-restarts", "100000"]
    else:
        cmd = [PYTHON, TORCHRUN, "--nnodes", "1", "--nproc_per_node", str(NPROC),
               "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % lib.free_port(),
               "--rdzv_id", lib.new_tag(), "--monitor_interval", "0.1"]
        if mode == "storm":
            cmd += ["--max_restarts", "100000"]
    return cmd + [script, mode, out]


def one(launcher, mode, script):
    tag = lib.new_tag()
    env = dict(os.environ, GCULAUNCH_BENCH_TAG=tag, PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="bench-sup-") as out:
        t0 = time.time()
        proc = subprocess.Popen(command(launcher, mode, out, script), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        result = {}
        try:
            if mode == "storm":
                time.sleep(STORM)
                result["storm"] = len({n.split(".")[1] for n in os.listdir(out)
                                       if n.startswith("start.")})
                return result
            if mode == "grandchild":
                deadline = time.time() + 60
                while sum(1 for n in os.listdir(out) if n.startswith("gc.")) < NPROC:
                    if time.time() > deadline:
                        return result
                    time.sleep(0.005)
                k = time.time()
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                end = time.time() + 5
                while (lib.tagged_alive(tag) or lib.guardian_alive(proc.pid)) and time.time() < end:
                    time.sleep(0.001)
                left = len(lib.tagged_alive(tag))
                result["kill9"] = (time.time() - k) * 1000 if left == 0 else float("nan")
                result["kill9_left"] = left
                return result
            proc.wait(timeout=120)
            t_exit = time.time()
            starts = [float(open(os.path.join(out, n)).read())
                      for n in os.listdir(out) if n.startswith("start.0.")]
            if len(starts) == NPROC:
                result["start"] = (max(starts) - t0) * 1000
            fail = os.path.join(out, "fail")
            if os.path.exists(fail):
                t_fail = float(open(fail).read())
                result["failure"] = (t_exit - t_fail) * 1000
                end = time.time() + 5
                while (lib.tagged_alive(tag) or lib.guardian_alive(proc.pid)) and time.time() < end:
                    time.sleep(0.001)
                result["gone"] = (time.time() - t_fail) * 1000
            return result
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the session this script created
                proc.wait()
            lib.kill_pids(lib.tagged_alive(tag))  # what the run left (torchrun's grandchildren)


def measure():
    launchers = ["gculaunch"] + (["gculaunch-old"] if OLD else []) + ["torchrun-0.1"]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(lib.WORKER)
        script = f.name
    rows = {}
    try:
        for rep in range(REPS):
            for launcher in launchers:
                for mode in ("fail", "grandchild"):
                    for key, value in one(launcher, mode, script).items():
                        rows.setdefault((key, launcher), []).append(value)
        for launcher in launchers:  # one storm each: it runs for STORM seconds
            for key, value in one(launcher, "storm", script).items():
                rows.setdefault((key, launcher), []).append(value)
    finally:
        os.unlink(script)
    print("supervision, %d ranks, %d repetitions (medians; ms unless said)" % (NPROC, REPS))
    header = "%-34s" % "row" + "".join("%16s" % l for l in launchers) + "%14s" % "ratio"
    print(header)
    names = {"start": "start (launch -> ranks ran)", "failure": "failure (rank exit -> exit)",
             "gone": "gone (rank exit -> nothing left)",
             "kill9": "kill -9 -> nothing left",
             "kill9_left": "kill -9: processes left",
             "storm": "crash loop: attempts in %g s" % STORM}
    for key in ("start", "failure", "gone", "kill9", "kill9_left", "storm"):
        values = []
        for launcher in launchers:
            values.append(lib.median(rows.get((key, launcher), [])))
        line = "%-34s" % names[key]
        line += "".join("%16s" % ("-" if v is None else "%.1f" % v) for v in values)
        base, last = values[0], values[-1]
        if key not in ("kill9_left", "storm") and base and last:
            line += "%13.1fx" % (last / base)
        print(line)
    print("ratio: torchrun-0.1 / gculaunch")


def main():
    global GCULAUNCH, OLD, REPS, NPROC, STORM
    ap = argparse.ArgumentParser(prog=PROG, description="What the safer supervision costs, "
                                 "against torchrun 1.13 and optionally an older gculaunch.")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--old", default=os.environ.get("BENCH_OLD_GCULAUNCH", ""),
                    help="an older gculaunch build to compare (BENCH_OLD_GCULAUNCH)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 5),
                    help="repetitions (BENCH_REPS, 5)")
    ap.add_argument("--nproc", type=int, default=lib.env_int("BENCH_NPROC", 8),
                    help="ranks (BENCH_NPROC, 8)")
    ap.add_argument("--storm-seconds", type=float,
                    default=lib.env_float("BENCH_STORM_SECONDS", 10),
                    help="how long the crash loop runs (BENCH_STORM_SECONDS, 10)")
    args = ap.parse_args()
    GCULAUNCH = lib.require_gculaunch(PROG, args.gculaunch)
    if args.old and not os.access(args.old, os.X_OK):
        lib.die(PROG, "--old '%s' is not executable (fix: give the path of an older gculaunch "
                "build, or leave it out)" % args.old)
    OLD, REPS, NPROC, STORM = args.old, args.reps, args.nproc, args.storm_seconds
    measure()


if __name__ == "__main__":
    main()
