"""bench/health.py - what the health gate before every attempt (issue 44) adds to a restart.
A benchmark, not a test: it prints numbers and asserts nothing.

  python3 -m bench.health [--reps 5] [--restarts 5] [--nproc 8]

One gculaunch per configuration and repetition runs --nproc shell ranks on a fake node of
--nproc cards (a --sysroot tree with /dev/fakegpuN) with --max-restarts R, --restart-backoff
off; local rank 0 fails in every attempt but the last.  Each rank writes the time it started;
the failing one writes the time it exits.  A restart's latency is the next attempt's first
start minus the failure.  Configurations, interleaved:
  none      the cpu profile (no cards): no gate at all
  builtin   the fake profile without a tool: the built-in rows (device files, driver)
  tool      the fake profile with its tool, a script printing one healthy row per card in
            nvidia-smi's form
  tool+cmd  the same plus --health-check (a script that exits 0)
  tool+mem  the tool with a health.memory entry (item 3): before each restart gculaunch also
            asks for memory.used, which is free at once (the wait does not fire)
  mem-held  the same, but the tool reports card 0 holding 3000 MiB until --release-ms after
            the failure (a driver still freeing a dead context): the wait fires every restart
For the memory configurations it prints how often the wait fired (gculaunch's "waited ... for
the last attempt's device memory" lines) and what it added to the restart (vs tool).
The tool's and the command's own run times are measured alone (spawned from Python, the
median of 20), so the gate's own cost is the latency minus `none` minus the slower of the two
(they run at once).

Run from the top of the repository.
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

from bench import lib

PROG = "bench.health"

PROFILE = """name: fakegpu
backend: gloo
visible_env: [FAKE_VISIBLE_DEVICES]
devices:
  dir: /dev
  pattern: 'fakegpu([0-9]+)'
driver_path: /sys/module/fakegpu
%s"""

HEALTH = """health:
  memory: {field: memory.used, below_mib: 1024}
  tool: fake-smi
  args: ['--query-gpu={fields}', '--format=csv,noheader']
  fields:
    - {name: ecc.errors.uncorrected.volatile.total, unhealthy: above 0}
    - {name: remapped_rows.pending, unhealthy: 'Yes'}
    - {name: remapped_rows.failure, unhealthy: 'Yes'}
"""

# The memory query: card 0 holds 3000 MiB until $RELEASE_MS after the latest failure (its
# time in ns in $BENCH_OUT/failns.*); without $RELEASE_MS every card is free.
FAKE_SMI = """#!/bin/sh
case "$1" in
  *memory.used*)
    mem=2
    last=$(cat "$BENCH_OUT"/failns.* 2>/dev/null | sort -n | tail -n 1)
    if [ -n "$RELEASE_MS" ] && [ -n "$last" ] && \\
       [ "$(date +%%s%%N)" -lt $((last + RELEASE_MS * 1000000)) ]; then mem=3000; fi
    i=0
    while [ $i -lt %d ]; do
      if [ $i = 0 ]; then echo "$i, $mem MiB"; else echo "$i, 2 MiB"; fi; i=$((i+1))
    done;;
  *)
    i=0
    while [ $i -lt %d ]; do echo "$i, 0, No, No"; i=$((i+1)); done;;
esac
"""

RANK = r"""#!/bin/sh
a=$TORCHELASTIC_RESTART_COUNT
date +%%s.%%N > "$1/start.$a.$LOCAL_RANK"
if [ "$LOCAL_RANK" = 0 ] && [ "$a" -lt %d ]; then
  date +%%s%%N > "$1/failns.$a"; date +%%s.%%N > "$1/fail.$a"; exit 1
