#!/usr/bin/env python3
"""The torch side of bench/store.py (runs in a Python with torch 1.13).

    store_torch.py server --host H
        torch's own TCPStore server (is_master=True) on a free port; prints
        "listening on H:PORT" and serves until stdin closes.

    store_torch.py clients --host H --port P --clients T
        T real torch.distributed.TCPStore clients, one thread each, speaking the
        same line protocol as bench/store/store_load.cc:
          {"event": "connected", ...} once all T are constructed, then for each
          stdin line: "mix R", "barrier KEY N" or "exit".
        A mix cycle is  set k; get k; add c 1; wait [k]  -- on the wire that is
        SET, WAIT+GET, ADD, WAIT: 5 requests, 4 timed operations.
"""
import argparse
import datetime
import json
import os
import resource
import sys
import threading
import time

import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=300)


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve(host):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    store = dist.TCPStore(host, 0, None, True, TIMEOUT, wait_for_workers=False)
    print("listening on %s:%d" % (host, store.port), flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    del store


def run_threads(count, target):
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def clients(host, port, count):
    stores = [None] * count
    failed = []

    def connect(i):
        try:
            stores[i] = dist.TCPStore(host, port, None, False, TIMEOUT)
        except Exception as e:  # reported, counted
            failed.append(repr(e))

    t_begin = time.monotonic()
    run_threads(count, connect)
    emit({"event": "connected", "t_begin": t_begin, "t_end": time.monotonic(),
          "failed": len(failed)})
    if failed:
        print("store_torch: connect failed: %s" % failed[0], file=sys.stderr)
    live = [s for s in stores if s is not None]
    tag = "%d" % os.getpid()
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "exit":
            break
        if words[0] == "mix":
            rounds = int(words[1])
            lat = [[] for _ in live]
            errors = []

            def mix(i):
                s, out = live[i], lat[i]
                key, counter = "bench/%s-%d" % (tag, i), "bench/n/%s-%d" % (tag, i)
                clock = time.perf_counter
                try:
                    for r in range(rounds):
                        t0 = clock()
                        s.set(key, "value-%d" % r)
                        t1 = clock()
                        s.get(key)
                        t2 = clock()
                        s.add(counter, 1)
                        t3 = clock()
                        s.wait([key])
                        t4 = clock()
                        out.extend((int((t1 - t0) * 1e6), int((t2 - t1) * 1e6),
                                    int((t3 - t2) * 1e6), int((t4 - t3) * 1e6)))
                except Exception as e:
                    errors.append(repr(e))

            t_begin = time.monotonic()
            run_threads(len(live), mix)
            t_end = time.monotonic()
            emit({"event": "mix", "requests": 5 * rounds * len(live),
                  "ops": 4 * rounds * len(live), "failed": len(errors), "t_begin": t_begin,
                  "t_end": t_end, "latencies_us": [x for l in lat for x in l]})
        elif words[0] == "barrier":
            key, total = words[1], int(words[2])
            ends = []
            errors = []

            def barrier(i):
                s = live[i]
                try:
                    if s.add(key, 1) == total:
                        s.set(key + "/go", "1")
                    s.wait([key + "/go"])
                    ends.append(time.monotonic())
                except Exception as e:
                    errors.append(repr(e))

            run_threads(len(live), barrier)
            emit({"event": "barrier", "t_end": max(ends) if ends else 0.0,
                  "failed": len(errors), "requests": 2 * len(live) + 1})
        else:
            emit({"event": "error", "message": "unknown command %r" % words[0]})
    sys.stdout.flush()
    os._exit(0)  # skip TCPStore destructors of hundreds of clients


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["server", "clients"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--clients", type=int, default=1)
    a = p.parse_args()
    if a.mode == "server":
        serve(a.host)
    else:
        clients(a.host, a.port, a.clients)


if __name__ == "__main__":
    main()
