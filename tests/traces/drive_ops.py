#!/usr/bin/env python3
"""Drives one ops recording: every store call of the running torch's Python API, then raw
byte requests (queries the API does not expose, handshake variants, error cases), then a
client-side wait timeout, all through the recording proxy.

    drive_ops.py PROXY_PORT CONTROL_PORT [--short]

Each step first sends a note with a stable id (`api.*`, `wake.*`, `raw.*`, ...; unique in
the file), so that the bytes that follow can be found again after a re-recording.
--short does one set and one get (what test_trace_recorder.py checks).
Run by record.sh under the host python (torch 1.13) or the torch 2.6 root's python.
"""
import datetime
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorder import Control  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

V2 = torch.__version__ >= "2"
HOST = "127.0.0.1"
TIMEOUT = datetime.timedelta(seconds=5)

# The wire codes this driver sends by hand.
if V2:
    CODE = {"VALIDATE": 0, "SET": 1, "GET": 3, "ADD": 4, "CHECK": 5, "WAIT": 6,
            "GETNUMKEYS": 7, "DELETE_KEY": 8, "APPEND": 9, "MULTI_GET": 10, "MULTI_SET": 11,
            "CANCEL_WAIT": 12, "PING": 13, "QUEUE_PUSH": 14}
else:
    CODE = {"SET": 0, "GET": 2, "ADD": 3, "CHECK": 4, "WAIT": 5, "GETNUMKEYS": 6,
            "WATCH_KEY": 7, "DELETE_KEY": 8}


def blob(b):
    if isinstance(b, str):
        b = b.encode()
    return struct.pack("<Q", len(b)) + b


def keys(*names):
    return struct.pack("<Q", len(names)) + b"".join(blob(n) for n in names)


def op(name):
    return bytes([CODE[name]])


def handshake(nonce):
    """2.x's VALIDATE (code 0, the magic) and PING (code 13, a nonce), in either dialect."""
    return b"\x00" + struct.pack("<I", 0x3C85F7CE) + b"\x0d" + struct.pack("<I", nonce)


