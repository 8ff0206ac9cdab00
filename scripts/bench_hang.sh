#!/usr/bin/env bash
# bench_hang.sh - what --stack-dumps and --hang-timeout cost and how fast a hang is seen.
# A benchmark, not a test: it prints numbers and asserts nothing.
#
#   scripts/bench_hang.sh [GCULAUNCH]     (default build/launcher/gculaunch; BENCH_REPS=10)
#
#   hook cost     one rank running an empty Python script (no torch), the whole launch timed
#                 from start to exit, with and without --stack-dumps (the hook's
#                 sitecustomize: faulthandler.register and the chain to the next
#                 sitecustomize), interleaved; medians and the difference
#   detection     one rank prints a line and then goes silent: time from that line reaching
#                 gculaunch's stdout to the hang report on its stderr, for --hang-timeout 1, 3
#                 and 5 s (the report comes after the timeout plus at most one check, a tenth
#                 of the timeout, plus the stack dump: signal, file quiet for 150 ms)
#   two nodes     the same on two simulated hosts (network namespaces, as the multi-node
#                 integration tests make them; needs root and `ip`), one rank each, for
#                 --hang-timeout 3 s: from both ranks' line reaching their gculaunch to node
#                 0's report (adds node 1's progress reports, a tenth of the timeout apart,
#                 and node 1's stacks through the store)
set -euo pipefail
die() { echo "bench_hang: error: $*" >&2; exit 1; }
src=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$src/build/launcher/gculaunch}
[[ -x $bin ]] || die "$bin is not an executable gculaunch (build it first, or pass its path)"
command -v python3 >/dev/null || die "python3 is missing (run scripts/bootstrap.sh)"
BENCH_REPS=${BENCH_REPS:-10} exec python3 - "$bin" "$src" <<'PY'
import os, shutil, statistics, subprocess, sys, tempfile, time
bin_, src = sys.argv[1], sys.argv[2]
reps = int(os.environ["BENCH_REPS"])
py = "/usr/bin/python3"
with tempfile.TemporaryDirectory(prefix="bench-hang-") as tmp:
    empty = os.path.join(tmp, "empty.py")
    open(empty, "w").write("pass\n")
    quiet = os.path.join(tmp, "quiet.py")
    open(quiet, "w").write("import time\nprint('up', flush=True)\ntime.sleep(60)\n")
    base = [bin_, "--device", "cpu", "--nproc-per-node", "1", "--python", py]
    times = {False: [], True: []}
    for _ in range(reps):
        for hook in (False, True):
            t0 = time.monotonic()
            subprocess.run(base + (["--stack-dumps"] if hook else []) + [empty], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[hook].append(time.monotonic() - t0)
    plain, hooked = statistics.median(times[False]), statistics.median(times[True])
    print("hook cost (one rank, empty script, %d reps, medians): without %.1f ms, with "
          "--stack-dumps %.1f ms, difference %.1f ms"
          % (reps, plain * 1e3, hooked * 1e3, (hooked - plain) * 1e3))
    for timeout in (1, 3, 5):
        lat = []
        for _ in range(max(1, reps // 3)):
            p = subprocess.Popen(base + ["--hang-timeout", "%ds" % timeout, quiet],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            p.stdout.readline()
            t0 = time.monotonic()
            for line in p.stderr:
                if line.startswith("gculaunch: hang ("):
                    lat.append(time.monotonic() - t0)
                    break
            p.wait(timeout=60)
        print("detection, --hang-timeout %d s: report %.2f s after the last output (median of "
              "%d; %.2f s beyond the timeout)" % (timeout, statistics.median(lat), len(lat),
                                                  statistics.median(lat) - timeout))
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("detection on two nodes: skipped (needs root and ip for network namespaces)")
        sys.exit(0)
    os.chmod(tmp, 0o755)
    os.environ["GCULAUNCH_BIN"] = bin_
    sys.path.insert(0, os.path.join(src, "tests", "integration"))
    import gltest
    lat = []
    for _ in range(max(1, reps // 3)):
        tag = gltest.new_tag()
        with gltest.SimulatedHosts(2) as hosts:
            jobs = [gltest.NodeJob(hosts, i, 2, 29500, ["--nproc-per-node", "1", "--device",
                                                        "cpu", "--python", py, "--grace-period",
                                                        "2", "--hang-timeout", "3s", quiet], tag)
                    for i in range(2)]
            try:
                for job in jobs:
                    job.wait_for(lambda out, err: "up" in out, timeout=120, what="the rank")
                t0 = time.monotonic()
                jobs[0].wait_for(lambda out, err: "gculaunch: hang (" in err, timeout=60,
                                 what="node 0's hang report")
                lat.append(time.monotonic() - t0)
            finally:
                for job in jobs:
                    job.__exit__(None, None, None)
                gltest.kill_tagged(tag)
    print("detection on two nodes, --hang-timeout 3 s: node 0's report %.2f s after the last "
          "output (median of %d; %.2f s beyond the timeout)"
          % (statistics.median(lat), len(lat), statistics.median(lat) - 3))
PY