fi
exit 0
"""


def read(path):
    """The time in `path`; None when the rank was stopped (by rank 0's failure) before it
    wrote one."""
    try:
        with open(path) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def latencies(out, restarts, nproc):
    lat = []
    for a in range(restarts):
        starts = [read(os.path.join(out, "start.%d.%d" % (a + 1, r))) for r in range(nproc)]
        first = min(t for t in starts if t is not None)  # rank 0 always writes before failing
        lat.append(first - read(os.path.join(out, "fail.%d" % a)))
    return lat


def run_one(gculaunch, work, config, restarts, nproc, release_ms):
    """The restart latencies of one run, and the memory waits gculaunch reported (seconds)."""
    out = tempfile.mkdtemp(dir=work)
    env = dict(os.environ, PATH=os.path.join(work, "bin") + ":" + os.environ.get("PATH", ""),
               BENCH_OUT=out)
    if config == "mem-held":
        env["RELEASE_MS"] = str(release_ms)
    cmd = [gculaunch, "--standalone", "--master-port", "0", "--nproc-per-node", str(nproc),
           "--max-restarts", str(restarts), "--restart-backoff", "off", "--max-same-failures", "0",
           "--no-python"]
    if config == "none":
        cmd += ["--device", "cpu"]
    else:
        profile = ("fake-tool.yaml" if config in ("tool", "tool+cmd") else
                   "fake-mem.yaml" if config in ("tool+mem", "mem-held") else "fake-builtin.yaml")
        cmd += ["--sysroot", os.path.join(work, "root"), "--device",
                os.path.join(work, profile)]
    if config == "tool+cmd":
        cmd += ["--health-check", os.path.join(work, "bin", "ok-check")]
    cmd += [os.path.join(work, "rank.sh"), out]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    if proc.returncode != 0:
        lib.die(PROG, "%s: gculaunch exited %d: %s" % (config, proc.returncode,
                                                       proc.stderr[-2000:]), 1)
    waits = [float(m) for m in re.findall(
        r"waited ([0-9.]+) s for the last attempt's device memory", proc.stderr)]
    return latencies(out, restarts, nproc), waits


def alone(path, reps=20):
    times = []
    for _ in range(reps):
        t = time.monotonic()
        subprocess.run([path], stdout=subprocess.DEVNULL, check=True)
        times.append(time.monotonic() - t)
    return lib.median(times)


def setup(work, restarts, nproc):
    os.makedirs(os.path.join(work, "root", "dev"))
    os.makedirs(os.path.join(work, "root", "sys", "module", "fakegpu"))
    for i in range(nproc):
        open(os.path.join(work, "root", "dev", "fakegpu%d" % i), "w").close()
    os.makedirs(os.path.join(work, "bin"))
    for path in (lib.write_script(os.path.join(work, "bin"), "fake-smi",
                                  FAKE_SMI % (nproc, nproc)),
                 lib.write_script(os.path.join(work, "bin"), "ok-check", "#!/bin/sh\nexit 0\n"),
                 lib.write_script(work, "rank.sh", RANK % restarts)):
        os.chmod(path, 0o755)
    with open(os.path.join(work, "fake-mem.yaml"), "w") as f:
        f.write(PROFILE % HEALTH)
    with open(os.path.join(work, "fake-tool.yaml"), "w") as f:
        f.write(PROFILE % HEALTH.replace("  memory: {field: memory.used, below_mib: 1024}\n", ""))
    with open(os.path.join(work, "fake-builtin.yaml"), "w") as f:
        f.write(PROFILE % "")


def main():
    ap = argparse.ArgumentParser(prog=PROG, description="What the health gate adds to a restart.")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 5),
                    help="repetitions (BENCH_REPS, 5)")
    ap.add_argument("--restarts", type=int, default=5, help="restarts per run (5)")
    ap.add_argument("--nproc", type=int, default=lib.env_int("BENCH_NPROC", 8),
                    help="ranks and fake cards (BENCH_NPROC, 8)")
    ap.add_argument("--release-ms", type=int, default=500,
                    help="mem-held: the card's memory is freed this long after the failure (500)")
    args = ap.parse_args()
    gculaunch = lib.require_gculaunch(PROG, args.gculaunch)
    configs = ["none", "builtin", "tool", "tool+cmd", "tool+mem", "mem-held"]
    with tempfile.TemporaryDirectory(prefix="bench-health-") as work:
        setup(work, args.restarts, args.nproc)
        results = {c: [] for c in configs}
        waits = {c: [] for c in configs}
        for _ in range(args.reps):
            for c in configs:
                lat, w = run_one(gculaunch, work, c, args.restarts, args.nproc, args.release_ms)
                results[c] += lat
                waits[c] += w
        tool = alone(os.path.join(work, "bin", "fake-smi"))
        cmd = alone(os.path.join(work, "bin", "ok-check"))
    base = lib.median(results["none"])
    print("restart latency (rank 0's failure -> the next attempt's first rank), %d ranks, "
          "%d restarts x %d runs each:" % (args.nproc, args.restarts, args.reps))
    print("  %-9s %9s %9s %9s %12s" % ("config", "median", "p90", "max", "vs none"))
    for c in configs:
        v = results[c]
        print("  %-9s %7.1f ms %7.1f ms %7.1f ms %+9.1f ms" % (
            c, 1000 * lib.median(v), 1000 * lib.p90(v), 1000 * max(v),
            1000 * (lib.median(v) - base)))
    print("the tool alone: %.1f ms, the --health-check alone: %.1f ms (medians of 20)"
          % (1000 * tool, 1000 * cmd))
    gate = lib.median(results["tool+cmd"]) - base - max(tool, cmd)
    print("the gate's own cost beyond the tools' time (tool+cmd): %+.1f ms" % (1000 * gate))
    tool_median = lib.median(results["tool"])
    for c in ("tool+mem", "mem-held"):
        fired = waits[c]
        print("%s: the memory wait fired before %d of %d restarts%s; it added %+.1f ms to the "
              "median restart (vs tool)" % (
                  c, len(fired), len(results[c]),
                  ", waited %.1f ms (median, as gculaunch said)" % (1000 * lib.median(fired))
                  if fired else "", 1000 * (lib.median(results[c]) - tool_median)))
    print("mem-held: the memory was freed %d ms after the failure" % args.release_ms)


if __name__ == "__main__":
    main()