def nodelay(port):
    """Sets TCP_NODELAY on this process's sockets connected to the proxy.  A torch client
    writes one request in several small writes; with Nagle's algorithm the later ones wait
    for the proxy's acknowledgement of the first, and a note sent meanwhile would be
    recorded before the rest of the request.  Only the segmentation changes, not the bytes."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink("/proc/self/fd/" + name).startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            if s.family == socket.AF_INET and s.type == socket.SOCK_STREAM \
                    and s.getpeername() == (HOST, port):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        finally:
            s.close()


class Raw:
    """A plain socket to the proxy for requests the Python API cannot make."""

    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, data):
        self.sock.sendall(data)

    def recv(self, n, timeout=10):
        """Exactly n bytes; raises EOFError when the server closes first."""
        self.sock.settimeout(timeout)
        out = b""
        while len(out) < n:
            data = self.sock.recv(n - len(out))
            if not data:
                raise EOFError("server closed the connection after %d of %d bytes"
                               % (len(out), n))
            out += data
        return out

    def closed_within(self, seconds):
        """True if the server closes the connection within `seconds` (bytes are shown)."""
        self.sock.settimeout(seconds)
        got = b""
        try:
            while True:
                data = self.sock.recv(4096)
                if not data:
                    return True, got
                got += data
        except socket.timeout:
            return False, got
        except ConnectionResetError:
            return True, got

    def close(self):
        self.sock.close()


class Driver:
    def __init__(self, proxy_port, control_port):
        self.port = proxy_port
        self.ctl = Control(control_port)

    def note(self, text, id=None):
        self.ctl.note(text, id)

    def step(self, id, text, fn):
        """Notes the step, runs it and notes its result or exception."""
        self.note(text, id)
        start = time.monotonic()
        try:
            result = fn()
        except Exception as e:  # the store's errors are results here
            self.note("EXCEPTION after %.2f s: %s: %s"
                      % (time.monotonic() - start, type(e).__name__, str(e).splitlines()[0]))
            return e
        self.note("RESULT: %r" % (result,))
        return result

    def client(self, world_size=None):
        kwargs = {"use_libuv": False} if V2 else {}
        store = dist.TCPStore(HOST, self.port, world_size, False, TIMEOUT, **kwargs)
        nodelay(self.port)
        return store

    def later(self, delay, fn):
        """Runs fn on another thread after `delay` seconds; join() the returned thread."""
        def body():
            time.sleep(delay)
            fn()
        t = threading.Thread(target=body)
        t.start()
        return t

    # ---- part 1: the Python API ----

    def api(self):
        self.note("PART api: every store call of torch %s's Python API" % torch.__version__)
        a = self.step("api.client_ws", "a = TCPStore(PORT, world_size=2, is_master=False)",
                      lambda: self.client(2))
        b = self.step("api.client", "b = TCPStore(PORT, world_size=None, is_master=False)",
                      lambda: self.client())
        self.a, self.b = a, b
        s = self.step
        s("api.set", "a.set('key1', 'value1')", lambda: a.set("key1", "value1"))
        s("api.set_bin", "a.set('bin', bytes(range(6)))", lambda: a.set("bin", bytes(range(6))))
        s("api.set_empty", "a.set('empty', '')", lambda: a.set("empty", ""))
        s("api.get", "a.get('key1')  # WAIT, then GET", lambda: a.get("key1"))
        s("api.get_empty", "a.get('empty')", lambda: a.get("empty"))
        s("api.add_create", "a.add('counter', 5)  # creates the key", lambda: a.add("counter", 5))
        s("api.add", "a.add('counter', 3)", lambda: a.add("counter", 3))
        s("api.add_negative", "a.add('counter', -10)", lambda: a.add("counter", -10))
        s("api.add_zero", "a.add('counter', 0)  # reads", lambda: a.add("counter", 0))
        s("api.get_counter", "a.get('counter')  # a decimal string",
          lambda: a.get("counter"))
        s("api.cs_match", "a.compare_set('key1', 'value1', 'value2')",
          lambda: a.compare_set("key1", "value1", "value2"))
        s("api.cs_mismatch", "a.compare_set('key1', 'wrong', 'value3')",
          lambda: a.compare_set("key1", "wrong", "value3"))
        s("api.cs_create", "a.compare_set('cs_new', '', 'created')  # missing key, empty expected",
          lambda: a.compare_set("cs_new", "", "created"))
        s("api.cs_missing", "a.compare_set('cs_missing', 'x', 'y')  # missing key",
          lambda: a.compare_set("cs_missing", "x", "y"))
        if V2:
            s("api.append_create", "a.append('app', 'abc')  # creates the key",
              lambda: a.append("app", "abc"))
            s("api.append", "a.append('app', 'def')", lambda: a.append("app", "def"))
            s("api.get_appended", "a.get('app')", lambda: a.get("app"))
            s("api.multi_set", "a.multi_set(['m1', 'm2'], ['one', 'two'])",
              lambda: a.multi_set(["m1", "m2"], ["one", "two"]))
            s("api.multi_get", "a.multi_get(['m1', 'm2', 'key1'])",
              lambda: a.multi_get(["m1", "m2", "key1"]))
            s("api.multi_get_none", "a.multi_get([])", lambda: a.multi_get([]))
            s("api.check_present", "a.check(['key1', 'counter'])",
              lambda: a.check(["key1", "counter"]))
            s("api.check_absent", "a.check(['key1', 'absent'])",
              lambda: a.check(["key1", "absent"]))
            s("api.check_none", "a.check([])", lambda: a.check([]))
        s("api.wait_present", "a.wait(['key1', 'counter'])", lambda: a.wait(["key1", "counter"]))
        s("api.wait_present_timeout", "a.wait(['key1'], 1 s)",
          lambda: a.wait(["key1"], datetime.timedelta(seconds=1)))
        s("api.wait_none", "a.wait([])", lambda: a.wait([]))
        s("api.num_keys", "a.num_keys()", lambda: a.num_keys())
        s("api.delete", "a.delete_key('key1')", lambda: a.delete_key("key1"))
        s("api.delete_gone", "a.delete_key('key1')  # already gone", lambda: a.delete_key("key1"))
        s("api.num_keys_after_delete", "a.num_keys()", lambda: a.num_keys())
        s("api.set_timeout", "a.set_timeout(7 s)  # client-side only, no bytes",
          lambda: a.set_timeout(datetime.timedelta(seconds=7)))
        s("api.get_after_set_timeout", "a.get('counter')", lambda: a.get("counter"))

    # ---- part 2: writes that wake a parked WAIT ----

    def wakes(self):
        a, b = self.a, self.b
        self.note("PART wake: a blocks in WAIT, b's write 0.3-0.5 s later wakes it (or not)")

        def woken(id, text, call, write, delay=0.3):
            t = self.later(delay, write)
            self.step(id, text, call)
            t.join()

        woken("wake.get", "a.get('late') blocks; b.set('late', 'arrived') wakes it",
              lambda: a.get("late"), lambda: b.set("late", "arrived"), 0.5)
        woken("wake.wait_two", "a.wait(['w1', 'w2']); b sets w1, then w2 0.3 s later",
              lambda: a.wait(["w1", "w2"]),
              lambda: (b.set("w1", "1"), time.sleep(0.3), b.set("w2", "2")))
        woken("wake.add", "a.wait(['via_add'], 2 s); b.add('via_add', 1) creates the key",
              lambda: a.wait(["via_add"], datetime.timedelta(seconds=2)),
              lambda: b.add("via_add", 1))
        if V2:
            woken("wake.append", "a.wait(['via_append'], 2 s); b.append creates the key",
                  lambda: a.wait(["via_append"], datetime.timedelta(seconds=2)),
                  lambda: b.append("via_append", "x"))
            woken("wake.multi_set", "a.wait(['via_mset'], 2 s); b.multi_set creates the key",
                  lambda: a.wait(["via_mset"], datetime.timedelta(seconds=2)),
                  lambda: b.multi_set(["via_mset"], ["x"]))
            woken("wake.compare_set",
                  "a.wait(['via_cs'], 2 s); b.compare_set('via_cs', '', 'x') creates the key:"
                  " does the server wake a?",
                  lambda: a.wait(["via_cs"], datetime.timedelta(seconds=2)),
                  lambda: b.compare_set("via_cs", "", "x"))
            self.step("wake.in_step", "a.num_keys()  # in step after the timeout",
                      lambda: a.num_keys())
            woken("wake.multi_get", "a.multi_get(['m1', 'mg_late']); b.set('mg_late') wakes it",
                  lambda: a.multi_get(["m1", "mg_late"]), lambda: b.set("mg_late", "L"))
            self.step("timeout.set_timeout", "a.set_timeout(1 s)",
                      lambda: a.set_timeout(datetime.timedelta(seconds=1)))
            self.step("timeout.get", "a.get('never_set')  # times out: CANCEL_WAIT",
                      lambda: a.get("never_set"))
            self.step("timeout.multi_get", "a.multi_get(['m1', 'never_set'])  # times out",
                      lambda: a.multi_get(["m1", "never_set"]))
            self.step("timeout.in_step", "a.num_keys()", lambda: a.num_keys())
        else:
            # 1.13 has no CANCEL_WAIT: a's connection would keep a stale reply, so the
            # wait that times out runs on a throw-away client d.
            d = self.step("wake.client_d", "d = TCPStore(PORT)  # throw-away client",
                          lambda: self.client())
            woken("wake.compare_set",
                  "d.wait(['via_cs'], 2 s); b.compare_set('via_cs', '', 'x') creates the key:"
                  " does the server wake d?",
                  lambda: d.wait(["via_cs"], datetime.timedelta(seconds=2)),
                  lambda: b.compare_set("via_cs", "", "x"))
            self.d = d

    # ---- part 3: raw requests ----

    def raw_v1(self):
        b = self.b
        s = self.step
        self.note("PART raw: requests the 1.13 Python API does not make, and error cases")
        r = s("raw.connect", "a raw connection", lambda: Raw(self.port))
        send_reply = lambda data, n: (r.send(data), r.recv(n).hex())[1]  # noqa: E731
        s("raw.check_present", "CHECK ['/counter', '/late'] (both present)",
          lambda: send_reply(op("CHECK") + keys("/counter", "/late"), 1))
        s("raw.check_absent", "CHECK ['/counter', '/absent']",
          lambda: send_reply(op("CHECK") + keys("/counter", "/absent"), 1))
        s("raw.check_none", "CHECK []", lambda: send_reply(op("CHECK") + keys(), 1))
        s("raw.get_init", "GET 'init/' without WAIT (the key exists)",
          lambda: send_reply(op("GET") + blob("init/"), 9))
        s("raw.pipelined", "SET '/pipelined' + GET '/pipelined' + GETNUMKEYS in one write",
          lambda: send_reply(op("SET") + blob("/pipelined") + blob("p") + op("GET")
                             + blob("/pipelined") + op("GETNUMKEYS"), 9 + 8))
        s("raw.split_set", "SET '/slow' in three writes 200 ms apart (code | key | value)",
          lambda: self.split_set(r))
        s("raw.delete", "DELETE_KEY '/slow'",
          lambda: send_reply(op("DELETE_KEY") + blob("/slow"), 8))
        w = s("raw.watch_connect", "a second raw connection", lambda: Raw(self.port))
        s("raw.watch", "WATCH_KEY '/watched' (what 1.x's callback socket sends)",
          lambda: (w.send(op("WATCH_KEY") + blob("/watched")), w.recv(1).hex())[1])
        s("watch.create", "b.set('watched', 'one')  # KEY_CREATED",
          lambda: b.set("watched", "one"))
        s("watch.update", "b.set('watched', 'two')  # KEY_UPDATED",
          lambda: b.set("watched", "two"))
        s("watch.compare_set", "b.compare_set('watched', 'two', 'three')  # KEY_UPDATED",
          lambda: b.compare_set("watched", "two", "three"))
        s("watch.other_key", "b.add('watched_n', 1)  # another key: no event",
          lambda: b.add("watched_n", 1))
        s("watch.delete", "b.delete_key('watched')  # KEY_DELETED",
          lambda: b.delete_key("watched"))
        s("watch.events", "the watch connection's bytes so far",
          lambda: w.closed_within(0.3)[1].hex())
        w.close()
        r.close()
        self.raw_error("raw.unknown_code", "query code 0x09 (none in 1.x)",
                       b"\x09" + blob("/whatever"))
        self.raw_error("raw.get_missing", "GET '/no_such_key' without WAIT",
                       op("GET") + blob("/no_such_key"))
        self.raw_error("raw.add_not_number", "SET '/nan' 'abc', then ADD 1 to it",
                       op("SET") + blob("/nan") + blob("abc") + op("ADD") + blob("/nan")
                       + struct.pack("<q", 1))
        self.raw_error("raw.v2_handshake", "a 2.x client's VALIDATE + PING 1234",
                       handshake(1234))
        s("api.survived", "a.num_keys()  # the store survived the above",
          lambda: self.a.num_keys())

    def split_set(self, r, during=None):
        parts = [op("SET"), blob("/slow"), blob("v")]
        for i, part in enumerate(parts):
            if i:
                time.sleep(0.2)
            r.send(part)
            if i == 0 and during:
                during()
        return "sent"

    def raw_error(self, id, text, data, handshake_first=False, wait=1.0):
        """A new raw connection sends `data`; notes whether the server closed it."""
        def run():
            r = Raw(self.port)
            try:
                if handshake_first:
                    r.send(handshake(4321))
                    r.recv(4)
                r.send(data)
                closed, got = r.closed_within(wait)
                return "%s after %s bytes %s" % ("closed" if closed else "still open",
                                                 len(got), got.hex())
            finally:
                r.close()
        self.step(id, text, run)

    def raw_v2(self):
        b = self.b
        s = self.step
        self.note("PART raw: 2.x requests by hand: handshakes, error cases, CANCEL_WAIT")
        r = s("raw.connect", "a raw connection", lambda: Raw(self.port))
        send_reply = lambda data, n: (r.send(data), r.recv(n).hex())[1]  # noqa: E731
        s("raw.handshake", "VALIDATE + PING 4321", lambda: send_reply(handshake(4321), 4))
        s("raw.check_present", "CHECK ['/counter', '/late'] (both present)",
          lambda: send_reply(op("CHECK") + keys("/counter", "/late"), 1))
        s("raw.check_absent", "CHECK ['/counter', '/absent']",
          lambda: send_reply(op("CHECK") + keys("/counter", "/absent"), 1))
        s("raw.get_init", "GET 'init/' without WAIT (the key exists)",
          lambda: send_reply(op("GET") + blob("init/"), 9))
        s("raw.pipelined", "SET + GET '/pipelined' + GETNUMKEYS + PING 7 in one write",
          lambda: send_reply(op("SET") + blob("/pipelined") + blob("p") + op("GET")
                             + blob("/pipelined") + op("GETNUMKEYS") + op("PING")
                             + struct.pack("<I", 7), 9 + 8 + 4))
        timing = {}

        def num_keys_meanwhile():
            def body():
                start = time.monotonic()
                timing["n"] = b.num_keys()
                timing["s"] = time.monotonic() - start
            t = self.later(0.05, body)
            timing["thread"] = t

        def split():
            self.split_set(r, during=num_keys_meanwhile)
            timing["thread"].join()
            return "b.num_keys() = %s, issued 50 ms after the first byte, took %.2f s" % (
                timing["n"], timing["s"])
        s("raw.split_set", "SET '/slow' in three writes 200 ms apart; b.num_keys() meanwhile:"
          " does a half-received message stall the others?", split)
        s("raw.delete", "DELETE_KEY '/slow'",
          lambda: send_reply(op("DELETE_KEY") + blob("/slow"), 8))
        s("raw.append_multi", "APPEND '/raw_app' 'x' twice, MULTI_SET 2 pairs, MULTI_GET 3 keys",
          lambda: send_reply(op("APPEND") + blob("/raw_app") + blob("x") + op("APPEND")
                             + blob("/raw_app") + blob("x") + op("MULTI_SET")
                             + struct.pack("<Q", 2) + blob("/ms1") + blob("A") + blob("/ms2")
                             + blob("") + op("MULTI_GET") + keys("/raw_app", "/ms1", "/ms2"),
                             10 + 9 + 8))
        s("raw.multi_get_none", "MULTI_GET [] (no reply bytes), then GETNUMKEYS",
          lambda: send_reply(op("MULTI_GET") + keys() + op("GETNUMKEYS"), 8))
        s("raw.cancel_idle", "CANCEL_WAIT with nothing parked",
          lambda: send_reply(op("CANCEL_WAIT"), 1))

        def cancel_parked():
            r.send(op("WAIT") + keys("/cw1"))
            time.sleep(0.3)
            return send_reply(op("CANCEL_WAIT"), 1)
        s("raw.cancel_parked", "WAIT ['/cw1'] (missing), CANCEL_WAIT 0.3 s later", cancel_parked)

        def cancel_late():
            r.send(op("WAIT") + keys("/cw2"))
            time.sleep(0.1)
            b.set("cw2", "x")
            first = r.recv(1).hex()
            return first + " " + send_reply(op("CANCEL_WAIT"), 1)
        s("raw.cancel_late", "WAIT ['/cw2']; b.set('cw2') wakes it; CANCEL_WAIT after that",
          cancel_late)

        def cancel_gone():
            r.send(op("WAIT") + keys("/cw3", "/cw4"))
            time.sleep(0.1)
            b.set("cw3", "x")
            b.num_keys()  # the server has handled b's SET when this returns
            cancelled = send_reply(op("CANCEL_WAIT"), 1)
            b.set("cw4", "x")
            b.num_keys()
            return cancelled + " " + send_reply(op("GETNUMKEYS"), 8)
        s("raw.cancel_gone", "WAIT ['/cw3', '/cw4']; b sets cw3; CANCEL_WAIT; b sets cw4; "
          "GETNUMKEYS: the reply must be the count, no stale STOP_WAITING", cancel_gone)

        def validate_again():
            r.send(op("VALIDATE") + struct.pack("<I", 0x3C85F7CE) + op("GETNUMKEYS"))
            closed, got = r.closed_within(1.0)
            return "%s after %d bytes" % ("closed" if closed else "open", len(got))
        s("raw.validate_again", "VALIDATE again mid-connection, then GETNUMKEYS", validate_again)
        r.close()
        self.raw_error("raw.validate_no_ping", "VALIDATE without PING, then GETNUMKEYS",
                       op("VALIDATE") + struct.pack("<I", 0x3C85F7CE) + op("GETNUMKEYS"))
        self.raw_error("raw.no_handshake_getnumkeys", "first message GETNUMKEYS, no VALIDATE",
                       op("GETNUMKEYS"))
        self.raw_error("raw.no_handshake_ping", "first message PING 99, no VALIDATE",
                       op("PING") + struct.pack("<I", 99))
        self.raw_error("raw.wrong_magic", "VALIDATE with the magic 0x12345678",
                       op("VALIDATE") + struct.pack("<I", 0x12345678))
        self.raw_error("raw.v1_client", "a 1.x client's first request: ADD 'init/' 1 in 1.x "
                       "codes (03 is GET in 2.x)", b"\x03" + blob("init/") + struct.pack("<q", 1))
        self.raw_error("raw.silent", "a connection that sends nothing (a 1.x callback socket)",
                       b"", wait=1.0)
        self.raw_error("raw.get_missing", "GET '/no_such_key' without WAIT",
                       op("GET") + blob("/no_such_key"), handshake_first=True)
        self.raw_error("raw.multi_get_missing", "MULTI_GET ['/m1', '/no_such_key'] without WAIT",
                       op("MULTI_GET") + keys("/m1", "/no_such_key"), handshake_first=True)
        self.raw_error("raw.add_not_number", "SET '/nan' 'abc', then ADD 1 to it",
                       op("SET") + blob("/nan") + blob("abc") + op("ADD") + blob("/nan")
                       + struct.pack("<q", 1), handshake_first=True)
        self.raw_error("raw.queue_push", "QUEUE_PUSH '/q' 'v' (code 0x0E, torch 2.8+)",
                       op("QUEUE_PUSH") + blob("/q") + blob("v"), handshake_first=True)
        self.raw_error("raw.unknown_code", "query code 0xFF", b"\xff", handshake_first=True)
        s("api.survived", "a.num_keys()  # the store survived the above",
          lambda: self.a.num_keys())

    # ---- part 4: a wait that times out on the client ----

    def stale(self):
        b = self.b
        self.note("PART stale: a wait that times out on the client, then the key appears")
        c = self.step("stale.client", "c = TCPStore(PORT)", lambda: self.client())
        self.step("stale.wait_timeout", "c.wait(['never'], 1 s)  # times out on the client",
                  lambda: c.wait(["never"], datetime.timedelta(seconds=1)))
        self.step("stale.set", "b.set('never', 'now')", lambda: b.set("never", "now"))
        self.step("stale.num_keys", "c.num_keys()%s" % (
            "" if V2 else "  # 1.13 reads the stale STOP_WAITING byte first"),
            lambda: c.num_keys())
        self.step("stale.num_keys_again", "c.num_keys()", lambda: c.num_keys())

    def short(self):
        self.note("PART short: one set and one get")
        a = self.step("short.client", "a = TCPStore(PORT)", lambda: self.client())
        self.step("short.set", "a.set('short_key', 'short_value')",
                  lambda: a.set("short_key", "short_value"))
        self.step("short.get", "a.get('short_key')", lambda: a.get("short_key"))


def main():
    if len(sys.argv) < 3:
        print("usage: drive_ops.py PROXY_PORT CONTROL_PORT [--short]", file=sys.stderr)
        return 2
    d = Driver(int(sys.argv[1]), int(sys.argv[2]))
    d.note("CLIENT: torch %s, pid %d (2.x clients send it as the PING nonce)"
           % (torch.__version__, os.getpid()), "client")
    if "--short" in sys.argv[3:]:
        d.short()
    else:
        d.api()
        d.wakes()
        d.raw_v2() if V2 else d.raw_v1()
        d.stale()
    d.note("END")
    return 0


if __name__ == "__main__":
    sys.exit(main())
