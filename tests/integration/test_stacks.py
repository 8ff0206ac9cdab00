"""--stack-dumps and `gculaunch stacks`: every rank's Python stacks of a running job, without
stopping it (real gloo ranks, Debian torch 1.13), also on each node of a two-node job in
network namespaces.

`gculaunch stacks` is given --pid in the host's network namespace: other launches may run on
this machine there, and a test asks only its own.  Inside the test's own namespaces it runs
without --pid."""
import os
import re
import signal
import socket
import stat
import subprocess
import time
import unittest

import gltest

# 4 ranks: rank 1 never enters the all_reduce the others wait in (gloo's own timeout is 30
# minutes).
HANG = r"""
import os, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()

def stuck_in_my_own_function():
    print("rank %d is stuck" % rank, flush=True)
    while True:
        time.sleep(0.2)

if rank == 1:
    stuck_in_my_own_function()
print("rank %d enters all_reduce" % rank, flush=True)
dist.all_reduce(torch.ones(1))
"""

# One rank iterating a DataLoader with two forked workers, slowly.
LOADER = r"""
import os, time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 120
    def __getitem__(self, i):
        time.sleep(0.05)
        return i

def consume_batches():
    it = iter(DataLoader(Slow(), batch_size=1, num_workers=2, multiprocessing_context="fork"))
    n = 0
    for _ in it:
        n += 1
        if n == 3:
            print("workers: %s" % " ".join(str(w.pid) for w in it._workers), flush=True)
    print("consumed %d" % n, flush=True)

consume_batches()
"""

# What a rank sees of the sitecustomize chain: the hook, the shim and the user's own.
CHAIN_PROBE = r"""
import os, sys
import torch.distributed as dist
left = sorted(k for k in os.environ if k.startswith(("GCULAUNCH_STACKS_", "GCULAUNCH_SHIM_")))
print("user site ran %s, stacks hook %s, shim %s, group %s, leftovers %s, path %s" % (
    os.environ.get("USER_SITE_RAN"), "gculaunch_stacks" in sys.modules,
    "gculaunch_shim" in sys.modules, dist.is_initialized(), left,
    os.environ.get("PYTHONPATH", "").split(os.pathsep)), flush=True)
"""

# A rank that only holds (no collective): for the two-node test.
HOLD = r"""
import time
def holding_on_a_node():
    print("holding", flush=True)
    time.sleep(120)
holding_on_a_node()
"""

# A --no-python wrapper that runs Python as a child instead of exec'ing it: the rank (the
# shell) has no hook.
WRAPPER = """#!/bin/sh
/usr/bin/python3 -c 'import time; print("child up", flush=True); time.sleep(60)'
echo wrapper done
"""


