#!/usr/bin/env python3
"""One rank of the gloo recordings: init_process_group("gloo", init_method="env://"),
an all_reduce, a barrier, destroy_process_group.  RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT come from the environment (record.sh sets them; with
TORCHELASTIC_USE_AGENT_STORE=True every rank is a client of an external store, as under
torchrun's agent or gculaunch).  Prints one line with the all_reduce result.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def without_libuv():
    """Debian's torch 2.x has no libuv, and TCPStore() then raises unless it is given
    use_libuv=False, clients included.  init_process_group's agent-store path never passes
    the flag (only the rank-0-hosted path reads USE_LIBUV), so the rendezvous module's
    TCPStore gets False as its default here.  A client sends the same bytes either way."""
    import importlib
    # (`import torch.distributed.rendezvous as m` gives the function of that name)
    rendezvous = importlib.import_module("torch.distributed.rendezvous")
    real = rendezvous.TCPStore

    def tcp_store(*args, **kwargs):
        kwargs.setdefault("use_libuv", False)
        return real(*args, **kwargs)
    rendezvous.TCPStore = tcp_store


def main():
    if torch.__version__ >= "2" and os.environ.get("USE_LIBUV") == "0":
        without_libuv()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=60))
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    dist.barrier()
    expected = world * (world + 1) / 2
    dist.destroy_process_group()
    print("rank %d: all_reduce %s (expected %s)" % (rank, t.item(), expected), flush=True)
    return 0 if t.item() == expected else 1


if __name__ == "__main__":
    sys.exit(main())
