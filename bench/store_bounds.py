"""bench/store_bounds.py - the store's memory bounds under attack (issue 26), in one run.

  python3 -m bench.store_bounds [--no-torch2] [--no-launch]

For each attack of docs/tcpstore-protocol.md section 6.1 (MULTI_GET amplification, a watcher
that never reads, GETs never read, partial frames, APPEND past the value limit, garbage
connections) it prints the peak RSS of `gculaunch store` and of torch's classic TCPStore
server (torch 1.13 from /usr/bin/python3; torch 2.x from the cached root of
scripts/make_torch2_root.sh, when it exists), how a well-behaved client fared during the
attack, and, in a launch, the time from a rank's failure to gculaunch's exit during it.
Needs a build (scripts/build.sh).  Loopback only; bounded (about 3 to 5 minutes; 15 at
most).  Nothing is asserted: it prints numbers.  In detail:

For each attack, against a fresh server each time:
  * peak RSS: VmHWM of the server process after the attack (MiB), and whether it survived;
  * the legitimate client: a SET + GET round trip every 10 ms during the attack, in the
    server's dialect: how many were answered, the slowest (ms), how many got no answer
    within 5 s (the client then reconnects);
for `gculaunch store` and torch's classic TCPStore server (1.13 here; 2.x in its root when
--torch2 is given; an attack the dialect cannot express is "n/a").  Then, in a launch
(`gculaunch --standalone`, 2 ranks): the time from a rank's failure (its last timestamp
before exit 3) to the launcher's exit, without an attack and during each one.
Nothing is asserted; every phase has its own deadline."""
import argparse
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from bench import lib

PROG = "bench.store_bounds"
TOTAL_BUDGET = 900  # seconds for the whole run

MiB = 1 << 20

TORCH_SERVER = r"""
import datetime, sys, torch.distributed as dist
try:  # 2.x: the classic server (Debian's torch has no libuv); 1.13 has no such argument
    s = dist.TCPStore('127.0.0.1', 0, None, True, datetime.timedelta(seconds=300),
                      wait_for_workers=False, use_libuv=False)
except TypeError:
    s = dist.TCPStore('127.0.0.1', 0, None, True, datetime.timedelta(seconds=300),
                      wait_for_workers=False)
print('listening on 127.0.0.1:%d' % s.port, flush=True)
sys.stdin.read()
"""

RANK = r"""
import os, sys, time
rank = int(os.environ["RANK"])
go, mark = sys.argv[1], sys.argv[2]
if rank == 1:
    while not os.path.exists(go):
        time.sleep(0.005)
    with open(mark, "w") as f:
        f.write(repr(time.time()))
    sys.exit(3)
time.sleep(120)
"""


def blob(data):
    return struct.pack("<Q", len(data)) + data


class Wire:
    """Request encoding for one dialect: 'v1' (torch 1.x) or 'v2' (torch 2.2+)."""

    def __init__(self, dialect):
        self.v2 = dialect == "v2"

    def connect(self, port, timeout=10):
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if self.v2:
            s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE))
        return s

    def set(self, key, value):
        return (b"\x01" if self.v2 else b"\x00") + blob(key) + blob(value)

    def get(self, key):
        return (b"\x03" if self.v2 else b"\x02") + blob(key)

    def numkeys(self):
        return b"\x07" if self.v2 else b"\x06"


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


