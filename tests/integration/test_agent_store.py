"""gculaunch hosts the ranks' TCPStore (the agent store, the default).

Real Debian PyTorch ranks (1.13 on the host, 2.6 in the trixie chroot) run
gloo jobs whose env:// rendezvous goes through gculaunch's own store:
  * the listening socket on MASTER_PORT belongs to gculaunch, not to a rank;
  * a restart gets a fresh key space: torch 2.x ranks use no per-attempt key
    prefix, so without it attempt 1 would read attempt 0's dead addresses;
  * a torch build without libuv fails through the agent store, and the
    summary names the switch back to the rank-0-hosted store, which works.
"""
import os
import shlex
import time
import unittest

import gltest

# One rank: rendezvous through env://, all-reduce, report, then (optionally)
# hold until the test says go, so the test can look at the running job.
WORKER = r'''
import datetime, os, sys, time
import torch
import torch.distributed as dist

work = sys.argv[1]
rank = int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
assert os.environ["TORCHELASTIC_USE_AGENT_STORE"] == sys.argv[2], os.environ["TORCHELASTIC_USE_AGENT_STORE"]
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
if attempt == 0 and os.environ.get("FAIL_RANK_IN_ATTEMPT0") == str(rank):
    print("rank %d fails on purpose in attempt 0" % rank, flush=True)
    sys.exit(7)
if os.environ.get("HOLD") == "1":
    with open(os.path.join(work, "ready.%d" % rank), "w") as f:
        f.write(os.environ["MASTER_PORT"])
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(work, "go")) and time.monotonic() < deadline:
        time.sleep(0.05)
dist.barrier()
print("attempt %d rank %d sum %.0f" % (attempt, rank, t.item()), flush=True)
dist.destroy_process_group()
'''


def write_worker(tmp):
    path = os.path.join(tmp, "worker.py")
    with open(path, "w") as f:
        f.write(WORKER)
    return path


def sums(stdout, attempt):
    return sorted(line for line in stdout.splitlines() if ("attempt %d rank" % attempt) in line)


def check_ranks_are_clients(test, tmp, python, nranks, env):
    """Runs `nranks` ranks that hold after their all-reduce, checks that the
    store's listening socket is gculaunch's (and only gculaunch's), then lets
    them finish and checks every rank's sum."""
    worker = write_worker(tmp)
    args = ["--standalone", "--nproc-per-node", str(nranks), "--device", "cpu",
            "--python", python, worker, tmp, "True"]
    ready = [os.path.join(tmp, "ready.%d" % r) for r in range(nranks)]
    with gltest.Job(args, extra_env=dict(env, HOLD="1")) as job:
        job.wait_for(lambda out, err: all(os.path.exists(p) for p in ready), timeout=180,
                     what="%d ready ranks" % nranks)
        with open(ready[0]) as f:
            port = int(f.read())
        test.assertEqual(gltest.listening_socket_owner(port), [job.pid])
        open(os.path.join(tmp, "go"), "w").close()
        test.assertEqual(job.wait(timeout=120), 0, job.stderr)
        total = nranks * (nranks + 1) // 2
        test.assertEqual(sums(job.stdout, 0), ["[rank%d]: attempt 0 rank %d sum %d" % (r, r, total)
                                               for r in range(nranks)])


class AgentStoreTorch113(unittest.TestCase):
    def test_four_ranks_are_clients_of_gculaunch(self):
        with gltest.TempDir() as tmp:
            check_ranks_are_clients(self, tmp, gltest.PYTHON, 4, {})

    def test_restart_reuses_the_store_with_a_fresh_key_space(self):
        with gltest.TempDir() as tmp:
            worker = write_worker(tmp)
            args = ["--standalone", "--nproc-per-node", "3", "--device", "cpu",
                    "--max-restarts", "1", "--grace-period", "5",
                    "--python", gltest.PYTHON, worker, tmp, "True"]
            with gltest.Job(args, extra_env={"FAIL_RANK_IN_ATTEMPT0": "1"}) as job:
                self.assertEqual(job.wait(timeout=180), 0, job.stderr)
                self.assertIn("rank 1 fails on purpose in attempt 0", job.stdout)
                self.assertEqual(sums(job.stdout, 1),
                                 ["[rank%d]: attempt 1 rank %d sum 6" % (r, r) for r in range(3)])