def stacks(pid, timeout=60):
    return gltest.run([gltest.require_binary(), "stacks", "--pid", str(pid)],
                      env=gltest.tagged_env(gltest.new_tag()), timeout=timeout)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class Stacks(unittest.TestCase):
    def write(self, tmp, name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
        return path

    def test_every_rank_dumped_and_the_odd_one_named_while_the_job_runs(self):
        with gltest.TempDir() as tmp:
            script = self.write(tmp, "hang.py", HANG)
            with gltest.Job(["--standalone", "--nproc-per-node", "4", "--device", "cpu",
                             "--python", gltest.PYTHON, "--stack-dumps", script]) as job:
                job.wait_for(lambda out, err: out.count("enters all_reduce") == 3
                             and "rank 1 is stuck" in out, timeout=120, what="4 ranks up")
                time.sleep(1)  # into the all_reduce
                started = time.monotonic()
                res = stacks(job.pid)
                took = time.monotonic() - started
                self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
                out = res.stdout
                self.assertIn("gculaunch: stacks of run ", out)
                self.assertIn("gculaunch pid %d" % job.pid, out)
                for rank in range(4):
                    self.assertRegex(out, r"---- rank %d \(local rank %d, pid \d+\) ----\n"
                                     r"(Current thread|Thread) 0x" % (rank, rank))
                sections = re.split(r"---- rank \d+ ", out)
                self.assertIn("in stuck_in_my_own_function", sections[2])
                for i in (1, 3, 4):
                    self.assertIn("in all_reduce", sections[i])
                self.assertRegex(out, r"rank 1 differs from the majority: in "
                                 r"stuck_in_my_own_function \(.*hang\.py:\d+\)")
                self.assertNotIn("not dumped", out)
                gltest.eprint("gculaunch stacks took %.2f s for 4 ranks" % took)
                # Nothing stopped: gculaunch and its 4 ranks run on.
                self.assertIsNone(job.proc.poll())
                self.assertEqual(len(gltest.pids_of_ranks(job.tag, "python3")), 4)
                job.signal(signal.SIGTERM)
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM)

    def test_ranks_without_the_hook_are_reported_not_signalled(self):
        with gltest.TempDir() as tmp:
            wrapper = self.write(tmp, "wrapper.sh", WRAPPER)
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--stack-dumps",
                             "--no-python", wrapper]) as job:
                job.wait_for(lambda out, err: out.count("child up") == 2, timeout=60,
                             what="2 ranks up")
                res = stacks(job.pid)
                self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
                for rank in range(2):
                    self.assertRegex(res.stdout, r"---- rank %d \(local rank %d, pid \d+\): not "
                                     r"dumped: the hook is not loaded: pid \d+ does not catch "
                                     r"signal \d+ .*; not signalled ----" % (rank, rank))
                time.sleep(0.5)
                self.assertIsNone(job.proc.poll(), job.stderr)
                # A script run through its #! line has the script's name as its command name.
                self.assertEqual(len(gltest.pids_of_ranks(job.tag, "wrapper.sh")), 2)
                job.signal(signal.SIGTERM)
                self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM)
                self.assertNotIn("wrapper done", job.stdout)

    def test_without_stack_dumps_every_rank_is_named_with_the_reason(self):
        with gltest.TempDir() as tmp:
            wrapper = self.write(tmp, "wrapper.sh", WRAPPER)
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--no-python",
                             wrapper]) as job:
                job.wait_for(lambda out, err: out.count("child up") == 2, timeout=60,
                             what="2 ranks up")
                res = stacks(job.pid)
                self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
                self.assertEqual(res.stdout.count("not dumped: started without the stack-dump "
                                                  "hook (run with --stack-dumps)"), 2, res.stdout)
                job.signal(signal.SIGTERM)
                job.wait(timeout=60)

    def test_forked_dataloader_workers_are_not_disturbed(self):
        with gltest.TempDir() as tmp:
            script = self.write(tmp, "loader.py", LOADER)
            with gltest.Job(["--nproc-per-node", "1", "--device", "cpu", "--python",
                             gltest.PYTHON, "--stack-dumps", script]) as job:
                job.wait_for(lambda out, err: "workers: " in out, timeout=120, what="workers")
                workers = [int(p) for p in
                           re.search(r"workers: ([\d ]+)", job.stdout).group(1).split()]
                self.assertEqual(len(workers), 2)
                for _ in range(2):
                    res = stacks(job.pid)
                    self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
                    self.assertIn("in consume_batches", res.stdout)
                    # One process's dump: the rank's main thread only, no worker's.
                    self.assertEqual(res.stdout.count(" in <module>\n"), 1, res.stdout)
                    for pid in workers:
                        self.assertTrue(alive(pid), "worker %d was disturbed" % pid)
                self.assertEqual(job.wait(timeout=120), 0, job.stderr)
                self.assertIn("[rank0]: consumed 120", job.stdout)

    def test_the_hook_chains_to_the_shim_and_the_users_sitecustomize(self):
        with gltest.TempDir() as tmp:
            user_site = os.path.join(tmp, "usersite")
            os.makedirs(user_site)
            self.write(user_site, "sitecustomize.py",
                       "import os\nos.environ['USER_SITE_RAN'] = "
                       "str(int(os.environ.get('USER_SITE_RAN', '0')) + 1)\n")
            script = self.write(tmp, "probe.py", CHAIN_PROBE)
            with gltest.Job(["--nproc-per-node", "2", "--device", "cpu", "--python",
                             gltest.PYTHON, "--stack-dumps", "--python-shim", "--env",
                             "PYTHONPATH=" + user_site, script]) as job:
                self.assertEqual(job.wait(timeout=120), 0, job.stderr)
                for rank in range(2):
                    self.assertIn("[rank%d]: user site ran 1, stacks hook True, shim True, "
                                  "group True, leftovers [], path ['%s']"
                                  % (rank, user_site), job.stdout)

    def test_node_0_answers_for_the_whole_job_node_1_for_its_own_ranks(self):
        # Two simulated hosts (network namespaces sharing /tmp): `gculaunch stacks` without a
        # selector, run in a host's namespace, picks that host's gculaunch (the only one in its
        # namespace).  Node 0 gathers node 1's stacks through the job's store.
        hosts = gltest.SimulatedHosts(2)
        self.addCleanup(hosts.close)
        tag = gltest.new_tag()
        self.addCleanup(gltest.kill_tagged, tag)
        with gltest.TempDir() as tmp:
            os.chmod(tmp, 0o755)
            script = self.write(tmp, "hold.py", HOLD)
            jobs = [gltest.NodeJob(hosts, i, 2, 29500,
                                   ["--nproc-per-node", "2", "--device", "cpu", "--python",
                                    gltest.PYTHON, "--stack-dumps", "--grace-period", "5",
                                    script], tag)
                    for i in range(2)]
            for job in jobs:
                self.addCleanup(job.__exit__, None, None, None)
            for job in jobs:
                job.wait_for(lambda out, err: out.count("holding") == 2, timeout=120,
                             what="2 ranks up")
            for i in range(2):
                res = subprocess.run(hosts.command_prefix(i) + [gltest.require_binary(), "stacks"],
                                     env=gltest.tagged_env(gltest.new_tag()), capture_output=True,
                                     text=True, timeout=60)
                self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
                out = res.stdout
                titles = re.findall(r"^gculaunch: stacks of run \S+, node (\d) \(", out, re.M)
                self.assertEqual(titles, ["0", "1"] if i == 0 else ["1"], out)
                for rank in range(4):
                    expected = i == 0 or rank // 2 == i
                    self.assertEqual("---- rank %d (local rank %d, pid" % (rank, rank % 2)
                                     in out, expected, out)
                self.assertEqual(out.count("in holding_on_a_node"), 4 if i == 0 else 2, out)
                if i == 0:
                    # Node 1's part follows node 0's and holds ranks 2 and 3.
                    self.assertLess(out.index(", node 0 ("), out.index(", node 1 ("))
                    self.assertGreater(out.index("---- rank 2 "), out.index(", node 1 ("))
                    self.assertIn("every dumped rank is in the same place", out)
            for job in jobs:
                job.signal(signal.SIGTERM)
            for job in jobs:
                job.wait(timeout=60)

    def test_the_socket_is_private_stale_ones_are_removed_and_kill_9_leaves_none(self):
        # XDG_RUNTIME_DIR of our own: the control directory is <it>/gculaunch, mode 0700.
        with gltest.TempDir() as tmp, gltest.TempDir() as xdg:
            os.chmod(xdg, 0o700)
            env = {"XDG_RUNTIME_DIR": xdg}
            ctl = os.path.join(xdg, "gculaunch")
            os.mkdir(ctl, 0o700)
            stale = os.path.join(ctl, "old-n0-999999.sock")
            s = socket.socket(socket.AF_UNIX)
            s.bind(stale)
            s.close()
            script = self.write(tmp, "hold.py", HOLD)
            with gltest.Job(["--standalone", "--nproc-per-node", "1", "--device", "cpu",
                             "--python", gltest.PYTHON, "--stack-dumps", script],
                            extra_env=env) as job:
                job.wait_for(lambda out, err: "holding" in out, timeout=120, what="rank up")
                socks = [n for n in os.listdir(ctl) if n.endswith("-n0-%d.sock" % job.pid)]
                self.assertEqual(len(socks), 1, os.listdir(ctl))
                path = os.path.join(ctl, socks[0])
                self.assertTrue(stat.S_ISSOCK(os.lstat(path).st_mode))
                self.assertEqual(stat.S_IMODE(os.lstat(ctl).st_mode), 0o700)
                # The stale socket is skipped and removed.  (By pid: other tests' jobs may run
                # at the same time, with their sockets in /tmp/gculaunch-<uid>.)
                res = gltest.run([gltest.require_binary(), "stacks", "--pid", str(job.pid)],
                                 env=gltest.tagged_env(gltest.new_tag(), extra=env), timeout=60)
                self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
                self.assertIn("gculaunch pid %d" % job.pid, res.stdout)
                self.assertFalse(os.path.lexists(stale))
                # A directory another user could write to is refused, naming the fix.
                os.chmod(ctl, 0o755)
                res = gltest.run([gltest.require_binary(), "stacks", "--pid", str(job.pid)],
                                 env=gltest.tagged_env(gltest.new_tag(), extra=env), timeout=60)
                self.assertEqual(res.returncode, 1)
                self.assertEqual(res.stderr, "gculaunch: gculaunch stacks: the control directory "
                                 "%s has mode 0755, not 0700 (fix: chmod 700 %s)\n" % (ctl, ctl))
                os.chmod(ctl, 0o700)
                # kill -9: the guardian removes the socket file.
                job.signal(signal.SIGKILL)
                job.wait(timeout=30)
                deadline = time.monotonic() + 15
                while os.path.lexists(path) and time.monotonic() < deadline:
                    time.sleep(0.1)
                self.assertFalse(os.path.lexists(path), "the socket outlived gculaunch's guardian")

    def test_usage_and_no_job(self):
        res = gltest.run([gltest.require_binary(), "stacks", "--pid", "x"],
                         env=gltest.tagged_env(gltest.new_tag()))
        self.assertEqual(res.returncode, 2)
        self.assertEqual(res.stderr, "gculaunch: gculaunch stacks: --pid 'x' is not a process id "
                         "(fix: give the pid of a running gculaunch, e.g. --pid 4242)\n")
        # A pid that is certainly not a gculaunch: this test's own.
        res = stacks(os.getpid())
        self.assertEqual(res.returncode, 1)
        self.assertRegex(res.stderr, r"^gculaunch: gculaunch stacks: no running gculaunch job "
                         r"(of this user was found|matches --job/--node/--pid) \(fix: ")
        res = gltest.run([gltest.require_binary(), "stacks", "--help"],
                         env=gltest.tagged_env(gltest.new_tag()))
        self.assertEqual(res.returncode, 0)
        self.assertIn("usage: gculaunch stacks", res.stdout)


if __name__ == "__main__":
    unittest.main()
