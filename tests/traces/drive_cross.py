#!/usr/bin/env python3
"""A client of one torch version against a TCPStore server of the other, through the
recording proxy (the cross-version recordings).

    drive_cross.py PROXY_PORT CONTROL_PORT

Notes carry ids (`cross.*`).  A 2.x client's handshake is refused by a 1.x server, which
it retries until its timeout; a 1.x client's first request is refused by a 2.x server.
"""
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorder import Control  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

V2 = torch.__version__ >= "2"
TIMEOUT = datetime.timedelta(seconds=5)


def main():
    port, ctl = int(sys.argv[1]), Control(int(sys.argv[2]))

    def step(id, text, fn):
        ctl.note(text, id)
        start = time.monotonic()
        try:
            result = fn()
        except Exception as e:  # refusals are the results here
            ctl.note("EXCEPTION after %.2f s: %s: %s" % (time.monotonic() - start,
                                                         type(e).__name__,
                                                         str(e).splitlines()[0]))
            return None
        ctl.note("RESULT after %.2f s: %r" % (time.monotonic() - start, result))
        return result

    def client(world_size=None):
        kwargs = {"use_libuv": False} if V2 else {}
        return dist.TCPStore("127.0.0.1", port, world_size, False, TIMEOUT, **kwargs)

    ctl.note("CLIENT: torch %s, pid %d, store timeout %d s"
             % (torch.__version__, os.getpid(), TIMEOUT.total_seconds()), "client")
    a = step("cross.client", "a = TCPStore(PORT, world_size=None)", client)
    if a is not None:
        step("cross.set", "a.set('k', 'v')", lambda: a.set("k", "v"))
        step("cross.get", "a.get('k')", lambda: a.get("k"))
        step("cross.num_keys", "a.num_keys()", lambda: a.num_keys())
    step("cross.client_ws", "b = TCPStore(PORT, world_size=2)  # sends ADD 'init/' 1",
         lambda: client(2))
    ctl.note("END")
    return 0


if __name__ == "__main__":
    sys.exit(main())
