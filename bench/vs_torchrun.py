"""bench/vs_torchrun.py - gculaunch against torchrun, in one interleaved run:
Debian's torch 1.13 (bookworm, on this machine) through bench/torchrun113.py,
with its default --monitor_interval (5 s) and with 0.1 s; and torch 2.6
(trixie's python3-torch) from the root of scripts/make_torch2_root.sh, run
through scripts/in_root.sh and bench/torchrun26.py, with its own defaults
(--monitor-interval 0.1 s).  A benchmark, not a test: it prints numbers and
asserts nothing.

  python3 -m bench.vs_torchrun [--reps 5] [--nproc 8] [--metrics-only] [--old GCULAUNCH]
                               [--path-python DIR]

--path-python DIR (BENCH_PATH_PYTHON) puts DIR first on PATH and gives gculaunch no --python,
so that it runs python3 found there, as a user whose python3 is a pyenv shim does
(--path-python "$HOME/.pyenv/shims"; gculaunch's ranks then run the interpreter behind the
shim, docs/command-line.md "Interpreter shims").  torchrun is started with Debian's python3 in
either case; its ranks run sys.executable.  Each launcher's overheads then count from the
Pythons its own ranks run: a second floor, "direct-path", starts the interpreter python3 there
runs (pyenv's own build starts about 4x slower than Debian's on the test machine: a shared
libpython), and gculaunch's rows subtract it.

The torch 2.6 column pays for entering its root: in_root.sh starts a few
processes and binds a few directories before torchrun's python runs.  The
script measures that entry (in_root.sh ROOT /usr/bin/true against
/usr/bin/true) and prints it below the table: about 75 ms (median; 60 ms at
best, more under load) on the 2-core VM where this was written, nearly all
of it the start of its 6 short processes.  It is inside the "start" numbers
of that column only: the ranks that torchrun 2.6 starts are already inside
the root.  Its ranks run the root's
Python 3.13, the others the host's 3.11.  Debian's torch 2.6 has no libuv,
so torchrun 2.6 runs with USE_LIBUV=0 and TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
(see bench/torchrun26.py; the trivial workers make no store, but these
are the settings under which real workers run).  The root is made first if
missing (minutes, once; needs root).

Workers are 8 trivial Python ranks (no torch import) that record
timestamps.  Per repetition and launcher, in turn:
  start    launch -> every rank has run its first line (minus the same for
           8 Pythons started directly by this script: "overhead")
  exit     last rank's exit -> launcher exit (all ranks exit 0; minus the
           same for the 8 direct Pythons: "overhead")
  failure  a rank exits 1 (the others sleep) -> launcher exit
  gone     the same failure -> no process the launcher started is alive (its guardian
           included: gculaunch reaps it before it exits)
  restart  a rank exits 1 in attempt 0 -> every rank of attempt 1 started
           (--max-restarts 1)
  rss      the launcher process's peak resident set (VmHWM), sampled
  spawned  gculaunch only: its exec -> every rank exec'd, from its debug log
and prints medians and ratios (torchrun / gculaunch).

Then the cost of --metrics-port (docs/operations.md), gculaunch alone: the same ranks
sleeping --metrics-seconds (default 20), once without metrics and once with
--metrics-port and GET /metrics every second, interleaved, --metrics-reps times
(default 3).  Per run: gculaunch's own CPU time (utime + stime of /proc/<pid>/stat, sampled
every 50 ms up to its exit; the ranks are not counted), its peak RSS (VmHWM), and the
scrapes' latency.  --metrics-only (BENCH_METRICS_ONLY=1) runs only this part (no torchrun,
no torch 2.6 root needed).

Options (each defaults to the environment variable named in its help; GCULAUNCH_CACHE_DIR
says where the torch 2.6 root is): see --help.  Run from the top of the repository.
"""
import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench import lib

