"""A line-oriented driver for real torch.distributed.TCPStore clients.

Runs inside the Python that has torch (Debian's 1.13 on the host, or 2.6 in the cached
torch 2.6 root that gltest.torch2_python() provides) and lets a test orchestrate any
number of client objects step by step.  Commands arrive on stdin as JSON lines, results
leave on stdout as JSON lines, each carrying the command's "id":

  {"id": 1, "cmd": "open", "name": "a", "world_size": 2, "timeout": 10}
  {"id": 2, "cmd": "call", "name": "a", "method": "set", "args": ["k", "v"]}
  {"id": 3, "cmd": "call", "name": "a", "method": "wait", "args": [["k"], {"seconds": 1}],
   "async": true}                      # runs in a thread; the result comes when it ends
  {"id": 4, "cmd": "version"}
  {"id": 5, "cmd": "exit"}

Arguments: {"hex": "..."} is bytes, {"seconds": n} a timedelta.  Results:
{"id", "ok": true, "result", "elapsed"} or {"id", "ok": false, "error": "Type: message"};
bytes come back as {"hex": "..."}.

    python3 store_repl.py HOST PORT
"""
import datetime
import json
import sys
import threading
import time

import torch
import torch.distributed as dist

V2 = not torch.__version__.startswith("1.")
_out_lock = threading.Lock()
_stores = {}


def emit(obj):
    with _out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def decode(arg):
    if isinstance(arg, dict):
        if "hex" in arg:
            return bytes.fromhex(arg["hex"])
        if "seconds" in arg:
            return datetime.timedelta(seconds=arg["seconds"])
    if isinstance(arg, list):
        return [decode(a) for a in arg]
    return arg


def encode(value):
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def run(cmd, host, port):
    started = time.monotonic()
    try:
        if cmd["cmd"] == "open":
            extra = {"use_libuv": False} if V2 else {}
            _stores[cmd["name"]] = dist.TCPStore(
                host, port, cmd.get("world_size"), False,
                datetime.timedelta(seconds=cmd.get("timeout", 10)), **extra)
            result = None
        elif cmd["cmd"] == "call":
            store = _stores[cmd["name"]]
            args = [decode(a) for a in cmd.get("args", [])]
            result = getattr(store, cmd["method"])(*args)
        elif cmd["cmd"] == "version":
            result = torch.__version__
        else:
            raise ValueError("unknown command %r" % cmd["cmd"])
        return {"id": cmd["id"], "ok": True, "result": encode(result),
                "elapsed": time.monotonic() - started}
    except Exception as e:  # reported to the test, which decides
        return {"id": cmd["id"], "ok": False, "error": "%s: %s" % (type(e).__name__, e),
                "elapsed": time.monotonic() - started}


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        if cmd["cmd"] == "exit":
            emit({"id": cmd["id"], "ok": True, "result": None})
            break
        if cmd.get("async"):
            threading.Thread(target=lambda c=cmd: emit(run(c, host, port)), daemon=True).start()
        else:
            emit(run(cmd, host, port))
    sys.stdout.flush()
    # Leave at once: async calls may still be blocked in the server, on purpose.
    import os
    os._exit(0)


if __name__ == "__main__":
    main()