def interpreter_file(tmp, command):
    """An executable file that stands for the interpreter `command` (a list), since
    --python takes one path.  It execs the command, so the rank's pid stays python's."""
    path = os.path.join(tmp, "python3")
    with open(path, "w") as f:
        f.write('#!/bin/sh\nexec %s "$@"\n' % " ".join(shlex.quote(c) for c in command))
    os.chmod(path, 0o755)
    return path


class AgentStoreTorch26(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.python_cmd = gltest.torch2_python()  # raises (a failure) if it cannot be made

    def job_env(self, tmp, patched=True):
        env = {}
        if patched:
            # Debian's 2.6 has no libuv: a test-only sitecustomize makes the
            # env:// client TCPStore default to use_libuv=False (no wire change).
            gltest.write_no_libuv_sitecustomize(tmp)
            env.update({"PYTHONPATH": tmp, "GLTEST_TCPSTORE_NO_LIBUV": "1"})
        return env

    def test_three_ranks_are_clients_of_gculaunch(self):
        with gltest.TempDir() as tmp:
            check_ranks_are_clients(self, tmp, interpreter_file(tmp, self.python_cmd), 3,
                                    self.job_env(tmp))

    def test_restart_gets_a_fresh_key_space(self):
        # torch 2.x ranks write the same keys in every attempt; attempt 1 only
        # works if none of attempt 0's keys (dead ranks' addresses) is visible.
        with gltest.TempDir() as tmp:
            worker = write_worker(tmp)
            args = ["--standalone", "--nproc-per-node", "3", "--device", "cpu",
                    "--max-restarts", "1", "--grace-period", "5",
                    "--python", interpreter_file(tmp, self.python_cmd), worker, tmp, "True"]
            env = self.job_env(tmp)
            env["FAIL_RANK_IN_ATTEMPT0"] = "2"
            with gltest.Job(args, extra_env=env) as job:
                self.assertEqual(job.wait(timeout=240), 0, job.stderr)
                self.assertIn("rank 2 fails on purpose in attempt 0", job.stdout)
                self.assertEqual(sums(job.stdout, 1),
                                 ["[rank%d]: attempt 1 rank %d sum 6" % (r, r) for r in range(3)])

    def test_build_without_libuv_is_pointed_to_no_agent_store(self):
        with gltest.TempDir() as tmp:
            worker = write_worker(tmp)
            args = ["--standalone", "--nproc-per-node", "2", "--device", "cpu",
                    "--python", interpreter_file(tmp, self.python_cmd), worker, tmp, "True"]
            with gltest.Job(args, extra_env=self.job_env(tmp, patched=False)) as job:
                self.assertEqual(job.wait(timeout=180), 1, job.stderr)
                self.assertIn("use_libuv was requested but PyTorch was build without libuv",
                              job.stderr)
                self.assertIn("--no-agent-store", job.stderr)

    def test_no_agent_store_lets_rank0_host_with_use_libuv_0(self):
        with gltest.TempDir() as tmp:
            worker = write_worker(tmp)
            args = ["--standalone", "--nproc-per-node", "2", "--device", "cpu",
                    "--no-agent-store", "--env", "USE_LIBUV=0",
                    "--python", interpreter_file(tmp, self.python_cmd), worker, tmp, "False"]
            with gltest.Job(args, extra_env=self.job_env(tmp, patched=False)) as job:
                self.assertEqual(job.wait(timeout=180), 0, job.stderr)
                self.assertEqual(sums(job.stdout, 0),
                                 ["[rank%d]: attempt 0 rank %d sum 3" % (r, r) for r in range(2)])


if __name__ == "__main__":
    unittest.main()