PROG = "bench.vs_torchrun"
PYTHON = lib.PYTHON
TORCHRUN = lib.TORCHRUN113
RUN_TIMEOUT = 120        # seconds per launch
# The launchers' XDG_CACHE_HOME: one private directory for the whole run, so gculaunch's cache
# of the ranks' interpreter (warm after the first launch) is the benchmark's own.
CACHE_HOME = tempfile.mkdtemp(prefix="gculaunch-bench-cache-")
atexit.register(shutil.rmtree, CACHE_HOME, True)
TOTAL_BUDGET = 30 * 60   # the whole benchmark
# Set by main() from the options:
GCULAUNCH = OLD_GCULAUNCH = ROOT2 = None
PATH_PYTHON = ""  # --path-python: first on PATH, and gculaunch gets no --python
# With --path-python: the interpreter python3 there runs (behind a shim: the one it picks), which
# gculaunch's ranks run; "direct-path" starts it directly, the floor of gculaunch's overheads.
PATH_INTERPRETER = ""
REPS = NPROC = METRICS_REPS = 1
METRICS_ONLY = False
METRICS_SECONDS = 20.0
# torch 2.6's torchrun: the root's python3 entered through scripts/in_root.sh, which also
# shows bench/ (with torchrun26.py) inside the root; set by main()
TORCHRUN2, TORCHRUN2_ENV = None, None


def all_gone_at(tag, bound=5.0):
    """The time at which no process carrying the tag was alive (bounded)."""
    deadline = time.time() + bound
    while True:
        t = time.time()
        if not lib.tagged_alive(tag) or t > deadline:
            return t
        time.sleep(0.001)


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.stop = pid, 0, False

    def run(self):
        while not self.stop:
            kb = lib.vm_hwm_kb(self.pid)
            if kb is None:
                return
            self.peak_kb = max(self.peak_kb, kb)
            time.sleep(0.002)


def command(launcher, mode, out, script):
    if launcher in ("gculaunch", "gculaunch-old"):
        cmd = [GCULAUNCH if launcher == "gculaunch" else OLD_GCULAUNCH, "--standalone",
               "--nproc-per-node", str(NPROC), "--device", "cpu"]
        if not PATH_PYTHON:
            cmd += ["--python", PYTHON]
        if mode == "restart":
            cmd += ["--max-restarts", "1"]
    else:
        base = TORCHRUN2 if launcher == "torchrun-2.6" else [PYTHON, TORCHRUN]
        cmd = base + ["--nnodes", "1", "--nproc_per_node", str(NPROC),
                      "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % lib.free_port(),
                      "--rdzv_id", lib.new_tag()]
        if launcher == "torchrun-0.1":
            cmd += ["--monitor_interval", "0.1"]
        if mode == "restart":
            cmd += ["--max_restarts", "1"]
    return cmd + [script, mode, out]


