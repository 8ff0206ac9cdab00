#!/usr/bin/env python3
"""Recording proxy for TCPStore traffic, and the tools around it (tests/traces/README.md).

    recorder.py proxy --upstream HOST:PORT --out FILE.jsonl --decode v1|v2 [--ready FILE]
        Listens on 127.0.0.1 (an ephemeral port), forwards every accepted connection to
        the upstream TCPStore server and writes one JSON record per event to FILE.  A
        second loopback port takes notes from the drivers (the control channel).  Writes
        "PORT CONTROL_PORT" to --ready (or stdout) once both listen.  Ends on an "end"
        control command, SIGTERM or SIGINT.
    recorder.py server [--ready FILE]
        A real TCPStore server of the running python's torch (the only sub-command that
        imports torch), on an ephemeral port that it writes to --ready (or stdout).  Runs
        until SIGTERM or SIGINT.
    recorder.py note --control PORT [--id ID] TEXT...
        Sends one note to a running proxy and waits until it is recorded.
    recorder.py end --control PORT
        Stops a running proxy after it has written everything.
    recorder.py decode FILE.jsonl [--chunks]
        Prints the human-readable form of a trace (what the .txt companions hold).

Standard library only (torch only in `server`); runs under the host python (torch 1.13)
and the torch 2.6 root's python alike.
"""
import argparse
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

FORMAT = "gculaunch-tcpstore-trace/1"
VALIDATE_MAGIC = 0x3C85F7CE

# Query tables: code -> (name, request fields).  Field kinds: "key", "value" (a u64 length
# and bytes), "i64", "u32", "keys" (u64 n, then n keys), "items" (u64 n, then n key/value
# pairs).
V1_OPS = {
    0: ("SET", ["key", "value"]),
    1: ("COMPARE_SET", ["key", "expected", "desired"]),
    2: ("GET", ["key"]),
    3: ("ADD", ["key", "delta"]),
    4: ("CHECK", ["keys"]),
    5: ("WAIT", ["keys"]),
    6: ("GETNUMKEYS", []),
    7: ("WATCH_KEY", ["key"]),
    8: ("DELETE_KEY", ["key"]),
}
V2_OPS = {
    0: ("VALIDATE", ["magic"]),
    1: ("SET", ["key", "value"]),
    2: ("COMPARE_SET", ["key", "expected", "desired"]),
    3: ("GET", ["key"]),
    4: ("ADD", ["key", "delta"]),
    5: ("CHECK", ["keys"]),
    6: ("WAIT", ["keys"]),
    7: ("GETNUMKEYS", []),
    8: ("DELETE_KEY", ["key"]),
    9: ("APPEND", ["key", "value"]),
    10: ("MULTI_GET", ["keys"]),
    11: ("MULTI_SET", ["items"]),
    12: ("CANCEL_WAIT", []),
    13: ("PING", ["nonce"]),
    14: ("QUEUE_PUSH", ["key", "value"]),
    16: ("QUEUE_LEN", ["key"]),
}
TABLES = {"v1": V1_OPS, "v2": V2_OPS}

# What the server sends back for each request: "none", "u8", "i64", "u32", "blob", "blobs"
# (one blob per key of the request) or "watch" (a u8, then pushed key events).
REPLY = {
    "VALIDATE": "none", "SET": "none", "APPEND": "none", "MULTI_SET": "none",
    "QUEUE_PUSH": "none", "COMPARE_SET": "blob", "GET": "blob", "ADD": "i64",
    "GETNUMKEYS": "i64", "DELETE_KEY": "i64", "QUEUE_LEN": "i64", "CHECK": "u8",
    "WAIT": "u8", "CANCEL_WAIT": "u8", "PING": "u32", "MULTI_GET": "blobs",
    "WATCH_KEY": "watch",
}
U8_NAMES = {
    "CHECK": {0: "READY", 1: "NOT_READY"},
    "WAIT": {0: "STOP_WAITING", 1: "WAIT_CANCELED"},
    "CANCEL_WAIT": {0: "STOP_WAITING", 1: "WAIT_CANCELED"},
    "WATCH_KEY": {3: "KEY_CALLBACK_REGISTERED"},
}
WATCH_EVENTS = {0: "KEY_UPDATED", 1: "KEY_CREATED", 2: "KEY_DELETED"}
# A length prefix above this is not a real key or value: the bytes are not this dialect.
MAX_PLAUSIBLE_LENGTH = 1 << 30


