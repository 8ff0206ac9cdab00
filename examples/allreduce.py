"""A real torch.distributed job: every rank all-reduces (rank + 1) with gloo
over init_method='env://' and checks the sum.  Exits 0 on success.

    gculaunch --standalone --nproc-per-node 4 --device cpu examples/allreduce.py
"""
import os
import sys

import torch
import torch.distributed as dist


def main() -> int:
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    world = dist.get_world_size()
    assert rank == int(os.environ["RANK"]), "RANK disagrees with the process group"
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    expected = world * (world + 1) / 2
    ok = t.item() == expected
    print("rank %d/%d local_rank %s: all_reduce sum %.0f (expected %.0f) %s"
          % (rank, world, os.environ.get("LOCAL_RANK"), t.item(), expected,
             "ok" if ok else "WRONG"), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
