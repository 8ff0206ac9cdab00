#!/usr/bin/env bash
# bench_vs_torchrun.sh - gculaunch against torchrun, in one interleaved run:
# Debian's torch 1.13 (bookworm, on this machine) through scripts/torchrun113.py,
# with its default --monitor_interval (5 s) and with 0.1 s; and torch 2.6
# (trixie's python3-torch) from the root of scripts/make_torch2_root.sh, run
# through scripts/in_root.sh and scripts/torchrun26.py, with its own defaults
# (--monitor-interval 0.1 s).  A benchmark, not a test: it prints numbers and
# asserts nothing.
#
#   scripts/bench_vs_torchrun.sh            (BENCH_REPS=5 repetitions, 8 ranks)
#
# The torch 2.6 column pays for entering its root: in_root.sh starts a few
# processes and binds a few directories before torchrun's python runs.  The
# script measures that entry (in_root.sh ROOT /usr/bin/true against
# /usr/bin/true) and prints it below the table: about 75 ms (median; 60 ms at
# best, more under load) on the 2-core VM where this was written, nearly all
# of it the start of its 6 short processes.  It is inside the "start" numbers
# of that column only: the ranks that torchrun 2.6 starts are already inside
# the root.  Its ranks run the root's
# Python 3.13, the others the host's 3.11.  Debian's torch 2.6 has no libuv,
# so torchrun 2.6 runs with USE_LIBUV=0 and TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
# (see scripts/torchrun26.py; the trivial workers make no store, but these
# are the settings under which real workers run).  The root is made first if
# missing (minutes, once; needs root).
#
# Workers are 8 trivial Python ranks (no torch import) that record
# timestamps.  Per repetition and launcher, in turn:
#   start    launch -> every rank has run its first line (minus the same for
#            8 Pythons started directly by this script: "overhead")
#   exit     last rank's exit -> launcher exit (all ranks exit 0; minus the
#            same for the 8 direct Pythons: "overhead")
#   failure  a rank exits 1 (the others sleep) -> launcher exit
#   gone     the same failure -> no process the launcher started is alive (its guardian
#            included: gculaunch reaps it before it exits)
#   restart  a rank exits 1 in attempt 0 -> every rank of attempt 1 started
#            (--max-restarts 1)
#   rss      the launcher process's peak resident set (VmHWM), sampled
#   spawned  gculaunch only: its exec -> every rank exec'd, from its debug log
# and prints medians and ratios (torchrun / gculaunch).
#
# Then the cost of --metrics-port (docs/operations.md), gculaunch alone: the same ranks
# sleeping BENCH_METRICS_SECONDS (default 20), once without metrics and once with
# --metrics-port and GET /metrics every second, interleaved, BENCH_METRICS_REPS times
# (default 3).  Per run: gculaunch's own CPU time (utime + stime of /proc/<pid>/stat, sampled
# every 50 ms up to its exit; the ranks are not counted), its peak RSS (VmHWM), and the
# scrapes' latency.  BENCH_METRICS_ONLY=1 runs only this part (no torchrun, no torch 2.6
# root needed).
#
# Environment: GCULAUNCH_BIN (default build/launcher/gculaunch), BENCH_REPS,
# BENCH_NPROC, GCULAUNCH_CACHE_DIR (where the torch 2.6 root is), BENCH_OLD_GCULAUNCH
# (optional: a gculaunch built from an earlier commit, e.g. 2af4c24, whose guardian was left
# running at exit; its failure runs are then measured too and printed on the "exit lag" line).
# BENCH_METRICS_SECONDS, BENCH_METRICS_REPS, BENCH_METRICS_ONLY: the metrics rows (above).
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
gculaunch=${GCULAUNCH_BIN:-$top/build/launcher/gculaunch}
torchrun=$here/torchrun113.py
in_root=$here/in_root.sh
[ -x "$gculaunch" ] || { echo "bench: build gculaunch first (scripts/build.sh) or set GCULAUNCH_BIN" >&2; exit 2; }
metrics_only=${BENCH_METRICS_ONLY:-0}
case $metrics_only in
  0|1) ;;
  *) echo "bench: error: BENCH_METRICS_ONLY '$metrics_only' is not 0 or 1 (fix: set it to 1 or unset it)" >&2; exit 2 ;;
