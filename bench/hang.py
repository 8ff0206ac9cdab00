"""bench/hang.py - what --stack-dumps and --hang-timeout cost and how fast a hang is seen.
A benchmark, not a test: it prints numbers and asserts nothing.

  python3 -m bench.hang [GCULAUNCH] [--reps 10]   (default build/launcher/gculaunch;
                                                   --reps defaults to BENCH_REPS, else 10)

  hook cost     one rank running an empty Python script (no torch), the whole launch timed
                from start to exit, with and without --stack-dumps (the hook's
                sitecustomize: faulthandler.register and the chain to the next
                sitecustomize), interleaved; medians and the difference
  detection     one rank prints a line and then goes silent: time from that line reaching
                gculaunch's stdout to the hang report on its stderr, for --hang-timeout 1, 3
                and 5 s (the report comes after the timeout plus at most one check, a tenth
                of the timeout, plus the stack dump: signal, file quiet for 150 ms)
  two nodes     the same on two simulated hosts (network namespaces, as the multi-node
                integration tests make them; needs root and `ip`), one rank each, for
                --hang-timeout 3 s: from both ranks' line reaching their gculaunch to node
                0's report (adds node 1's progress reports, a tenth of the timeout apart,
                and node 1's stacks through the store)
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time

from bench import lib
from tests.integration import gltest

PROG = "bench.hang"
PYTHON = lib.PYTHON
QUIET = "import time\nprint('up', flush=True)\ntime.sleep(60)\n"


def hook_cost(base, empty, reps):
    times = {False: [], True: []}
    for _ in range(reps):
        for hook in (False, True):
            t0 = time.monotonic()
            subprocess.run(base + (["--stack-dumps"] if hook else []) + [empty], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[hook].append(time.monotonic() - t0)
    plain, hooked = lib.median(times[False]), lib.median(times[True])
    print("hook cost (one rank, empty script, %d reps, medians): without %.1f ms, with "
          "--stack-dumps %.1f ms, difference %.1f ms"
          % (reps, plain * 1e3, hooked * 1e3, (hooked - plain) * 1e3))


def detection(base, quiet, reps):
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
        m = lib.median(lat)
        print("detection, --hang-timeout %d s: report %.2f s after the last output (median of "
              "%d; %.2f s beyond the timeout)" % (timeout, m, len(lat), m - timeout))


def detection_two_nodes(quiet, reps):
    lat = []
    for _ in range(max(1, reps // 3)):
        tag = gltest.new_tag()
        with gltest.SimulatedHosts(2) as hosts:
            jobs = [gltest.NodeJob(hosts, i, 2, 29500, ["--nproc-per-node", "1", "--device",
                                                        "cpu", "--python", PYTHON,
                                                        "--grace-period", "2",
                                                        "--hang-timeout", "3s", quiet], tag)
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
    m = lib.median(lat)
    print("detection on two nodes, --hang-timeout 3 s: node 0's report %.2f s after the last "
          "output (median of %d; %.2f s beyond the timeout)" % (m, len(lat), m - 3))


def main():
    ap = argparse.ArgumentParser(prog=PROG, description="The cost of --stack-dumps and how "
                                 "fast --hang-timeout reports a hang.")
    ap.add_argument("gculaunch", nargs="?", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 10),
                    help="repetitions (BENCH_REPS, 10)")
    ap.add_argument("--no-two-nodes", action="store_true",
                    help="skip the simulated-hosts part")
    args = ap.parse_args()
    gculaunch = lib.require_gculaunch(PROG, args.gculaunch)
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as tmp:
        empty = lib.write_script(tmp, "empty.py", "pass\n")
        quiet = lib.write_script(tmp, "quiet.py", QUIET)
        base = [gculaunch, "--device", "cpu", "--nproc-per-node", "1", "--python", PYTHON]
        hook_cost(base, empty, args.reps)
        detection(base, quiet, args.reps)
        if args.no_two_nodes:
            return
        if os.geteuid() != 0 or shutil.which("ip") is None:
            print("detection on two nodes: skipped (needs root and ip for network namespaces)")
            return
        os.chmod(tmp, 0o755)
        detection_two_nodes(quiet, args.reps)


if __name__ == "__main__":
    main()
