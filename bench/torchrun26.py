#!/usr/bin/python3
"""torchrun of Debian's torch 2.6 (python3-torch in trixie, for example in the root of
scripts/make_torch2_root.sh), made to start on that build, which has no libuv.

    USE_LIBUV=0 scripts/in_root.sh ROOT /usr/bin/python3 bench/torchrun26.py [torchrun arguments...]
    (from the top of the repository, so that in_root.sh shows this file inside ROOT;
    from elsewhere add IN_ROOT_BINDS=/path/to/bench)

Every TCPStore that torchrun 2.6 makes for its rendezvous (c10d or static) is created
without a use_libuv argument, and the binding's default is use_libuv=True, which on a
build without libuv raises "use_libuv was requested but PyTorch was build without libuv
support" before any worker starts; USE_LIBUV=0 does not help, torch reads it only in a
few other places.  This wrapper gives those stores the default that USE_LIBUV (default 1,
as upstream) asks for, and then runs torch.distributed.run unchanged.  Nothing a store
client sends depends on the choice.

The workers are not touched.  A worker's env:// rendezvous through the agent's store
(TORCHELASTIC_USE_AGENT_STORE=True, what torchrun 2.6 sets) also makes its TCPStore with
the default and fails the same way.  With the c10d rendezvous,
TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 makes rank 0 host the workers' store instead, and
that path honours USE_LIBUV=0:

    USE_LIBUV=0 TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 scripts/in_root.sh ROOT \
        /usr/bin/python3 bench/torchrun26.py --standalone --nproc_per_node 2 examples/allreduce.py

The static rendezvous (--master_addr/--master_port) always shares the agent's store, so
its workers need the default changed in their own Python (the integration tests give
theirs a sitecustomize).
"""
import os
import sys

try:
    import torch.distributed as dist
    from torch.distributed import rendezvous, run
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous
except ImportError as e:
    sys.exit("torchrun26.py: error: %s: run it with the python3 of a root with torch 2.x "
             "(scripts/make_torch2_root.sh, scripts/in_root.sh)" % e)

_Original = dist.TCPStore


class TCPStore(_Original):
    """torch's TCPStore, but use_libuv defaults to USE_LIBUV == "1" (USE_LIBUV default "1")."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("use_libuv", os.environ.get("USE_LIBUV", "1") == "1")
        super().__init__(*args, **kwargs)


if __name__ == "__main__":
    for module in (dist, rendezvous, c10d_rendezvous_backend, static_tcp_rendezvous):
        if getattr(module, "TCPStore", None) is _Original:
            module.TCPStore = TCPStore
    sys.exit(run.main())
