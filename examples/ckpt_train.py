"""A small, deterministic training loop that checkpoints and resumes: the job a restarted
or re-formed gculaunch job should be able to continue without losing or repeating work.

    gculaunch --standalone --nproc-per-node 2 --device cpu --max-restarts 1 \
        examples/ckpt_train.py /tmp/ckpt --steps 40 --ckpt-every 5

The "model" is a vector of integers.  At step s every rank takes its share of that step's
batch (a fixed dataset, re-sharded by RANK and WORLD_SIZE at every start), computes an
integer contribution, and the ranks all-reduce (gloo, SUM) those contributions.  Integer sums
are exact and do not depend on the order of the terms, so the total of a step, and thus the
whole run, is the same for every world size and however often the job was stopped and resumed
from a checkpoint.  That is what an elastic job (--nnodes MIN:MAX) needs: after it shrank or
grew, the next start reads the checkpoint and shares the batches out among the new WORLD_SIZE
ranks.  A step lost or done twice changes the final state (the update is not
commutative), so comparing final states proves that no work was lost or repeated.

Rank 0 writes a checkpoint (step + state) every --ckpt-every steps, atomically (temporary file,
fsync, rename).  On start rank 0 reads the checkpoint if there is one and broadcasts it, so the
other ranks need not see the directory.  Options for tests: --journal DIR (each rank appends one
JSON line per executed step), --result FILE (rank 0 writes the final state), --step-time (sleep
per step), --fail-rank/--fail-step (a failure in the first attempt only).
"""
import argparse
import datetime
import json
import os
import sys
import time

DIM = 8               # length of the state vector
DATASET_SIZE = 1000   # items in the fixed dataset
BATCH = 24            # items per step, shared out between the ranks
MODULUS = 1_000_003   # keeps the state small; a prime, so the update mixes well


def dataset_item(i):
    """Item i of the fixed dataset: a small integer, the same on every rank and every run."""
    return (i * 7919 + 13) % 101


def batch_indices(step):
    """The dataset indices of step `step`'s batch (steps count from 1)."""
    return [((step - 1) * BATCH + j) % DATASET_SIZE for j in range(BATCH)]


def contribution(step, state, rank, world):
    """This rank's share of step `step`: the batch positions j with j % world == rank.  Each
    item adds to one coordinate a term that depends on the item and on the current state,
    like a gradient does."""
    out = [0] * DIM
    for j, i in enumerate(batch_indices(step)):
        if j % world == rank:
            d = i % DIM
            out[d] += dataset_item(i) * (1 + state[d] % 5)
    return out


def update(state, total, step):
    """The new state after a step whose all-reduced contribution is `total`."""
    return [(3 * w + t + step) % MODULUS for w, t in zip(state, total)]


def value_of(state):
    """A single number that identifies a state (for progress lines and the journal)."""
    return sum((d + 1) * w for d, w in enumerate(state)) % MODULUS


def simulate(steps):
    """The states after steps 1..steps of an undisturbed run, computed in one process (no
    torch): what any run, with any world size and any number of resumes, must produce.
    Returns the list of states after each step (element 0: the initial state)."""
    states = [[0] * DIM]
    for step in range(1, steps + 1):
        state = states[-1]
        states.append(update(state, contribution(step, state, 0, 1), step))
    return states


def write_json_atomically(path, data):
    """Writes `data` to `path` so that a reader sees the old file or the new one, never half."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ckpt_dir", help="directory of the checkpoint (created if missing)")
    p.add_argument("--steps", type=int, default=40, help="steps of the whole run (default 40)")
    p.add_argument("--ckpt-every", type=int, default=5, metavar="K",
                   help="rank 0 checkpoints after every K-th step (default 5)")
    p.add_argument("--step-time", type=float, default=0.0, metavar="SECONDS",
                   help="sleep this long after every step (default 0)")
    p.add_argument("--journal", metavar="DIR",
                   help="each rank appends a JSON line per executed step to DIR/rank<RANK>.jsonl")
    p.add_argument("--result", metavar="FILE", help="rank 0 writes the final state here (JSON)")
    p.add_argument("--pg-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="timeout of the process group's collectives (default 120)")
    p.add_argument("--fail-rank", type=int, default=-1, metavar="R",
                   help="testing aid: rank R exits with code 3 after --fail-step in attempt 0")
    p.add_argument("--fail-step", type=int, default=0, metavar="S")
    args = p.parse_args(argv)
    if args.steps < 0 or args.ckpt_every < 1:
        p.error("--steps must be >= 0 and --ckpt-every >= 1")
    return args


def load_checkpoint(path):
    """(step, state) of the checkpoint at `path`, or (0, initial state) when there is none."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return 0, [0] * DIM
    return int(data["step"]), [int(w) for w in data["state"]]


def main(argv):
    args = parse_args(argv)
    import torch  # imported here so that tests can use simulate() without torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    ckpt_path = os.path.join(args.ckpt_dir, "checkpoint.json")
    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=args.pg_timeout))

    # Rank 0 resumes from the checkpoint and tells every rank where the job stands.
    start = torch.zeros(1 + DIM, dtype=torch.int64)
    if rank == 0:
        os.makedirs(args.ckpt_dir, exist_ok=True)
        step, state = load_checkpoint(ckpt_path)
        start = torch.tensor([step] + state, dtype=torch.int64)
    dist.broadcast(start, src=0)
    done = int(start[0])
    state = [int(w) for w in start[1:]]
    print("rank %d/%d attempt %d: %s at step %d of %d (value %d)"
          % (rank, world, attempt, "resuming" if done else "starting", done, args.steps,
             value_of(state)), flush=True)

    journal = None
    if args.journal:
        os.makedirs(args.journal, exist_ok=True)
        journal = open(os.path.join(args.journal, "rank%d.jsonl" % rank), "a")

    for step in range(done + 1, args.steps + 1):
        mine = torch.tensor(contribution(step, state, rank, world), dtype=torch.int64)
        dist.all_reduce(mine)  # SUM over the ranks: exact, order-independent
        state = update(state, mine.tolist(), step)
        if rank == 0 and step % args.ckpt_every == 0:
            write_json_atomically(ckpt_path, {"step": step, "state": state})
            print("rank 0: step %d of %d, value %d, checkpoint saved"
                  % (step, args.steps, value_of(state)), flush=True)
        if journal:  # after the checkpoint: rank 0's line for step K*n means "saved"
            journal.write(json.dumps({"attempt": attempt, "step": step, "world": world,
                                      "value": value_of(state)}) + "\n")
            journal.flush()
        if rank == args.fail_rank and step == args.fail_step and attempt == 0:
            print("rank %d: failing on purpose after step %d (attempt 0)" % (rank, step),
                  flush=True)
            return 3
        if args.step_time > 0:
            time.sleep(args.step_time)

    if rank == 0:
        if args.result:
            write_json_atomically(args.result, {"steps": args.steps, "state": state,
                                                "value": value_of(state)})
        print("rank 0: done, %d steps, final value %d" % (args.steps, value_of(state)),
              flush=True)
    dist.barrier()  # nobody leaves while another rank may still need the group
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
