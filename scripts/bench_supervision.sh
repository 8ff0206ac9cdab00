#!/usr/bin/env bash
# bench_supervision.sh - what the safer supervision (issue 24) costs, in one interleaved run:
# this gculaunch, optionally an older build (BENCH_OLD_GCULAUNCH, e.g. one built from the
# commit before), and torchrun 1.13 (Debian's torch, scripts/torchrun113.py) with
# --monitor_interval 0.1.  A benchmark, not a test: it prints numbers and asserts nothing.
#
#   scripts/bench_supervision.sh            (BENCH_REPS=5 repetitions, 8 ranks)
#
# Ranks are trivial Pythons (no torch import) that record timestamps.  Per repetition and
# launcher, in turn:
#   start     launch -> every rank has run its first line
#   failure   a rank exits 1 (the others sleep) -> launcher exit
#   gone      the same failure -> no process the launcher started is alive (its guardian
#             included)
#   kill9     SIGKILL of the launcher while 8 ranks each have a grandchild -> no rank,
#             grandchild or guardian alive (torchrun: its workers' grandchildren are never
#             killed, so the row shows how many were left)
#   storm     a rank that fails at once under --max-restarts 100000, for BENCH_STORM_SECONDS
#             (default 10): the attempts started (gculaunch backs off quick failures;
#             --restart-backoff)
# Medians are printed with ratios against this gculaunch.
#
# Environment: GCULAUNCH_BIN (default build/launcher/gculaunch), BENCH_OLD_GCULAUNCH,
# BENCH_REPS, BENCH_NPROC, BENCH_STORM_SECONDS.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
top=$(cd -- "$here/.." && pwd)
gculaunch=${GCULAUNCH_BIN:-$top/build/launcher/gculaunch}
[ -x "$gculaunch" ] || { echo "bench: build gculaunch first (scripts/build.sh) or set GCULAUNCH_BIN" >&2; exit 2; }
old=${BENCH_OLD_GCULAUNCH:-}
[ -z "$old" ] || [ -x "$old" ] ||
  { echo "bench: error: BENCH_OLD_GCULAUNCH '$old' is not executable (fix: give the path of an older gculaunch build, or unset it)" >&2; exit 2; }

exec /usr/bin/python3 - "$gculaunch" "$old" "$here/torchrun113.py" "${BENCH_REPS:-5}" \
  "${BENCH_NPROC:-8}" "${BENCH_STORM_SECONDS:-10}" <<'PY'
import os, signal, socket, statistics, subprocess, sys, tempfile, time, uuid

GCULAUNCH, OLD, TORCHRUN = sys.argv[1], sys.argv[2], sys.argv[3]
REPS, NPROC, STORM = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
PYTHON = "/usr/bin/python3"

WORKER = r'''
import os, subprocess, sys, time
t0 = time.time()
mode, out = sys.argv[1], sys.argv[2]
rank, attempt = os.environ["RANK"], os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
def put(name, t):
    with open(os.path.join(out, name), "w") as f:
        f.write(repr(t))
put("start.%s.%s" % (attempt, rank), t0)
if mode == "storm":
    os._exit(1)
if mode == "grandchild":
    subprocess.Popen(["sleep", "120"])
    put("gc.%s" % rank, time.time())
if mode == "fail" and rank == "1":
    deadline = time.time() + 60
    while time.time() < deadline and sum(1 for n in os.listdir(out) if n.startswith("start.0.")) < int(os.environ["WORLD_SIZE"]):
        time.sleep(0.005)
    put("fail", time.time())
    os._exit(1)
time.sleep(120)
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tagged_alive(tag):
    needle = ("GCULAUNCH_BENCH_TAG=" + tag).encode()
    alive = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open("/proc/%s/stat" % name, "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                    alive.append(int(name))
        except OSError:
            pass
    return alive


def guardian_alive(launcher_pid):
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    head, _, rest = f.read().rpartition(b")")
                fields = rest.split()
                if head.endswith(b"(gculaunch-guard") and fields[0] not in (b"Z", b"X") \
                        and int(fields[1]) in (launcher_pid, 1):
                    return True
            except (OSError, ValueError, IndexError):
                pass
    return False


def command(launcher, mode, out, script):
    if launcher.startswith("gculaunch"):
        binary = GCULAUNCH if launcher == "gculaunch" else OLD
        cmd = [binary, "--standalone", "--nproc-per-node", str(NPROC), "--python", PYTHON]
        if mode == "storm":
            cmd += ["--max-restarts", "100000"]
    else:
        cmd = [PYTHON, TORCHRUN, "--nnodes", "1", "--nproc_per_node", str(NPROC),
               "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % free_port(),
               "--rdzv_id", uuid.uuid4().hex, "--monitor_interval", "0.1"]
        if mode == "storm":
            cmd += ["--max_restarts", "100000"]
    return cmd + [script, mode, out]


def one(launcher, mode, script):
    tag = uuid.uuid4().hex
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
                while (tagged_alive(tag) or guardian_alive(proc.pid)) and time.time() < end:
                    time.sleep(0.001)
                left = len(tagged_alive(tag))
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
                while (tagged_alive(tag) or guardian_alive(proc.pid)) and time.time() < end:
                    time.sleep(0.001)
                result["gone"] = (time.time() - t_fail) * 1000
            return result
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the session this script created
                proc.wait()
            for pid in tagged_alive(tag):
                try:
                    os.kill(pid, signal.SIGKILL)  # what the run left (torchrun's grandchildren)
                except OSError:
                    pass


def main():
    launchers = ["gculaunch"] + (["gculaunch-old"] if OLD else []) + ["torchrun-0.1"]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(WORKER)
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
            got = [v for v in rows.get((key, launcher), []) if v == v]
            values.append(statistics.median(got) if got else None)
        line = "%-34s" % names[key]
        line += "".join("%16s" % ("-" if v is None else "%.1f" % v) for v in values)
        base, last = values[0], values[-1]
        if key not in ("kill9_left", "storm") and base and last:
            line += "%13.1fx" % (last / base)
        print(line)
    print("ratio: torchrun-0.1 / gculaunch")


main()
PY
