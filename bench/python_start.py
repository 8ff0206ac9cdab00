"""bench/python_start.py - what the ranks' interpreter costs a launch (issue 38, items 6 and 7).

  python3 -m bench.python_start [--reps 10] [--nproc 4] [--path-python DIR] [--old GCULAUNCH]

gculaunch with python3 on PATH (no --python): DIR first on PATH, default a fake pyenv made
in a temporary directory (a shim in pyenv's own form whose version links to Debian's
/usr/bin/python3; --path-python "$HOME/.pyenv/shims" measures a real pyenv).  Each run is
one whole launch, `gculaunch --standalone --nproc-per-node N --device cpu worker.py`, whose
ranks print one line and exit; the time is Popen -> gculaunch's exit.  Interleaved, per
repetition:

  empty cache  XDG_CACHE_HOME a new empty directory: the launch answers from the
               interpreter's files and probes in the background
  warm cache   XDG_CACHE_HOME warmed once before the first repetition (a dry run)
  shim as is   PYTHON_EXEC=<the shim>: the ranks go through the shim (what the ranks save)
  old          (with --old) an older gculaunch, empty cache each time: the probe on the
               start path and the ranks through the shim

and medians are printed.  A benchmark, not a test: it prints numbers and asserts nothing.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench import lib

PROG = "bench.python_start"
RUN_TIMEOUT = 120

WORKER = "import os\nprint('rank', os.environ['RANK'])\n"

FAKE_PYENV_EXEC = r"""#!/bin/bash
set -e
[ "$1" = exec ] || exit 2
shift
program=$1
shift
version=${PYENV_VERSION:-}
if [ -z "$version" ]; then read -r version _ < "$PYENV_ROOT/version"; fi
export PYENV_VERSION=$version
export PATH="$PYENV_ROOT/versions/$version/bin:$PATH"
exec "$PYENV_ROOT/versions/$version/bin/$program" "$@"
"""


def executable_script(directory, name, text):
    path = lib.write_script(directory, name, text)
    os.chmod(path, 0o755)
    return path


def fake_pyenv(root):
    """A pyenv in `root` (pyenv's shim form) whose one version is Debian's python3; returns
    the shims directory."""
    os.makedirs(os.path.join(root, "libexec"))
    os.makedirs(os.path.join(root, "shims"))
    os.makedirs(os.path.join(root, "versions", "3.bench", "bin"))
    executable_script(os.path.join(root, "libexec"), "pyenv", FAKE_PYENV_EXEC)
    executable_script(os.path.join(root, "shims"), "python3",
                     '#!/usr/bin/env bash\nset -e\nprogram="${0##*/}"\nexport PYENV_ROOT="%s"\n'
                     'exec "%s/libexec/pyenv" exec "$program" "$@"\n' % (root, root))
    os.symlink(lib.PYTHON, os.path.join(root, "versions", "3.bench", "bin", "python3"))
    with open(os.path.join(root, "version"), "w") as f:
        f.write("3.bench\n")
    return os.path.join(root, "shims")


def launch(gculaunch, env, script, nproc, cwd):
    """One launch to its end; returns seconds, or None when it failed."""
    t0 = time.perf_counter()
    proc = subprocess.run([gculaunch, "--standalone", "--nproc-per-node", str(nproc), "--device",
                           "cpu", script], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=RUN_TIMEOUT)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        print("%s: a launch failed (exit %d): %s" % (PROG, proc.returncode,
                                                    proc.stderr.decode(errors="replace")[-500:]),
              file=sys.stderr)
        return None
    return elapsed


def main():
    ap = argparse.ArgumentParser(prog=PROG, description="The ranks' interpreter's cost to a "
                                 "launch: empty against warm cache, and through a shim.")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--reps", type=int, default=lib.env_int("BENCH_REPS", 10),
                    help="repetitions (BENCH_REPS, 10)")
    ap.add_argument("--nproc", type=int, default=lib.env_int("BENCH_NPROC", 4),
                    help="ranks (BENCH_NPROC, 4)")
    ap.add_argument("--path-python", default=os.environ.get("BENCH_PATH_PYTHON", ""),
                    help="a directory put first on PATH whose python3 the ranks use "
                    "(BENCH_PATH_PYTHON; default a fake pyenv in a temporary directory)")
    ap.add_argument("--old", default=os.environ.get("BENCH_OLD_GCULAUNCH", ""),
                    help="an older gculaunch to compare (BENCH_OLD_GCULAUNCH)")
    args = ap.parse_args()
    gculaunch = lib.require_gculaunch(PROG, args.gculaunch)
    if args.old and not os.access(args.old, os.X_OK):
        lib.die(PROG, "--old '%s' is not executable (fix: give a gculaunch build, or leave it "
                "out)" % args.old)
    work = tempfile.mkdtemp(prefix="gculaunch-bench-")
    try:
        path_dir = args.path_python or fake_pyenv(os.path.join(work, "pyenv"))
        shim = os.path.join(path_dir, "python3")
        if not os.access(shim, os.X_OK):
            lib.die(PROG, "--path-python '%s' holds no executable python3 (fix: name a "
                    "directory such as $HOME/.pyenv/shims)" % path_dir)
        script = lib.write_script(work, "worker.py", WORKER)
        base = {"PATH": path_dir + ":/usr/local/bin:/usr/bin:/bin",
                "HOME": os.environ.get("HOME", "/"), "LANG": "C.UTF-8", "TMPDIR": work}
        warm = os.path.join(work, "warm-cache")
        os.mkdir(warm)
        # Warm it: the dry run waits for the probe and caches its answer.
        subprocess.run([gculaunch, "--dry-run", "--standalone", "--nproc-per-node",
                        str(args.nproc), "--device", "cpu", script],
                       env=dict(base, XDG_CACHE_HOME=warm), cwd=work, check=True,
                       stdout=subprocess.DEVNULL, timeout=RUN_TIMEOUT)
        kinds = ["empty cache", "warm cache", "shim as is"] + (["old"] if args.old else [])
        times = {k: [] for k in kinds}
        for rep in range(args.reps):
            for kind in kinds:
                cache = warm
                if kind in ("empty cache", "old", "shim as is"):
                    cache = tempfile.mkdtemp(prefix="cache-", dir=work)
                env = dict(base, XDG_CACHE_HOME=cache)
                if kind == "shim as is":
                    env["PYTHON_EXEC"] = shim
                binary = args.old if kind == "old" else gculaunch
                t = launch(binary, env, script, args.nproc, work)
                if t is not None:
                    times[kind].append(t)
                if cache != warm:
                    shutil.rmtree(cache, ignore_errors=True)
            print("%s: repetition %d/%d done" % (PROG, rep + 1, args.reps), file=sys.stderr,
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("whole launches of %d ranks printing one line, python3 on PATH = %s (%d interleaved "
          "repetitions, medians)" % (args.nproc, shim, args.reps))
    header = "%-14s %10s %10s %8s" % ("launch", "median ms", "min ms", "runs")
    print(header)
    print("-" * len(header))
    for kind in kinds:
        values = times[kind]
        if values:
            print("%-14s %10.1f %10.1f %8d" % (kind, lib.median(values) * 1e3,
                                              min(values) * 1e3, len(values)))
    if times["empty cache"] and times["warm cache"]:
        print("empty minus warm cache: %+.1f ms (median of each)"
              % ((lib.median(times["empty cache"]) - lib.median(times["warm cache"])) * 1e3))


if __name__ == "__main__":
    main()
