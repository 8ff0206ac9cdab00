#!/usr/bin/env python3
"""bench/store.py - compare `gculaunch store` with torch 1.13's own TCPStore server, in one run.

  python3 -m bench.store [--only 1 64 256 1000 10000] [--json FILE] [--phase S] ...

Needs root and a build (scripts/build.sh: build/launcher/gculaunch, build/bench/store/store_load
and store_floor) plus Debian's python3-torch (1.13).  It enters a private network namespace
(loopback only) first, where net.core.somaxconn and the SYN backlog are raised, so that a
10,000-client connect storm does not pay SYN retransmits.  The whole run is bounded (14
minutes at most; about 5 to 10 in practice); each phase of each case has its own deadline
and is reported as TIMEOUT if it overruns.  Nothing is asserted: it prints numbers.

For each client count it starts each server in turn -- `gculaunch store` and torch 1.13's
own TCPStore server (bench/store_torch.py server) -- then load processes:
  * 1, 64, 256 clients: real torch.distributed.TCPStore clients (threads in up to 8
    processes of bench/store_torch.py);
  * 1,000 and 10,000 clients: the C++ client (bench/store/store_load, 2 processes),
    torch 1.x dialect so that both servers can serve it.
Phases, each bounded in time:
  connect  all clients connect at once (the connect storm)      -> storm time
  mix      R cycles of set / get / add / wait per client          -> ops/s, p50, p99,
                                                                     server CPU per request
  barrier  every client ADDs one key, the last one SETs key/go,
           all WAIT on key/go; timed from the go command, so
           connection time is excluded                            -> barrier time
Server CPU is utime+stime from /proc/<pid>/stat, divided by the requests on the wire.

Calibration: GETNUMKEYS only (a 1-byte request, an 8-byte reply) from the C++ client, served
by the two stores and by bench/store/store_floor, a bare epoll loop that does nothing
but recv and send.  store_floor's CPU per request is what the kernel alone (loopback TCP,
epoll, scheduling) costs here: no TCPStore server can go below it.
Each case runs several times with the two servers interleaved (the machine may be shared
and noisy); the summary gives medians and the range of the CPU and barrier numbers.
Nothing is asserted: the numbers are printed.
"""
import argparse
import ctypes
import json
import os
import selectors
import signal
import subprocess
import sys
import time

from bench import lib

PROG = "bench.store"
STORE_TORCH = os.path.join(lib.BENCH, "store_torch.py")
NETNS_ENV = "_GCULAUNCH_BENCH_NETNS"  # set once inside the private network namespace
TOTAL_BUDGET = 840  # seconds for the whole run (then `timeout` ends it)
TICK = os.sysconf("SC_CLK_TCK")
PR_SET_PDEATHSIG = 1

# (clients, client kind, load processes, mix cycles per client, repetitions)
CASES = [
    (1, "torch", 1, 6000, 3),
    (64, "torch", 8, 60, 3),
    (256, "torch", 8, 20, 3),
    (1000, "cpp", 2, 20, 3),
    (10000, "cpp", 2, 3, 1),
]


# Calibration cases: (clients, load processes, GETNUMKEYS per client)
CALIBRATION = [(256, 2, 400), (10000, 2, 10)]


def die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


class Timeout(Exception):
    pass


class Proc:
    """A child with line-based stdout, killed with its group at the end."""

    def __init__(self, argv, stdin=True):
        self.argv = argv
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                  start_new_session=True, preexec_fn=die_with_parent)
        self.buf = b""
        self.err = b""
        os.set_blocking(self.p.stdout.fileno(), False)
        os.set_blocking(self.p.stderr.fileno(), False)

    def send(self, line):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.p.wait()