def text_or_hex(data):
    """A blob as JSON: {"len", "text"} when it is printable ASCII, else {"len", "hex"}."""
    try:
        text = data.decode("ascii")
        if text.isprintable():
            return {"len": len(data), "text": text}
    except UnicodeDecodeError:
        pass
    return {"len": len(data), "hex": data.hex()}


class Reader:
    """Pulls fields off the front of a byte buffer; raises Short when it ends too soon."""

    class Short(Exception):
        pass

    class Bad(Exception):
        pass

    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise Reader.Short()
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def u8(self):
        return self.take(1)[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def i64(self):
        return struct.unpack("<q", self.take(8))[0]

    def blob(self):
        length = self.u64()
        if length > MAX_PLAUSIBLE_LENGTH:
            raise Reader.Bad("implausible length prefix %d" % length)
        return self.take(length)

    def count(self):
        n = self.u64()
        if n > MAX_PLAUSIBLE_LENGTH:
            raise Reader.Bad("implausible count %d" % n)
        return n


class StreamDecoder:
    """Decodes one connection: requests from the client bytes in one dialect, replies from
    the server bytes by pairing them with the requests still unanswered.  Decoding of a
    direction stops for good at the first bytes that make no sense (an "error" record)."""

    def __init__(self, dialect):
        self.table = TABLES[dialect]
        self.c2s = bytearray()
        self.s2c = bytearray()
        self.c2s_dead = False
        self.s2c_dead = False
        self.pending = []  # [op name, number of keys] per request awaiting a reply
        self.watching = False

    def feed_c2s(self, data):
        """Returns new records (without seq/t/conn) for the client bytes `data`."""
        self.c2s += data
        out = []
        while self.c2s and not self.c2s_dead:
            r = Reader(self.c2s)
            try:
                code = r.u8()
                if code not in self.table:
                    raise Reader.Bad("unknown query code 0x%02x" % code)
                name, fields = self.table[code]
                values = {}
                nkeys = 0
                for field in fields:
                    if field in ("key", "value", "expected", "desired"):
                        values[field] = text_or_hex(r.blob())
                    elif field == "delta":
                        values[field] = r.i64()
                    elif field == "magic":
                        magic = r.u32()
                        values["magic"] = "0x%08X" % magic
                        values["magic_ok"] = magic == VALIDATE_MAGIC
                    elif field == "nonce":
                        values["nonce"] = r.u32()
                    elif field == "keys":
                        n = r.count()
                        values["keys"] = [text_or_hex(r.blob()) for _ in range(n)]
                        nkeys = n
                    elif field == "items":
                        n = r.count()
                        items = []
                        for _ in range(n):
                            key = r.blob()
                            items.append({"key": text_or_hex(key), "value": text_or_hex(r.blob())})
                        values["items"] = items
            except Reader.Short:
                break
            except Reader.Bad as e:
                out.append({"kind": "error", "dir": "c2s", "text": str(e),
                            "hex": bytes(self.c2s).hex()})
                self.c2s_dead = True
                break
            raw = bytes(self.c2s[:r.pos])
            del self.c2s[:r.pos]
            out.append({"kind": "msg", "dir": "c2s", "op": name, "code": code, "fields": values,
                        "hex": raw.hex()})
            if REPLY.get(name, "none") != "none":
                self.pending.append([name, nkeys])
        return out

    def _reply(self, r):
        """Decodes one reply at the reader's position; returns (op, reply_to, fields)."""
        if self.watching:
            kind = r.u8()
            fields = {"type": kind, "key": text_or_hex(r.blob()), "old": text_or_hex(r.blob()),
                      "new": text_or_hex(r.blob())}
            return WATCH_EVENTS.get(kind, "WATCH_EVENT_%d" % kind), None, fields
        if not self.pending:
            raise Reader.Bad("server bytes with no request awaiting a reply")
        name, nkeys = self.pending[0]
        shape = REPLY[name]
        if name == "WAIT" and len(self.pending) > 1 and self.pending[1][0] == "CANCEL_WAIT":
            # A cancelled WAIT gets no reply of its own unless it was woken before the
            # CANCEL_WAIT arrived: STOP_WAITING (0) belongs to the WAIT, 1 to the cancel.
            value = r.u8()
            if value == 1:
                self.pending.pop(0)
                name = "CANCEL_WAIT"
            return U8_NAMES[name].get(value, "U8"), name, {"value": value}
        if shape == "u8" or shape == "watch":
            value = r.u8()
            if shape == "watch":
                self.watching = True
            return U8_NAMES.get(name, {}).get(value, "U8"), name, {"value": value}
        if shape == "i64":
            return "INT64", name, {"value": r.i64()}
        if shape == "u32":
            return "UINT32", name, {"value": r.u32()}
        if shape == "blob":
            return "VALUE", name, {"value": text_or_hex(r.blob())}
        values = [text_or_hex(r.blob()) for _ in range(nkeys)]
        return "VALUES", name, {"values": values}

    def feed_s2c(self, data):
        self.s2c += data
        out = []
        while self.s2c and not self.s2c_dead:
            # A MULTI_GET of zero keys has a reply of zero bytes: it is complete at once.
            while self.pending and self.pending[0] == ["MULTI_GET", 0]:
                self.pending.pop(0)
                out.append({"kind": "msg", "dir": "s2c", "op": "VALUES",
                            "fields": {"values": []}, "hex": "", "reply_to": "MULTI_GET"})
            r = Reader(self.s2c)
            try:
                op, reply_to, fields = self._reply(r)
            except Reader.Short:
                break
            except Reader.Bad as e:
                out.append({"kind": "error", "dir": "s2c", "text": str(e),
                            "hex": bytes(self.s2c).hex()})
                self.s2c_dead = True
                break
            raw = bytes(self.s2c[:r.pos])
            del self.s2c[:r.pos]
            if reply_to is not None:
                self.pending.pop(0)
            rec = {"kind": "msg", "dir": "s2c", "op": op, "fields": fields, "hex": raw.hex()}
            if reply_to is not None:
                rec["reply_to"] = reply_to
            out.append(rec)
        return out

    def leftovers(self):
        """Records for bytes left undecoded at the end of the connection."""
        out = []
        if self.c2s and not self.c2s_dead:
            out.append({"kind": "error", "dir": "c2s", "text": "incomplete message at the end",
                        "hex": bytes(self.c2s).hex()})
        if self.s2c and not self.s2c_dead:
            out.append({"kind": "error", "dir": "s2c", "text": "incomplete message at the end",
                        "hex": bytes(self.s2c).hex()})
        return out

    def unanswered(self):
        return [name for name, nkeys in self.pending if [name, nkeys] != ["MULTI_GET", 0]]


# ---------------------------------------------------------------------------------------
# proxy


class Proxy:
    # After forwarding a client chunk, chunks of *other* clients wait until the server
    # answered this one or SETTLE seconds passed: the server then sees the chunks in the
    # order the trace records them, which is what a replay assumes.
    SETTLE = 0.02
    QUIET = 0.01  # before a note: no client bytes for this long
    UPSTREAM_TRIES = 40  # connecting to the server: 40 tries, 0.25 s apart

    def __init__(self, upstream, out_path, dialect):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.dialect = dialect
        self.out = open(out_path, "w")
        self.seq = 0
        self.start = time.monotonic()
        self.sel = selectors.DefaultSelector()
        self.listener = self._listen()
        self.control = self._listen()
        self.sel.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.sel.register(self.control, selectors.EVENT_READ, ("control-accept", None))
        self.conns = {}  # id -> dict
        self.next_conn = 1
        self.settle_conn = None
        self.settle_until = 0.0
        self.running = True
        self.write({"kind": "meta", "format": FORMAT, "decode": dialect,
                    "upstream": "%s:%d" % self.upstream})

    @staticmethod
    def _listen():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        s.setblocking(False)
        return s

    def write(self, rec, conn=None):
        self.seq += 1
        full = {"seq": self.seq, "t": round(time.monotonic() - self.start, 6)}
        full["kind"] = rec.pop("kind")
        if conn is not None:
            full["conn"] = conn
        full.update(rec)
        self.out.write(json.dumps(full) + "\n")
        self.out.flush()

    def _connect_upstream(self):
        for attempt in range(self.UPSTREAM_TRIES):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.connect(self.upstream)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
                return s
            except OSError:
                s.close()
                if attempt + 1 < self.UPSTREAM_TRIES:
                    time.sleep(0.25)
        return None

    def accept(self):
        try:
            client, peer = self.listener.accept()
        except BlockingIOError:  # a drain() accepted it already
            return
        client.setblocking(True)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        cid = self.next_conn
        self.next_conn += 1
        self.write({"kind": "open", "peer": "%s:%d" % peer}, cid)
        server = self._connect_upstream()
        if server is None:
            self.write({"kind": "close", "side": "proxy",
                        "text": "the upstream server refused every connection attempt"}, cid)
            client.close()
            return
        self.conns[cid] = {"client": client, "server": server,
                           "decoder": StreamDecoder(self.dialect)}
        self.sel.register(client, selectors.EVENT_READ, ("c2s", cid))
        self.sel.register(server, selectors.EVENT_READ, ("s2c", cid))

    def close_conn(self, cid, side):
        c = self.conns.pop(cid)
        for rec in c["decoder"].leftovers():
            self.write(rec, cid)
        rec = {"kind": "close", "side": side}
        unanswered = c["decoder"].unanswered()
        if unanswered:
            rec["unanswered"] = unanswered
        self.write(rec, cid)
        for s in (c["client"], c["server"]):
            self.sel.unregister(s)
            s.close()
        if self.settle_conn == cid:
            self.settle_conn = None

    def relay(self, direction, cid):
        c = self.conns.get(cid)
        if c is None:
            return
        src, dst = (c["client"], c["server"]) if direction == "c2s" else (c["server"], c["client"])
        try:
            # Never block: a drain() for a note may have read this socket after select()
            # reported it readable.
            data = src.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:  # a reset counts as a close
            data = b""
        try:
            # Acknowledge at once: a client with Nagle's algorithm on holds its next small
            # write until the last one is acknowledged, which would let a note overtake it.
            src.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        except OSError:
            pass
        if not data:
            self.close_conn(cid, "client" if direction == "c2s" else "server")
            return
        self.write({"kind": "chunk", "dir": direction, "len": len(data), "hex": data.hex()}, cid)
        decoder = c["decoder"]
        for rec in (decoder.feed_c2s(data) if direction == "c2s" else decoder.feed_s2c(data)):
            self.write(rec, cid)
        try:
            dst.sendall(data)
        except OSError:
            # The other side is gone; its EOF (or reset) is recorded when it is read.
            pass
        if direction == "c2s":
            self.settle_conn = cid
            self.settle_until = time.monotonic() + self.SETTLE
        elif self.settle_conn == cid:
            self.settle_conn = None

    def drain(self):
        """Relays everything already readable (and accepts pending connections).  Run before
        a note is written: bytes a driver sent before it asked for the note are then
        recorded before the note."""
        for _ in range(10000):
            # A client that split a request into several writes may still have the rest in
            # flight (Nagle's algorithm releases it on our acknowledgement): wait for a
            # short quiet period, not just for what is readable this instant.
            ready = [k for k, _ in self.sel.select(self.QUIET)
                     if k.data[0] in ("accept", "c2s", "s2c")]
            if not ready:
                return
            for key in ready:
                what, cid = key.data
                if what == "accept":
                    self.accept()
                    continue
                if what == "c2s" and self.settle_conn not in (None, cid):
                    time.sleep(max(0.0, self.settle_until - time.monotonic()))
                    self.settle_conn = None
                self.relay(what, cid)

    def control_line(self, sock, line):
        try:
            cmd = json.loads(line)
        except ValueError:
            sock.sendall(b"error: not JSON\n")
            return
        if "note" in cmd:
            self.drain()
            rec = {"kind": "note"}
            if cmd.get("id"):
                rec["id"] = cmd["id"]
            rec["text"] = cmd["note"]
            self.write(rec)
        if cmd.get("end"):
            self.running = False
        sock.sendall(b"ok\n")

    def run(self):
        buffers = {}
        while self.running:
            now = time.monotonic()
            settling = self.settle_conn is not None and now < self.settle_until
            timeout = (self.settle_until - now) if settling else 1.0
            held = False
            for key, _ in self.sel.select(timeout):
                what, cid = key.data
                if what == "accept":
                    self.accept()
                elif what == "control-accept":
                    s, _ = self.control.accept()
                    buffers[s] = b""
                    self.sel.register(s, selectors.EVENT_READ, ("control", None))
                elif what == "control":
                    data = key.fileobj.recv(65536)
                    if not data:
                        self.sel.unregister(key.fileobj)
                        buffers.pop(key.fileobj, None)
                        key.fileobj.close()
                        continue
                    buffers[key.fileobj] += data
                    while b"\n" in buffers[key.fileobj]:
                        line, buffers[key.fileobj] = buffers[key.fileobj].split(b"\n", 1)
                        self.control_line(key.fileobj, line)
                elif what == "c2s":
                    # Hold other clients' bytes while the last forwarded chunk settles.
                    if (self.settle_conn not in (None, cid)
                            and time.monotonic() < self.settle_until):
                        held = True
                        continue
                    self.relay("c2s", cid)
                else:
                    self.relay("s2c", cid)
            if held:
                time.sleep(0.001)  # the held socket stays readable: do not spin
            if self.settle_conn is not None and time.monotonic() >= self.settle_until:
                self.settle_conn = None
        # Whatever is still in flight: drain briefly, then record the remaining connections
        # as ended by the proxy.
        deadline = time.monotonic() + 0.3
        while self.conns and time.monotonic() < deadline:
            for key, _ in self.sel.select(0.05):
                what, cid = key.data
                if what in ("c2s", "s2c"):
                    self.relay(what, cid)
        for cid in sorted(self.conns):
            self.close_conn(cid, "proxy")
        self.write({"kind": "end"})
        self.out.close()

    def stop(self, *_):
        self.running = False


def cmd_proxy(args):
    import faulthandler
    faulthandler.register(signal.SIGUSR1)  # record.sh asks for a stack dump when a driver fails
    proxy = Proxy(args.upstream, args.out, args.decode)
    signal.signal(signal.SIGTERM, proxy.stop)
    signal.signal(signal.SIGINT, proxy.stop)
    ready("%d %d" % (proxy.listener.getsockname()[1], proxy.control.getsockname()[1]),
          args.ready)
    proxy.run()
    return 0


def ready(text, path):
    """Announces a listening port: atomically into `path`, or as stdout's first line."""
    if path:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.rename(tmp, path)
    else:
        print(text, flush=True)


# ---------------------------------------------------------------------------------------
# control-channel client (imported by the drivers)


class Control:
    """A driver's end of the control channel: note() returns once the proxy recorded it."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
        self.buf = b""

    def _send(self, cmd):
        self.sock.sendall(json.dumps(cmd).encode() + b"\n")
        while b"\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise RuntimeError("the proxy closed the control channel")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        if line != b"ok":
            raise RuntimeError("proxy: %s" % line.decode(errors="replace"))

    def note(self, text, id=None):
        cmd = {"note": text}
        if id:
            cmd["id"] = id
        self._send(cmd)

    def end(self):
        self._send({"end": True})


def cmd_note(args):
    Control(args.control).note(" ".join(args.text), args.id)
    return 0


def cmd_end(args):
    Control(args.control).end()
    return 0


# ---------------------------------------------------------------------------------------
# a real server


def cmd_server(args):
    import datetime
    import threading

    import torch
    import torch.distributed as dist

    kwargs = {"wait_for_workers": False}
    backend = "classic"
    if torch.__version__ >= "2":
        # Debian's torch 2.x has no libuv: the classic backend is the only one.
        kwargs["use_libuv"] = False
    store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60), **kwargs)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    ready("%d torch %s %s" % (store.port, torch.__version__, backend), args.ready)
    stop.wait()
    return 0


# ---------------------------------------------------------------------------------------
# human-readable form


def show_blob(b):
    if "text" in b:
        return repr(b["text"])
    return "0x" + b["hex"]


def show_fields(fields):
    parts = []
    for name, value in fields.items():
        if isinstance(value, dict) and "len" in value:
            parts.append("%s=%s" % (name, show_blob(value)))
        elif isinstance(value, list):
            if value and isinstance(value[0], dict) and "key" in value[0]:
                parts.append("%s=[%s]" % (name, ", ".join(
                    "%s: %s" % (show_blob(i["key"]), show_blob(i["value"])) for i in value)))
            else:
                parts.append("%s=[%s]" % (name, ", ".join(show_blob(v) for v in value)))
        else:
            parts.append("%s=%s" % (name, value))
    return " ".join(parts)


def short_hex(h, limit=96):
    return h if len(h) <= limit else h[:limit] + "...(%d bytes)" % (len(h) // 2)


def cmd_decode(args):
    with open(args.file) as f:
        records = [json.loads(line) for line in f if line.strip()]
    records.sort(key=lambda r: r["seq"])
    for r in records:
        kind = r["kind"]
        conn = "[conn %s] " % r["conn"] if "conn" in r else ""
        if kind == "meta":
            print("==== %s, decoded as %s, upstream %s" % (r["format"], r["decode"], r["upstream"]))
        elif kind == "note":
            print("---- %s%s" % ("[%s] " % r["id"] if r.get("id") else "", r["text"]))
        elif kind == "open":
            print("%sopen from %s" % (conn, r["peer"]))
        elif kind == "close":
            extra = ""
            if r.get("unanswered"):
                extra = " (unanswered: %s)" % ", ".join(r["unanswered"])
            print("%sclosed by the %s%s" % (conn, r["side"], extra))
        elif kind == "chunk":
            if args.chunks:
                print("%s%s chunk %d bytes: %s" % (conn, r["dir"], r["len"], short_hex(r["hex"])))
        elif kind == "msg":
            arrow = "->" if r["dir"] == "c2s" else "<-"
            reply = " (reply to %s)" % r["reply_to"] if r.get("reply_to") else ""
            print("%s%s %s%s %s   hex=%s" % (conn, arrow, r["op"], reply, show_fields(r["fields"]),
                                             short_hex(r["hex"])))
        elif kind == "error":
            print("%s%s !! %s: %s" % (conn, r["dir"], r["text"], short_hex(r["hex"])))
        elif kind == "end":
            print("==== end")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("proxy")
    p.add_argument("--upstream", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--decode", choices=sorted(TABLES), required=True)
    p.add_argument("--ready")
    p = sub.add_parser("server")
    p.add_argument("--ready")
    p = sub.add_parser("note")
    p.add_argument("--control", required=True)
    p.add_argument("--id")
    p.add_argument("text", nargs="+")
    p = sub.add_parser("end")
    p.add_argument("--control", required=True)
    p = sub.add_parser("decode")
    p.add_argument("file")
    p.add_argument("--chunks", action="store_true")
    args = parser.parse_args()
    return {"proxy": cmd_proxy, "server": cmd_server, "note": cmd_note, "end": cmd_end,
            "decode": cmd_decode}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