def run(launcher, mode, script):
    """One launch; returns a dict of metrics in seconds (rss in MB)."""
    out = tempfile.mkdtemp(prefix="gculaunch-bench-")
    tag = lib.new_tag()
    tmp = os.path.join(out, "tmp")  # the launchers' temporary files go away with `out`
    os.mkdir(tmp)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "GCULAUNCH_BENCH_TAG": tag, "OMP_NUM_THREADS": "1",
           "TMPDIR": tmp, "XDG_CACHE_HOME": CACHE_HOME}
    if PATH_PYTHON:
        env["PATH"] = PATH_PYTHON + ":" + env["PATH"]
    try:
        if launcher in ("direct", "direct-path"):
            python = PATH_INTERPRETER if launcher == "direct-path" else PYTHON
            t_launch = time.time()
            procs = []
            for r in range(NPROC):
                e = dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(NPROC))
                procs.append(subprocess.Popen([python, "-u", script, "ok", out], env=e,
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
            sampler = RssSampler(procs[0].pid)  # the same polling load as for the launchers
            sampler.start()
            watchdog = threading.Timer(RUN_TIMEOUT, lambda: [p.kill() for p in procs])
            watchdog.start()
            for p in procs:
                p.wait()
            t_exit = time.time()
            watchdog.cancel()
            sampler.stop = True
            sampler.join()
            starts = [lib.read_time(os.path.join(out, "start.0.%d" % r)) for r in range(NPROC)]
            ends = [lib.read_time(os.path.join(out, "end.%d" % r)) for r in range(NPROC)]
            return {"start": max(starts) - t_launch, "exit": t_exit - max(ends)}
        if launcher == "gculaunch":
            env["GCULAUNCH_LOG_LEVEL"] = "debug"  # it then logs how long spawning took
        if launcher == "torchrun-2.6":
            env.update(TORCHRUN2_ENV)  # Debian's torch 2.6 is built without libuv
        t_launch = time.time()
        # stderr goes to a pipe drained by a thread: a file would put the file
        # system's latency (journal commits) into the launcher's exit time.
        proc = subprocess.Popen(command(launcher, mode, out, script), env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        err_chunks = []
        drain = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()),
                                 daemon=True)
        drain.start()
        sampler = RssSampler(proc.pid)
        sampler.start()
        # A blocking wait: Popen.wait(timeout=...) polls with sleeps of up to
        # 50 ms, which would swamp the exit times.  A timer enforces the bound.
        watchdog = threading.Timer(RUN_TIMEOUT, proc.kill)
        watchdog.start()
        try:
            proc.wait()
        finally:
            sampler.stop = True
        t_exit = time.time()
        t_gone = all_gone_at(tag)
        watchdog.cancel()
        sampler.join()
        drain.join(timeout=10)
        proc.stderr.close()
        m = {"rss": sampler.peak_kb / 1024.0}
        for line in b"".join(err_chunks).decode(errors="replace").splitlines():
            # "attempt 0: 8 rank(s) spawned in 31.0 ms (34.2 ms after gculaunch started)"
            if "attempt 0: " in line and "after gculaunch started" in line:
                m["spawned"] = float(line.rsplit("(", 1)[1].split()[0]) / 1e3
        names = os.listdir(out)
        if mode == "ok":
            starts = [lib.read_time(os.path.join(out, n)) for n in names
                      if n.startswith("start.0.")]
            ends = [lib.read_time(os.path.join(out, n)) for n in names if n.startswith("end.")]
            if len(starts) == NPROC and len(ends) == NPROC and proc.returncode == 0:
                m["start"] = max(starts) - t_launch
                m["exit"] = t_exit - max(ends)
        elif mode == "fail" and "fail" in names:
            m["failure"] = t_exit - lib.read_time(os.path.join(out, "fail"))
            m["gone"] = t_gone - lib.read_time(os.path.join(out, "fail"))
        elif mode == "restart" and "fail" in names:
            again = [lib.read_time(os.path.join(out, n)) for n in names if n.startswith("start.1.")]
            if len(again) == NPROC and proc.returncode == 0:
                m["restart"] = max(again) - lib.read_time(os.path.join(out, "fail"))
        return m
    finally:
        # Only what this run started; gculaunch's guardian may still be
        # removing its scratch directory for a moment, so wait a little first.
        deadline = time.time() + 3
        while lib.tagged_pids(tag) and time.time() < deadline:
            time.sleep(0.01)
        lib.kill_pids(lib.tagged_pids(tag))
        subprocess.run(["rm", "-rf", out])


class CpuSampler(threading.Thread):
    """gculaunch's own CPU seconds (utime + stime) and peak RSS, every 50 ms until it exits:
    the last sample before the exit stands for the run (the ranks are other processes)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.cpu_s, self.peak_kb, self.stop = pid, 0.0, 0, False
        self.tick = os.sysconf("SC_CLK_TCK")

    def run(self):
        while not self.stop:
            try:
                with open("/proc/%d/stat" % self.pid, "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if fields[0] in (b"Z", b"X"):
                    return
                self.cpu_s = (int(fields[11]) + int(fields[12])) / self.tick
                self.peak_kb = max(self.peak_kb, lib.vm_hwm_kb(self.pid) or 0)
            except (OSError, IndexError, ValueError):
                return
            time.sleep(0.05)


def metrics_run(script, scraped):
    """One bounded gculaunch run of NPROC ranks sleeping METRICS_SECONDS; with `scraped`,
    --metrics-port and a GET /metrics every second.  Returns cpu (ms), rss (MB), scrape
    latencies (ms) and the number of scrapes."""
    out = tempfile.mkdtemp(prefix="gculaunch-bench-")
    tag = lib.new_tag()
    tmp = os.path.join(out, "tmp")
    os.mkdir(tmp)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "GCULAUNCH_BENCH_TAG": tag, "OMP_NUM_THREADS": "1",
           "TMPDIR": tmp}
    port = lib.free_port()
    cmd = [GCULAUNCH, "--standalone", "--nproc-per-node", str(NPROC), "--device", "cpu",
           "--python", PYTHON]
    if scraped:
        cmd += ["--metrics-port", str(port)]
    cmd += [script, "hold%g" % METRICS_SECONDS, out]
    latencies = []
    try:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        sampler = CpuSampler(proc.pid)
        sampler.start()
        watchdog = threading.Timer(METRICS_SECONDS + RUN_TIMEOUT, proc.kill)
        watchdog.start()
        deadline = time.time() + METRICS_SECONDS + RUN_TIMEOUT
        while scraped and proc.poll() is None and time.time() < deadline:
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                            timeout=5) as r:
                    r.read()
                latencies.append((time.perf_counter() - t0) * 1e3)
            except OSError:
                pass  # not listening yet, or the job just ended
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
        proc.wait()
        watchdog.cancel()
        sampler.stop = True
        sampler.join()
        return {"cpu": sampler.cpu_s * 1e3, "rss": sampler.peak_kb / 1024.0,
                "latency": latencies, "scrapes": len(latencies), "code": proc.returncode}
    finally:
        lib.kill_pids(lib.tagged_pids(tag))
        subprocess.run(["rm", "-rf", out])


def metrics_cost():
    """The --metrics-port rows: gculaunch's CPU and RSS without metrics and with a scrape
    every second, interleaved runs, medians."""
    workdir = tempfile.mkdtemp(prefix="gculaunch-bench-")
    script = os.path.join(workdir, "worker.py")
    with open(script, "w") as f:
        f.write(lib.WORKER)
    runs = {False: [], True: []}
    try:
        for rep in range(METRICS_REPS):
            for scraped in (False, True):
                runs[scraped].append(metrics_run(script, scraped))
            print("bench: metrics repetition %d/%d done" % (rep + 1, METRICS_REPS),
                  file=sys.stderr, flush=True)
    finally:
        subprocess.run(["rm", "-rf", workdir])

    def med(scraped, key):
        return lib.median([r[key] for r in runs[scraped]])

    print()
    print("--metrics-port cost (gculaunch alone, %d ranks sleeping %g s, %d interleaved runs, "
          "medians; exit codes %s)" % (NPROC, METRICS_SECONDS, METRICS_REPS,
                                       sorted({r["code"] for v in runs.values() for r in v})))
    header = "%-44s %14s %24s" % ("metric", "metrics off", "on, scraped every 1 s")
    print(header)
    print("-" * len(header))
    print("%-44s %14.1f %24.1f" % ("gculaunch CPU time over the run (ms)", med(False, "cpu"),
                                   med(True, "cpu")))
    print("%-44s %14.1f %24.1f" % ("gculaunch CPU per second of the run (ms/s)",
                                   med(False, "cpu") / METRICS_SECONDS,
                                   med(True, "cpu") / METRICS_SECONDS))
    print("%-44s %14.1f %24.1f" % ("gculaunch peak RSS (MB)", med(False, "rss"),
                                   med(True, "rss")))
    lat = sorted(x for r in runs[True] for x in r["latency"])
    if lat:
        print("%-44s %14s %24s" % ("scrape latency, median / max (ms)", "-",
                                   "%.2f / %.2f" % (lib.median(lat), lat[-1])))
    print("%-44s %14s %24d" % ("scrapes per run (median)", "-", med(True, "scrapes")))


def root_entry(n=10):
    """Medians of in_root.sh ROOT2 /usr/bin/true and of /usr/bin/true (seconds), n of
    each, interleaved, from the same directory and with the same binds as the torchrun
    2.6 runs."""
    times = {"direct": [], "in_root": []}
    for _ in range(n):
        for name, cmd in (("direct", ["/usr/bin/true"]),
                          ("in_root", [lib.IN_ROOT, ROOT2, "/usr/bin/true"])):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, timeout=RUN_TIMEOUT,
                           env=dict(os.environ, IN_ROOT_BINDS=lib.BENCH))
            times[name].append(time.perf_counter() - t0)
    return lib.median(times["in_root"]), lib.median(times["direct"])


def measure():
    if METRICS_ONLY:
        metrics_cost()
        return
    launchers = ["gculaunch", "torchrun", "torchrun-0.1", "torchrun-2.6"]
    modes = ["ok", "fail", "restart"]
    directs = ["direct", "direct-path"] if PATH_INTERPRETER else ["direct"]
    results = {name: {} for name in launchers + directs + ["gculaunch-old"]}
    workdir = tempfile.mkdtemp(prefix="gculaunch-bench-")
    script = os.path.join(workdir, "worker.py")
    with open(script, "w") as f:
        f.write(lib.WORKER)
    began = time.time()
    try:
        for rep in range(REPS):
            extra = ["gculaunch-old"] if OLD_GCULAUNCH else []
            for name in directs + launchers + extra:
                for mode in (["ok"] if name in directs else
                             ["fail"] if name == "gculaunch-old" else modes):
                    if time.time() - began > TOTAL_BUDGET:
                        raise TimeoutError("time budget used up")
                    for key, value in run(name, mode, script).items():
                        results[name].setdefault(key, []).append(value)
            print("bench: repetition %d/%d done (%.0f s)" % (rep + 1, REPS, time.time() - began),
                  file=sys.stderr, flush=True)
    except TimeoutError as e:
        print("bench: %s; reporting what was measured" % e, file=sys.stderr)
    finally:
        subprocess.run(["rm", "-rf", workdir])
    entry, plain = root_entry()

    def med(name, key):
        m = lib.median(results[name].get(key, []))
        return float("nan") if m is None else m

    base = med("direct", "start")
    base_exit = med("direct", "exit")
    # Each launcher's overheads count from the Pythons its own ranks run: with --path-python
    # gculaunch's run the interpreter found there, torchrun's Debian's (its sys.executable).
    floor = {name: (base, base_exit) for name in launchers}
    print("gculaunch vs torchrun 1.13 and 2.6 (%d ranks of trivial Python workers, %d "
          "interleaved repetitions, medians)" % (NPROC, REPS))
    print("%d Pythons (%s) started directly by this script: all started after %.1f ms; last "
          "exit -> all reaped %.1f ms" % (NPROC, PYTHON, base * 1e3, base_exit * 1e3))
    if PATH_INTERPRETER:
        floor["gculaunch"] = (med("direct-path", "start"), med("direct-path", "exit"))
        print("%d Pythons (%s, which python3 on %s runs; gculaunch's ranks run it) started "
              "directly: all started after %.1f ms; last exit -> all reaped %.1f ms; gculaunch's "
              "overheads count from these" % (NPROC, PATH_INTERPRETER, PATH_PYTHON,
                                              floor["gculaunch"][0] * 1e3,
                                              floor["gculaunch"][1] * 1e3))
    print()
    header = "%-34s %10s %10s %14s %13s %7s %11s %10s" % (
        "metric", "gculaunch", "torchrun", "torchrun 0.1s", "torchrun 2.6", "ratio",
        "ratio 0.1s", "ratio 2.6")
    # torchrun, torchrun 0.1s: 1.13 with --monitor_interval 5 (its default) and 0.1;
    # torchrun 2.6: its defaults (--monitor-interval 0.1)
    print(header)
    print("-" * len(header))
    # minus: 0 the direct start, 1 the direct exit (floor), None nothing
    rows = [
        ("launch -> all ranks started (ms)", "start", 1e3, None),
        ("  start overhead over direct (ms)", "start", 1e3, 0),
        ("last rank exit -> launcher exit (ms)", "exit", 1e3, None),
        ("  exit overhead over direct (ms)", "exit", 1e3, 1),
        ("failure -> launcher exit (ms)", "failure", 1e3, None),
        ("failure -> all its processes gone (ms)", "gone", 1e3, None),
        ("restart latency (ms)", "restart", 1e3, None),
        ("  restart minus direct start (ms)", "restart", 1e3, 0),
        ("peak launcher RSS (MB)", "rss", 1.0, None),
    ]
    for label, key, scale, minus in rows:
        vals = []
        for name in launchers:
            v = med(name, key)
            if minus is not None:
                v = max(v - floor[name][minus], 1e-4)
            vals.append(v * scale)
        g, t, t1, t2 = vals
        print("%-34s %10.1f %10.1f %14.1f %13.1f %6.1fx %10.1fx %9.1fx"
              % (label, g, t, t1, t2, t / g, t1 / g, t2 / g))
    print("%-34s %12.1f   (gculaunch's own debug log, attempt 0 of every run; target < 50 ms)"
          % ("gculaunch exec -> all spawned (ms)", med("gculaunch", "spawned") * 1e3))
    counts = {n: {k: len(v) for k, v in results[n].items()} for n in launchers}
    print()
    print("samples per metric: %s" % counts)
    faster = min(med("torchrun", "start"), med("torchrun-0.1", "start")) - base
    print("start overhead, faster torchrun 1.13 / gculaunch: %.0fx (target >= 30x)"
          % (faster / max(med("gculaunch", "start") - floor["gculaunch"][0], 1e-4)))
    print("torchrun 2.6 column: entering its root (in_root.sh ROOT /usr/bin/true) takes "
          "%.1f ms against %.1f ms for /usr/bin/true alone: %.1f ms of its start times"
          % (entry * 1e3, plain * 1e3, (entry - plain) * 1e3))
    print("gculaunch peak RSS: %.1f MB (target <= 8 MB); failure -> exit: %.1f ms "
          "(target <= 50 ms)" % (med("gculaunch", "rss"), med("gculaunch", "failure") * 1e3))
    # The guardian is reaped before gculaunch exits (docs/runtime.md): exit and "gone" agree.
    old = ("; old gculaunch (guardian left running) %.1f / %.1f ms"
           % (med("gculaunch-old", "failure") * 1e3, med("gculaunch-old", "gone") * 1e3)
           if OLD_GCULAUNCH else "; set --old (BENCH_OLD_GCULAUNCH) to an older build to compare")
    print("exit lag, failure -> launcher exit / -> all its processes gone: gculaunch (guardian "
          "reaped) %.1f / %.1f ms; torchrun 1.13 %.1f / %.1f ms%s"
          % (med("gculaunch", "failure") * 1e3, med("gculaunch", "gone") * 1e3,
             med("torchrun-0.1", "failure") * 1e3, med("torchrun-0.1", "gone") * 1e3, old))
    metrics_cost()


def main():
    global GCULAUNCH, OLD_GCULAUNCH, ROOT2, REPS, NPROC, METRICS_ONLY, METRICS_SECONDS
    global METRICS_REPS, TORCHRUN2, TORCHRUN2_ENV, PATH_PYTHON, PATH_INTERPRETER
    ap = argparse.ArgumentParser(prog=PROG, description="gculaunch against torchrun 1.13 and "
                                 "2.6, then the cost of --metrics-port.")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 5),
                    help="repetitions (BENCH_REPS, 5)")
    ap.add_argument("--nproc", type=int, default=lib.env_int("BENCH_NPROC", 8),
                    help="ranks (BENCH_NPROC, 8)")
    ap.add_argument("--old", default=os.environ.get("BENCH_OLD_GCULAUNCH", ""),
                    help="a gculaunch built from an earlier commit, e.g. 2af4c24, whose guardian "
                    "was left running at exit: its failure runs are measured too and printed on "
                    "the \"exit lag\" line (BENCH_OLD_GCULAUNCH)")
    ap.add_argument("--metrics-only", action="store_true",
                    default=os.environ.get("BENCH_METRICS_ONLY", "0") == "1",
                    help="only the --metrics-port rows: no torchrun, no torch 2.6 root "
                    "(BENCH_METRICS_ONLY=1)")
    ap.add_argument("--metrics-seconds", type=float,
                    default=lib.env_float("BENCH_METRICS_SECONDS", 20),
                    help="how long the ranks of a metrics run sleep (BENCH_METRICS_SECONDS, 20)")
    ap.add_argument("--metrics-reps", type=int, default=lib.env_int("BENCH_METRICS_REPS", 3),
                    help="metrics runs each way (BENCH_METRICS_REPS, 3)")
    ap.add_argument("--path-python", default=os.environ.get("BENCH_PATH_PYTHON", ""),
                    help="a directory put first on PATH; gculaunch then gets no --python and "
                    "runs python3 from there (BENCH_PATH_PYTHON; e.g. $HOME/.pyenv/shims)")
    args = ap.parse_args()
    if args.path_python and not os.access(os.path.join(args.path_python, "python3"), os.X_OK):
        lib.die(PROG, "--path-python '%s' holds no executable python3 (fix: name a directory "
                "such as $HOME/.pyenv/shims, or leave it out)" % args.path_python)
    PATH_PYTHON = args.path_python
    if PATH_PYTHON:
        path = PATH_PYTHON + ":/usr/local/bin:/usr/bin:/bin"
        found = subprocess.run(["python3", "-c", "import sys; print(sys.executable)"],
                               env=dict(os.environ, PATH=path), capture_output=True, text=True,
                               timeout=60)
        if found.returncode != 0 or not found.stdout.strip():
            lib.die(PROG, "python3 in --path-python '%s' does not run (fix: name a directory "
                    "whose python3 works)" % PATH_PYTHON)
        PATH_INTERPRETER = found.stdout.strip()
    if os.environ.get("BENCH_METRICS_ONLY", "0") not in ("0", "1"):
        lib.die(PROG, "BENCH_METRICS_ONLY '%s' is not 0 or 1 (fix: set it to 1 or unset it)"
                % os.environ["BENCH_METRICS_ONLY"])
    GCULAUNCH = lib.require_gculaunch(PROG, args.gculaunch)
    if args.old and not os.access(args.old, os.X_OK):
        lib.die(PROG, "--old '%s' is not executable (fix: give the path of an older gculaunch "
                "build, or leave it out)" % args.old)
    OLD_GCULAUNCH, REPS, NPROC = args.old, args.reps, args.nproc
    METRICS_ONLY, METRICS_SECONDS = args.metrics_only, args.metrics_seconds
    METRICS_REPS = args.metrics_reps
    if not METRICS_ONLY:
        ROOT2 = lib.make_torch2_root()
        if ROOT2 is None:
            lib.die(PROG, "no torch 2.6 root (see the error above)")
        TORCHRUN2, TORCHRUN2_ENV = lib.torchrun26_command(ROOT2)
    measure()


if __name__ == "__main__":
    main()