def read_lines(procs, count_each, deadline):
    """Reads `count_each` lines from every process before `deadline`; returns them."""
    sel = selectors.DefaultSelector()
    for proc in procs:
        sel.register(proc.p.stdout, selectors.EVENT_READ, proc)
        sel.register(proc.p.stderr, selectors.EVENT_READ, proc)
    out = {id(p): [] for p in procs}
    try:
        while any(len(out[id(p)]) < count_each for p in procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout()
            for key, _ in sel.select(min(left, 1.0)):
                proc = key.data
                try:
                    chunk = os.read(key.fileobj.fileno(), 1 << 20)
                except BlockingIOError:
                    continue
                if key.fileobj is proc.p.stderr:
                    proc.err += chunk
                    if not chunk:
                        sel.unregister(key.fileobj)
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                    raise RuntimeError("%s exited early: %s" % (os.path.basename(proc.argv[0]),
                                                                proc.err.decode()[-500:]))
                proc.buf += chunk
                while b"\n" in proc.buf:
                    line, proc.buf = proc.buf.split(b"\n", 1)
                    out[id(proc)].append(line.decode())
    finally:
        sel.close()
    return [out[id(p)] for p in procs]


def start_server(kind, args):
    if kind == "floor":
        proc = Proc([args.store_floor], stdin=False)
    elif kind == "gculaunch":
        proc = Proc([args.gculaunch, "store", "--host", "127.0.0.1", "--port", "0",
                     "--log-level", "warn", "--max-connections", "100000"], stdin=False)
    else:
        proc = Proc([args.torch_python, STORE_TORCH, "server",
                     "--host", "127.0.0.1"])
    first = read_lines([proc], 1, time.monotonic() + 60)[0][0]
    port = int(first.rsplit(":", 1)[1])
    return proc, port


def start_load(kind, clients, procs, port, args):
    per = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    if kind == "torch":
        return [Proc([args.torch_python, STORE_TORCH, "clients",
                      "--host", "127.0.0.1", "--port", str(port), "--clients", str(n)])
                for n in per]
    return [Proc([args.store_load, "--host", "127.0.0.1", "--port", str(port), "--clients",
                  str(n), "--dialect", "v1", "--connect-timeout", "60"]) for n in per]


def run_case(server_kind, clients, kind, procs, rounds, args):
    result = {"server": server_kind, "clients": clients, "kind": kind}
    server, port = start_server(server_kind, args)
    load = []
    try:
        load = start_load(kind, clients, procs, port, args)
        events = [json.loads(l[0]) for l in read_lines(load, 1, time.monotonic() + args.phase)]
        result["connect_s"] = max(e["t_end"] for e in events) - min(e["t_begin"] for e in events)
        result["connect_failed"] = sum(e["failed"] for e in events)

        cpu0 = cpu_seconds(server.p.pid)
        for p in load:
            p.send("mix %d" % rounds)
        events = [json.loads(l[0]) for l in read_lines(load, 1, time.monotonic() + args.phase)]
        cpu1 = cpu_seconds(server.p.pid)
        requests = sum(e["requests"] for e in events)
        ops = sum(e["ops"] for e in events)
        wall = max(e["t_end"] for e in events) - min(e["t_begin"] for e in events)
        lat = [x for e in events for x in e["latencies_us"]]
        result.update(mix_failed=sum(e["failed"] for e in events), requests=requests,
                      ops_per_s=ops / wall, p50_us=lib.quantile(lat, 0.50),
                      p99_us=lib.quantile(lat, 0.99),
                      cpu_us_per_req=(cpu1 - cpu0) * 1e6 / requests, cpu_s=cpu1 - cpu0)

        key = "barrier/%s/%d" % (server_kind, clients)
        cpu2 = cpu_seconds(server.p.pid)
        t_go = time.monotonic()
        for p in load:
            p.send("barrier %s %d" % (key, clients))
        events = [json.loads(l[0]) for l in read_lines(load, 1, time.monotonic() + args.phase)]
        result["barrier_s"] = max(e["t_end"] for e in events) - t_go
        result["barrier_failed"] = sum(e["failed"] for e in events)
        result["barrier_cpu_us_per_req"] = ((cpu_seconds(server.p.pid) - cpu2) * 1e6
                                            / sum(e["requests"] for e in events))
    except Timeout:
        result["timeout"] = True
    except RuntimeError as e:
        result["error"] = str(e)
    finally:
        notes = [l for p in load for l in p.err.decode(errors="replace").splitlines() if l]
        if notes:
            result["load_stderr"] = notes[0][:300]
        for p in load:
            try:
                p.send("exit")
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for p in load:
            try:
                p.p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            p.kill()
        server.kill()
    return result


def run_calibration(server_kind, clients, procs, rounds, args):
    result = {"server": server_kind, "clients": clients}
    server, port = start_server(server_kind, args)
    load = []
    try:
        load = start_load("cpp", clients, procs, port, args)
        read_lines(load, 1, time.monotonic() + args.phase)
        cpu0 = cpu_seconds(server.p.pid)
        for p in load:
            p.send("numkeys %d" % rounds)
        events = [json.loads(l[0]) for l in read_lines(load, 1, time.monotonic() + args.phase)]
        cpu1 = cpu_seconds(server.p.pid)
        requests = sum(e["requests"] for e in events)
        wall = max(e["t_end"] for e in events) - min(e["t_begin"] for e in events)
        result.update(requests=requests, failed=sum(e["failed"] for e in events),
                      req_per_s=requests / wall, cpu_us_per_req=(cpu1 - cpu0) * 1e6 / requests)
    except Timeout:
        result["timeout"] = True
    except RuntimeError as e:
        result["error"] = str(e)
    finally:
        for p in load:
            try:
                p.send("exit")
            except OSError:
                pass
        for p in load:
            try:
                p.p.wait(10)
            except subprocess.TimeoutExpired:
                pass
            p.kill()
        server.kill()
    return result


def report_calibration(results):
    print()
    print("calibration: GETNUMKEYS only, C++ clients; cpu = server utime+stime per request "
          "(median [range])")
    for clients in sorted({r["clients"] for r in results}):
        parts = []
        for server in ("floor", "gculaunch", "torch"):
            cpus = [r["cpu_us_per_req"] for r in results
                    if r["server"] == server and r["clients"] == clients and "cpu_us_per_req" in r
                    and not r.get("failed")]
            parts.append("%s %s" % (server, "%.2f [%.2f-%.2f]" % (lib.median(cpus), min(cpus),
                                                               max(cpus)) if cpus else "-"))
        print("%6d clients: %s" % (clients, " | ".join(parts)))


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def summarize(runs):
    """Medians over the repetitions of one (server, clients) case, with the CPU and barrier
    ranges and a status that says how many repetitions failed or overran."""
    ok = [r for r in runs if not r.get("timeout") and not r.get("error")
          and not r.get("connect_failed") and not r.get("mix_failed")
          and not r.get("barrier_failed") and "barrier_s" in r]
    out = {"server": runs[0]["server"], "clients": runs[0]["clients"], "kind": runs[0]["kind"],
           "runs": len(runs), "ok": len(ok)}
    # Medians over every run that got that far (a failed run still has its earlier phases).
    for key in ("connect_s", "ops_per_s", "p50_us", "p99_us", "cpu_us_per_req", "barrier_s"):
        out[key] = lib.median([r.get(key) for r in runs])
    for key, name in (("cpu_us_per_req", "cpu_range"), ("barrier_s", "barrier_range")):
        have = [r[key] for r in runs if r.get(key) is not None]
        out[name] = [min(have), max(have)] if have else None
    problems = []
    for r in runs:
        if r in ok:
            continue
        what = []
        for key, label in (("connect_failed", "clients failed to connect"),
                           ("mix_failed", "clients failed in the mix"),
                           ("barrier_failed", "clients failed in the barrier")):
            if r.get(key):
                what.append("%d %s" % (r[key], label))
        if r.get("timeout"):
            phase = ("connect" if "connect_s" not in r else "mix" if "cpu_us_per_req" not in r
                     else "barrier")
            what.append("%s phase over the time limit" % phase)
        if r.get("error"):
            what.append("error: " + r["error"][:80])
        problems.append(", ".join(what))
    out["status"] = "ok" if not problems else "%d/%d runs: %s" % (len(problems), len(runs),
                                                                  problems[0])
    return out


def report(results, cases, servers):
    rows = []
    for clients, _, _, _, _ in cases:
        for server in servers:
            runs = [r for r in results if r["server"] == server and r["clients"] == clients]
            if runs:
                rows.append(summarize(runs))
    print()
    print("medians over the repetitions (ranges in brackets); cpu = server utime+stime per "
          "request on the wire; barrier excludes connecting")
    head = ("%-9s %6s %-5s %4s %8s %8s %8s %8s %19s %21s  %s"
            % ("server", "clients", "load", "runs", "storm_s", "ops/s", "p50_us", "p99_us",
               "cpu_us/req", "barrier_s", "status"))
    print(head)
    print("-" * len(head))
    for r in rows:
        cpu = ("%.2f [%.2f-%.2f]" % (r["cpu_us_per_req"], *r["cpu_range"])
               if r["cpu_range"] else "-")
        barrier = ("%.3f [%.3f-%.3f]" % (r["barrier_s"], *r["barrier_range"])
                   if r["barrier_range"] else "-")
        print("%-9s %6d %-5s %4d %8s %8s %8s %8s %19s %21s  %s"
              % (r["server"], r["clients"], r["kind"], r["runs"], fmt(r["connect_s"], ".3f"),
                 fmt(r["ops_per_s"], ".0f"), fmt(r["p50_us"], ".0f"), fmt(r["p99_us"], ".0f"),
                 cpu, barrier, r["status"]))
    print()
    by = {(r["server"], r["clients"]): r for r in rows}
    for clients, _, _, _, _ in cases:
        ours, theirs = by.get(("gculaunch", clients)), by.get(("torch", clients))
        if not ours or not theirs or ours["cpu_us_per_req"] is None:
            continue
        line = "%6d clients: server CPU per request %.2f us vs torch %s" % (
            clients, ours["cpu_us_per_req"], fmt(theirs["cpu_us_per_req"], ".2f"))
        if theirs["cpu_us_per_req"]:
            line += " (ratio %.2f)" % (ours["cpu_us_per_req"] / theirs["cpu_us_per_req"])
        line += "; barrier %.3f s vs torch %s" % (
            ours["barrier_s"], fmt(theirs["barrier_s"], ".3f") + " s"
            if theirs["barrier_s"] is not None else theirs["status"])
        print(line)
    return rows


def enter_netns(args):
    """Runs this benchmark again inside a private network namespace (loopback only), bounded
    by `timeout`; returns its exit status."""
    lib.require_root(PROG, "a private network namespace and its sysctls")
    for f in (args.gculaunch, args.store_load, args.store_floor):
        if not os.access(f, os.X_OK):
            lib.die(PROG, "%s is missing (run scripts/build.sh)" % f)
    cmd = ["unshare", "--net", "env", "%s=1" % NETNS_ENV, "timeout", "--kill-after=10",
           str(TOTAL_BUDGET), lib.PYTHON, "-m", "bench.store"] + sys.argv[1:]
    path = os.pathsep.join(p for p in (lib.TOP, os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=path)).returncode


def raise_limits():
    """Inside the namespace: loopback up, a deep accept queue and SYN backlog."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["sysctl", "-qw", "net.core.somaxconn=65535"], check=True)
    if subprocess.run(["sysctl", "-qw", "net.ipv4.tcp_max_syn_backlog=65535"]).returncode:
        print("%s: SYN backlog not raised" % PROG, file=sys.stderr)
    subprocess.run(["sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65535"])
    subprocess.run(["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"])


def main():
    store_dir = os.path.join(lib.build_dir(), "bench", "store")
    ap = argparse.ArgumentParser(prog=PROG, description="gculaunch store against torch 1.13's "
                                 "TCPStore server (needs root: a private network namespace).")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--store-load", default=os.path.join(store_dir, "store_load"),
                    help="default build/bench/store/store_load (BUILD_DIR sets build/)")
    ap.add_argument("--store-floor", default=os.path.join(store_dir, "store_floor"),
                    help="default build/bench/store/store_floor")
    ap.add_argument("--no-calibration", action="store_true")
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--phase", type=float, default=60, help="seconds allowed per phase")
    ap.add_argument("--only", type=int, nargs="*", help="client counts to run")
    ap.add_argument("--case", action="append", default=[],
                    help="extra case CLIENTS:torch|cpp:PROCESSES:CYCLES (replaces the table)")
    ap.add_argument("--servers", default="gculaunch,torch", help="comma-separated")
    ap.add_argument("--repeat", type=int, default=0,
                    help="repetitions of every case (default: as in CASES)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if os.environ.get(NETNS_ENV) != "1":
        return enter_netns(args)
    raise_limits()

    cases = CASES
    if args.case:
        cases = [(int(c), k, int(p), int(r), args.repeat or 1)
                 for c, k, p, r in (x.split(":") for x in args.case)]
    servers = args.servers.split(",")
    results = []
    print("store benchmark: %d CPUs, somaxconn %s, open-file limit %s, load average %s"
          % (os.cpu_count(), open("/proc/sys/net/core/somaxconn").read().strip(),
             os.sysconf("SC_OPEN_MAX"), open("/proc/loadavg").read().split()[0]), flush=True)
    for clients, kind, procs, rounds, repeat in cases:
        if args.only and clients not in args.only:
            continue
        for rep in range(args.repeat or repeat):
            for server_kind in servers:  # interleaved, so that drifting load hits both
                t0 = time.monotonic()
                r = run_case(server_kind, clients, kind, procs, rounds, args)
                r["case_s"] = time.monotonic() - t0
                r["rep"] = rep
                results.append(r)
                print(json.dumps({k: v for k, v in r.items()}), flush=True)
    report(results, cases, servers)
    if not args.case and not args.no_calibration:
        calibration = []
        for clients, procs, rounds in CALIBRATION:
            if args.only and clients not in args.only:
                continue
            for rep in range(3 if clients < 10000 else 1):
                for server_kind in ("floor", "gculaunch", "torch"):
                    r = run_calibration(server_kind, clients, procs, rounds, args)
                    r["rep"] = rep
                    calibration.append(r)
                    print(json.dumps(r), flush=True)
        report_calibration(calibration)
        results += [dict(r, calibration=True) for r in calibration]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
