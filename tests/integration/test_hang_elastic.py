"""Elastic jobs (--nnodes MIN:MAX) and hangs: `gculaunch stacks` on node 0 asks the current
epoch's members, keyed by their drawn node ids (a node that came back has a new id), and
--hang-timeout watches those members.  Simulated hosts (gltest.SimulatedHosts, one network
namespace per node), one real gloo rank per node (Debian torch 1.13)."""
import json
import os
import re
import signal
import subprocess
import unittest

import gltest

PORT = 29500  # every host has its own network namespace: the port is free in each

# Every rank says where it runs, then stays silent in one function.
HOLD = r"""
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
print("rank %d of %d up in attempt %s" % (dist.get_rank(), dist.get_world_size(),
      os.environ["TORCHELASTIC_RESTART_COUNT"]), flush=True)
def holding_on_a_node():
    while True:
        time.sleep(0.2)
holding_on_a_node()
"""


class HangElastic(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tag = gltest.new_tag()
        self.addCleanup(gltest.kill_tagged, self.tag)
        self.hosts = gltest.SimulatedHosts(3)
        self.addCleanup(self.hosts.close)
        tmp = gltest.TempDir()
        self.tmp = tmp.__enter__()
        self.addCleanup(tmp.__exit__, None, None, None)
        os.chmod(self.tmp, 0o755)
        self.script = os.path.join(self.tmp, "hold.py")
        with open(self.script, "w") as f:
            f.write(HOLD)

    def node(self, host, extra):
        args = ["--nnodes", "2:3", "--nproc-per-node", "1", "--device", "cpu",
                "--grace-period", "5", "--max-restarts", "3", "--rdzv-timeout", "60",
                "--rdzv-conf", "last_call_timeout=2", "--python", gltest.PYTHON,
                "--log-dir", os.path.join(self.tmp, "logs%d" % host)] + extra + [self.script]
        job = gltest.NodeJob(self.hosts, host, 3, PORT, args, self.tag,
                             extra_env={"RANK": "0" if host == 0 else "1"})
        self.addCleanup(job.__exit__, None, None, None)
        return job

    @staticmethod
    def wait_up(jobs, world, attempt):
        line = "of %d up in attempt %d" % (world, attempt)
        for job in jobs:
            job.wait_for(lambda out, err: line in out, timeout=120, what=line)

    def test_stacks_on_node_0_returns_every_current_members_ranks(self):
        # 2:3 with three nodes; node 2 leaves (SIGTERM) and a new gculaunch in its host joins
        # with a fresh id (3): the job is back at three nodes, and node 0 must ask id 3.
        jobs = [self.node(i, ["--stack-dumps"]) for i in range(3)]
        self.wait_up(jobs, 3, 0)
        jobs[2].signal(signal.SIGTERM)
        self.assertEqual(jobs[2].wait(timeout=60), 143, jobs[2].stderr[-3000:])
        self.wait_up(jobs[:2], 2, 1)
        jobs[2] = self.node(2, ["--stack-dumps"])
        self.wait_up(jobs, 3, 1)  # a re-form to grow uses no restart
        res = subprocess.run(self.hosts.command_prefix(0) + [gltest.require_binary(), "stacks"],
                             env=gltest.tagged_env(gltest.new_tag()), capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        out = res.stdout
        self.assertEqual(len(re.findall(r"^gculaunch: stacks of run \S+, node \d \(", out,
                                        re.M)), 3, out)
        for rank in range(3):
            self.assertIn("---- rank %d (local rank 0, pid" % rank, out)
        self.assertEqual(out.count("in holding_on_a_node"), 3, out)
        self.assertNotIn("no answer", out)
        for job in jobs:
            job.signal(signal.SIGTERM)
        for job in jobs:
            job.wait(timeout=60)

    def test_a_hang_in_an_elastic_job_is_detected_over_every_member(self):
        jobs = [self.node(i, ["--hang-timeout", "3s"]) for i in range(3)]
        self.wait_up(jobs, 3, 0)
        codes = [job.wait(timeout=90) for job in jobs]
        err0 = jobs[0].stderr
        self.assertEqual(codes, [6, 6, 6], err0 + "\n".join(j.stderr[-2000:] for j in jobs[1:]))
        self.assertRegex(err0, r"gculaunch: hang \(no progress from any rank for 3\.\d s "
                               r"\(--hang-timeout 3\.0 s\)\): stacks of epoch 0, every node")
        self.assertEqual(err0.count("in holding_on_a_node"), 3, err0)
        for job in jobs[1:]:
            self.assertIn("the job hung: no progress from any rank", job.stderr)
        events = [os.path.join(d, f) for d, _, files in os.walk(os.path.join(self.tmp, "logs0"))
                  for f in files if f == "events.jsonl"]
        self.assertEqual(len(events), 1, events)
        with open(events[0]) as f:
            hangs = [e for e in map(json.loads, f) if e["event"] == "hang"]
        self.assertEqual(len(hangs), 1, hangs)
        self.assertEqual((hangs[0]["epoch"], hangs[0]["timeout_s"], hangs[0]["action"],
                          hangs[0]["odd_ranks"]), (0, 3.0, "stop", []), hangs)
        self.assertGreaterEqual(hangs[0]["silent_s"], 3.0)


if __name__ == "__main__":
    unittest.main()