class Server:
    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            raise RuntimeError("no first line from %s: %r" % (cmd, line))
        self.port = int(line.rsplit(":", 1)[1])
        self.err_lines = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for raw in self.proc.stderr:
            self.err_lines.append(raw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Legit(threading.Thread):
    """A well-behaved client: SET + GET every 10 ms until stopped."""

    def __init__(self, port, wire):
        super().__init__(daemon=True)
        self.port, self.wire = port, wire
        self.stop_flag = threading.Event()
        self.ok = 0
        self.stalled = 0
        self.slowest = 0.0

    def run(self):
        s = None
        while not self.stop_flag.is_set():
            try:
                if s is None:
                    s = self.wire.connect(self.port, timeout=5)
                t0 = time.monotonic()
                s.sendall(self.wire.set(b"/legit", b"x" * 16) + self.wire.get(b"/legit"))
                recv_exact(s, 8 + 16)
                self.slowest = max(self.slowest, time.monotonic() - t0)
                self.ok += 1
            except (OSError, EOFError):
                self.stalled += 1
                if s is not None:
                    s.close()
                s = None
            self.stop_flag.wait(0.01)
        if s is not None:
            s.close()


# ---- attacks: each takes (port, wire) and returns within its own deadline ----

def hold(socks, seconds):
    time.sleep(seconds)
    for s in socks:
        s.close()


def attack_multiget(port, wire):
    s = wire.connect(port)
    s.sendall(wire.set(b"/k", b"v" * (512 << 10)))
    s.sendall(b"\x0a" + struct.pack("<Q", 2000) + blob(b"/k") * 2000)
    hold([s], 2)


def attack_watch(port, wire):
    w = wire.connect(port)
    w.sendall(b"\x07" + blob(b"/w"))
    setter = wire.connect(port, timeout=20)
    try:
        for i in range(40):
            setter.sendall(wire.set(b"/w", bytes([65 + i % 26]) * (8 * MiB)))
        setter.sendall(wire.numkeys())
        recv_exact(setter, 8)
    except (OSError, EOFError):
        pass
    hold([w, setter], 0.5)


def attack_getnoread(port, wire):
    s = wire.connect(port, timeout=20)
    try:
        s.sendall(wire.set(b"/big", b"b" * (64 * MiB)) + wire.numkeys())
        recv_exact(s, 8)
    except (OSError, EOFError):
        pass
    readers = []
    for _ in range(16):
        r = wire.connect(port)
        r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        r.settimeout(2)
        try:
            r.sendall(wire.get(b"/big") * 4)
        except OSError:
            pass
        readers.append(r)
    hold(readers + [s], 3)


def attack_partial(port, wire):
    senders = []
    deadline = time.monotonic() + 20
    for i in range(16):
        if time.monotonic() > deadline:
            break
        s = wire.connect(port)
        s.settimeout(3)
        head = (b"\x01" if wire.v2 else b"\x00") + blob(b"/p%d" % i) + struct.pack("<Q", 64 * MiB)
        try:
            s.sendall(head + b"p" * (64 * MiB - 1))
        except OSError:
            pass
        senders.append(s)
    hold(senders, 1)


def attack_append(port, wire):
    s = wire.connect(port, timeout=20)
    try:
        for _ in range(3):
            s.sendall(b"\x09" + blob(b"/app") + blob(b"a" * (40 * MiB)))
        s.sendall(wire.get(b"/app"))
        recv_exact(s, 8)
    except (OSError, EOFError):
        pass
    hold([s], 0.5)


def attack_garbage(port, wire):
    for _ in range(5000):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(b"\xff")
        except OSError:
            pass
    time.sleep(0.5)


ATTACKS = [
    ("S8 MULTI_GET 2000 x 512 KiB", attack_multiget, {"v2"}),
    ("S9 watcher never reads, 40 x 8 MiB SET", attack_watch, {"v1"}),
    ("S7 16 conns GET 64 MiB, never read", attack_getnoread, {"v1", "v2"}),
    ("S6 16 partial 64 MiB frames", attack_partial, {"v1", "v2"}),
    ("S10 APPEND 3 x 40 MiB", attack_append, {"v2"}),
    ("S12 5000 garbage connections", attack_garbage, {"v1", "v2"}),
]


def quietly(attack, port, wire):
    """Runs an attack; a server that closes or exits under it is an outcome, not an error."""
    try:
        attack(port, wire)
    except (OSError, EOFError):
        pass


def run_attack(server_cmd, dialect, attack, log_lines):
    server = Server(server_cmd)
    wire = Wire(dialect)
    legit = Legit(server.port, wire)
    legit.start()
    time.sleep(0.1)
    t = threading.Thread(target=quietly, args=(attack, server.port, wire), daemon=True)
    t.start()
    t.join(60)
    legit.stop_flag.set()
    legit.join(10)
    alive = server.proc.poll() is None
    kb = lib.vm_hwm_kb(server.proc.pid)
    hwm = None if kb is None else kb // 1024
    server.stop()
    lines = len(server.err_lines) if log_lines else None
    return {"hwm": hwm, "alive": alive, "ok": legit.ok, "stalled": legit.stalled,
            "slowest_ms": legit.slowest * 1000, "lines": lines, "done": not t.is_alive()}


def launch_failure_time(gculaunch, python, attack, dialect, tmp):
    """Seconds from rank 1's failure to gculaunch's exit, with `attack` on the store."""
    script = os.path.join(tmp, "rank.py")
    with open(script, "w") as f:
        f.write(RANK)
    go, mark = os.path.join(tmp, "go"), os.path.join(tmp, "mark")
    for p in (go, mark):
        if os.path.exists(p):
            os.unlink(p)
    port = lib.free_port()
    proc = subprocess.Popen([gculaunch, "--standalone", "--nproc-per-node", "2", "--device", "cpu",
                             "--master-port", str(port), "--python", python, script, go, mark],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.5)
        if attack is not None:
            threading.Thread(target=quietly, args=(attack, port, Wire(dialect)),
                             daemon=True).start()
            time.sleep(1.0)
        open(go, "w").close()
        proc.wait(60)
        exited = time.time()
        with open(mark) as f:
            failed = float(f.read())
        return exited - failed
    except (subprocess.TimeoutExpired, OSError, ValueError):
        return None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def fmt(r):
    if r is None:
        return "n/a"
    hwm = "%5d MiB" % r["hwm"] if r["hwm"] is not None else "    ? MiB"
    text = "%s %s  legit %4d ok, %2d no answer, slowest %7.1f ms" % (
        hwm, "alive" if r["alive"] else "DEAD ", r["ok"], r["stalled"], r["slowest_ms"])
    if r["lines"] is not None:
        text += ", %d log lines" % r["lines"]
    if not r["done"]:
        text += " (attack timed out)"
    return text


def out_of_time(signum, frame):
    raise TimeoutError("the time budget (%d s) is spent" % TOTAL_BUDGET)


def main():
    torch2_root = os.path.join(lib.CACHE_DIR, "torch2-trixie")
    ap = argparse.ArgumentParser(prog=PROG, description="The store's memory bounds under "
                                 "attack, against torch's TCPStore servers.")
    ap.add_argument("--gculaunch", default=lib.default_gculaunch(),
                    help="the gculaunch binary (GCULAUNCH_BIN; default build/launcher/gculaunch)")
    ap.add_argument("--torch-python", default=lib.PYTHON)
    ap.add_argument("--torch2", nargs="*", help="command that runs the torch 2.x python "
                    "(default: scripts/in_root.sh ROOT /usr/bin/python3 when the cached root "
                    "of scripts/make_torch2_root.sh exists)")
    ap.add_argument("--no-torch2", action="store_true", help="no torch 2.x server")
    ap.add_argument("--no-launch", action="store_true", help="no launch rows")
    args = ap.parse_args()
    lib.require_gculaunch(PROG, args.gculaunch)
    if args.no_torch2:
        args.torch2 = None
    elif args.torch2 is None and os.access(os.path.join(torch2_root, "usr/bin/python3"), os.X_OK):
        args.torch2 = [lib.IN_ROOT, torch2_root, "/usr/bin/python3"]
    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(TOTAL_BUDGET)
    try:
        measure(args)
    except TimeoutError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    return 0


def measure(args):
    servers = [("gculaunch store", [args.gculaunch, "store", "--host", "127.0.0.1", "--port", "0",
                                    "--log-level", "warn"], {"v1", "v2"}, "v2"),
               ("torch 1.13 TCPStore", [args.torch_python, "-c", TORCH_SERVER], {"v1"}, "v1")]
    if args.torch2:
        servers.append(("torch 2.x TCPStore", list(args.torch2) + ["-c", TORCH_SERVER], {"v2"},
                        "v2"))
    print("peak RSS (VmHWM) of the server after each attack; a legit client's SET+GET every "
          "10 ms during it", flush=True)
    for name, attack, dialects in ATTACKS:
        print("\n%s" % name, flush=True)
        for sname, cmd, sdialects, default in servers:
            usable = dialects & sdialects
            if not usable:
                print("  %-20s n/a (the dialect has no such request)" % sname, flush=True)
                continue
            dialect = default if default in usable else sorted(usable)[0]
            try:
                r = run_attack(cmd, dialect, attack, sname == "gculaunch store")
            except Exception as e:  # reported, not fatal
                print("  %-20s failed: %r" % (sname, e), flush=True)
                continue
            print("  %-20s %s" % (sname, fmt(r)), flush=True)
    if args.no_launch:
        return
    print("\nrank failure -> gculaunch exit, 2 ranks, --standalone (one run each)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("no attack", None, "v2")]
        cases += [(n, a, "v2" if "v2" in d else "v1") for n, a, d in ATTACKS]
        for name, attack, dialect in cases:
            t = launch_failure_time(args.gculaunch, args.torch_python, attack, dialect, tmp)
            print("  %-40s %s" % (name, "%.1f ms" % (t * 1000) if t is not None else "TIMEOUT"),
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