esac
root2=""
if [ "$metrics_only" = 0 ]; then
  root2=$("$here/make_torch2_root.sh" | tail -n 1) ||
    { echo "bench: no torch 2.6 root (see the error above)" >&2; exit 2; }
fi

old_gculaunch=${BENCH_OLD_GCULAUNCH:-}
[ -z "$old_gculaunch" ] || [ -x "$old_gculaunch" ] ||
  { echo "bench: error: BENCH_OLD_GCULAUNCH '$old_gculaunch' is not executable (fix: give the path of an older gculaunch build, or unset it)" >&2; exit 2; }

exec /usr/bin/python3 - "$gculaunch" "$torchrun" "${BENCH_REPS:-5}" "${BENCH_NPROC:-8}" \
  "$in_root" "$root2" "$old_gculaunch" "$metrics_only" "${BENCH_METRICS_SECONDS:-20}" \
  "${BENCH_METRICS_REPS:-3}" <<'PY'
import os, signal, socket, statistics, subprocess, sys, tempfile, threading, time, uuid
import urllib.request

GCULAUNCH, TORCHRUN, REPS, NPROC = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
IN_ROOT, ROOT2 = sys.argv[5], sys.argv[6]
OLD_GCULAUNCH = sys.argv[7]  # empty: not measured
METRICS_ONLY = sys.argv[8] == "1"
METRICS_SECONDS, METRICS_REPS = float(sys.argv[9]), int(sys.argv[10])
PYTHON = "/usr/bin/python3"
# torch 2.6's torchrun: the root's python3 entered through in_root.sh, which also shows
# this directory (with torchrun26.py) inside the root
SCRIPTS = os.path.dirname(IN_ROOT)
TORCHRUN2 = [IN_ROOT, ROOT2, "/usr/bin/python3", os.path.join(SCRIPTS, "torchrun26.py")]
TORCHRUN2_ENV = {"IN_ROOT_BINDS": SCRIPTS, "USE_LIBUV": "0",
                 "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
RUN_TIMEOUT = 120        # seconds per launch
TOTAL_BUDGET = 30 * 60   # the whole benchmark

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
    while time.time() < deadline:
        if sum(1 for n in os.listdir(out) if n.startswith("start.%s." % attempt)) >= int(os.environ["WORLD_SIZE"]):
            return
        time.sleep(0.005)
if mode == "ok":
    put("end.%s" % rank, time.time())
    os._exit(0)
if attempt == "0" and rank == "1" and mode in ("fail", "restart"):
    wait_all_started()
    put("fail", time.time())
    os._exit(1)
if mode == "restart" and attempt != "0":
    os._exit(0)
if mode.startswith("hold"):  # "hold<seconds>": the metrics runs
    time.sleep(float(mode[4:]))
    os._exit(0)
time.sleep(120)
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tagged_pids(tag):
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


def tagged_alive(tag):
    """Whether a non-zombie process carries the tag."""
    for pid in tagged_pids(tag):
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                    return True
        except OSError:
            pass
    return False


def all_gone_at(tag, bound=5.0):
    """The time at which no process carrying the tag was alive (bounded)."""
    deadline = time.time() + bound
    while True:
        t = time.time()
        if not tagged_alive(tag) or t > deadline:
            return t
        time.sleep(0.001)


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.stop = pid, 0, False

    def run(self):
        while not self.stop:
            try:
                with open("/proc/%d/status" % self.pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except OSError:
                return
            time.sleep(0.002)


def command(launcher, mode, out, script):
    if launcher in ("gculaunch", "gculaunch-old"):
        cmd = [GCULAUNCH if launcher == "gculaunch" else OLD_GCULAUNCH, "--standalone", "--nproc-per-node", str(NPROC), "--device", "cpu",
               "--python", PYTHON]
        if mode == "restart":
            cmd += ["--max-restarts", "1"]
    else:
        base = TORCHRUN2 if launcher == "torchrun-2.6" else [PYTHON, TORCHRUN]
        cmd = base + ["--nnodes", "1", "--nproc_per_node", str(NPROC),
                      "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % free_port(),
                      "--rdzv_id", uuid.uuid4().hex]
        if launcher == "torchrun-0.1":
            cmd += ["--monitor_interval", "0.1"]
        if mode == "restart":
            cmd += ["--max_restarts", "1"]
    return cmd + [script, mode, out]


def read(path):
    with open(path) as f:
        return float(f.read())


def run(launcher, mode, script):
    """One launch; returns a dict of metrics in seconds (rss in MB)."""
    out = tempfile.mkdtemp(prefix="gculaunch-bench-")
    tag = uuid.uuid4().hex
    tmp = os.path.join(out, "tmp")  # the launchers' temporary files go away with `out`
    os.mkdir(tmp)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "GCULAUNCH_BENCH_TAG": tag, "OMP_NUM_THREADS": "1",
           "TMPDIR": tmp}
    try:
        if launcher == "direct":
            t_launch = time.time()
            procs = []
            for r in range(NPROC):
                e = dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(NPROC))
                procs.append(subprocess.Popen([PYTHON, "-u", script, "ok", out], env=e,
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
            starts = [read(os.path.join(out, "start.0.%d" % r)) for r in range(NPROC)]
            ends = [read(os.path.join(out, "end.%d" % r)) for r in range(NPROC)]
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
            starts = [read(os.path.join(out, n)) for n in names if n.startswith("start.0.")]
            ends = [read(os.path.join(out, n)) for n in names if n.startswith("end.")]
            if len(starts) == NPROC and len(ends) == NPROC and proc.returncode == 0:
                m["start"] = max(starts) - t_launch
                m["exit"] = t_exit - max(ends)
        elif mode == "fail" and "fail" in names:
            m["failure"] = t_exit - read(os.path.join(out, "fail"))
            m["gone"] = t_gone - read(os.path.join(out, "fail"))
        elif mode == "restart" and "fail" in names:
            again = [read(os.path.join(out, n)) for n in names if n.startswith("start.1.")]
            if len(again) == NPROC and proc.returncode == 0:
                m["restart"] = max(again) - read(os.path.join(out, "fail"))
        return m
    finally:
        # Only what this run started; gculaunch's guardian may still be
        # removing its scratch directory for a moment, so wait a little first.
        deadline = time.time() + 3
        while tagged_pids(tag) and time.time() < deadline:
            time.sleep(0.01)
        for pid in tagged_pids(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
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
                with open("/proc/%d/status" % self.pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except (OSError, IndexError, ValueError):
                return
            time.sleep(0.05)


def metrics_run(script, scraped):
    """One bounded gculaunch run of NPROC ranks sleeping METRICS_SECONDS; with `scraped`,
    --metrics-port and a GET /metrics every second.  Returns cpu (ms), rss (MB), scrape
    latencies (ms) and the number of scrapes."""
    out = tempfile.mkdtemp(prefix="gculaunch-bench-")
    tag = uuid.uuid4().hex
    tmp = os.path.join(out, "tmp")
    os.mkdir(tmp)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "GCULAUNCH_BENCH_TAG": tag, "OMP_NUM_THREADS": "1",
           "TMPDIR": tmp}
    port = free_port()
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
        for pid in tagged_pids(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        subprocess.run(["rm", "-rf", out])


def metrics_cost():
    """The --metrics-port rows: gculaunch's CPU and RSS without metrics and with a scrape
    every second, interleaved runs, medians."""
    workdir = tempfile.mkdtemp(prefix="gculaunch-bench-")
    script = os.path.join(workdir, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
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
        return statistics.median(r[key] for r in runs[scraped])

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
                                   "%.2f / %.2f" % (statistics.median(lat), lat[-1])))
    print("%-44s %14s %24d" % ("scrapes per run (median)", "-", med(True, "scrapes")))


def root_entry(n=10):
    """Medians of in_root.sh ROOT2 /usr/bin/true and of /usr/bin/true (seconds), n of
    each, interleaved, from the same directory and with the same binds as the torchrun
    2.6 runs."""
    times = {"direct": [], "in_root": []}
    for _ in range(n):
        for name, cmd in (("direct", ["/usr/bin/true"]),
                          ("in_root", [IN_ROOT, ROOT2, "/usr/bin/true"])):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, timeout=RUN_TIMEOUT,
                           env=dict(os.environ, IN_ROOT_BINDS=SCRIPTS))
            times[name].append(time.perf_counter() - t0)
    return statistics.median(times["in_root"]), statistics.median(times["direct"])


def main():
    if METRICS_ONLY:
        metrics_cost()
        return
    launchers = ["gculaunch", "torchrun", "torchrun-0.1", "torchrun-2.6"]
    modes = ["ok", "fail", "restart"]
    results = {name: {} for name in launchers + ["direct", "gculaunch-old"]}
    workdir = tempfile.mkdtemp(prefix="gculaunch-bench-")
    script = os.path.join(workdir, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    began = time.time()
    try:
        for rep in range(REPS):
            extra = ["gculaunch-old"] if OLD_GCULAUNCH else []
            for name in ["direct"] + launchers + extra:
                for mode in (["ok"] if name == "direct" else
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
        values = results[name].get(key, [])
        return statistics.median(values) if values else float("nan")

    base = med("direct", "start")
    base_exit = med("direct", "exit")
    print("gculaunch vs torchrun 1.13 and 2.6 (%d ranks of trivial Python workers, %d "
          "interleaved repetitions, medians)" % (NPROC, REPS))
    print("%d Pythons started directly by this script: all started after %.1f ms; last exit -> "
          "all reaped %.1f ms" % (NPROC, base * 1e3, base_exit * 1e3))
    print()
    header = "%-34s %10s %10s %14s %13s %7s %11s %10s" % (
        "metric", "gculaunch", "torchrun", "torchrun 0.1s", "torchrun 2.6", "ratio",
        "ratio 0.1s", "ratio 2.6")
    # torchrun, torchrun 0.1s: 1.13 with --monitor_interval 5 (its default) and 0.1;
    # torchrun 2.6: its defaults (--monitor-interval 0.1)
    print(header)
    print("-" * len(header))
    rows = [
        ("launch -> all ranks started (ms)", "start", 1e3, None),
        ("  start overhead over direct (ms)", "start", 1e3, base),
        ("last rank exit -> launcher exit (ms)", "exit", 1e3, None),
        ("  exit overhead over direct (ms)", "exit", 1e3, base_exit),
        ("failure -> launcher exit (ms)", "failure", 1e3, None),
        ("failure -> all its processes gone (ms)", "gone", 1e3, None),
        ("restart latency (ms)", "restart", 1e3, None),
        ("  restart minus direct start (ms)", "restart", 1e3, base),
        ("peak launcher RSS (MB)", "rss", 1.0, None),
    ]
    for label, key, scale, minus in rows:
        vals = []
        for name in launchers:
            v = med(name, key)
            if minus is not None:
                v = max(v - minus, 1e-4)
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
          % (faster / max(med("gculaunch", "start") - base, 1e-4)))
    print("torchrun 2.6 column: entering its root (in_root.sh ROOT /usr/bin/true) takes "
          "%.1f ms against %.1f ms for /usr/bin/true alone: %.1f ms of its start times"
          % (entry * 1e3, plain * 1e3, (entry - plain) * 1e3))
    print("gculaunch peak RSS: %.1f MB (target <= 8 MB); failure -> exit: %.1f ms "
          "(target <= 50 ms)" % (med("gculaunch", "rss"), med("gculaunch", "failure") * 1e3))
    # The guardian is reaped before gculaunch exits (docs/runtime.md): exit and "gone" agree.
    old = ("; old gculaunch (guardian left running) %.1f / %.1f ms"
           % (med("gculaunch-old", "failure") * 1e3, med("gculaunch-old", "gone") * 1e3)
           if OLD_GCULAUNCH else "; set BENCH_OLD_GCULAUNCH to an older build to compare")
    print("exit lag, failure -> launcher exit / -> all its processes gone: gculaunch (guardian "
          "reaped) %.1f / %.1f ms; torchrun 1.13 %.1f / %.1f ms%s"
          % (med("gculaunch", "failure") * 1e3, med("gculaunch", "gone") * 1e3,
             med("torchrun-0.1", "failure") * 1e3, med("torchrun-0.1", "gone") * 1e3, old))
    metrics_cost()


main()
PY
