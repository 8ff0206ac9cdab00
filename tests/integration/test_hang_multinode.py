"""--hang-timeout on two nodes (network namespaces, real gloo ranks with Debian torch 1.13):
node 0 decides for the whole job from every node's progress reports, gathers every node's
stacks so they land together on node 0, names the odd rank across nodes, and ends the epoch
with a `hang` stop marker (every node exits 6), or re-forms the job with --on-hang restart."""
import json
import os
import re
import time
import unittest

import gltest

PORT = 29500  # every node has its own network namespace: the port is free in each

# 2 nodes x 2 ranks; in epoch 0 rank 2 (node 1, local rank 0) never enters the all_reduce the
# others wait in (gloo's own timeout: 30 minutes).  In later epochs everyone takes part.
HANG = gltest.hang_script(stuck_rank=2)

# Rank 0 (node 0) keeps touching its heartbeat; rank 2 (node 1) touches it twice and stops;
# ranks 1 and 3 neither print nor touch theirs.
HEARTBEAT = r"""
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
path = os.environ["GCULAUNCH_HEARTBEAT_FILE"]
def touch():
    with open(path, "a"):
        os.utime(path)
for i in range(100):
    if rank == 0 or (rank == 2 and i < 2):
        touch()
    time.sleep(0.1)
"""

# Every rank prints, then the whole job pauses twice for 3.5 s (a barrier keeps them together).
# Each pause outlasts the 2 s timeout, node 0's check and the gathering of node 1's stacks,
# which reaches node 1 with its next heartbeat (within 1.5 s): with 3.5 s pauses a loaded
# machine once ended the second pause before its report was written.
PAUSES = r"""
import time
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
for phase in range(3):
    print("rank %d phase %d" % (rank, phase), flush=True)
    dist.barrier()
    if phase < 2:
        time.sleep(5.5)
"""


class HangMultiNode(unittest.TestCase):
    def setUp(self):
        self.tag = gltest.new_tag()
        self.addCleanup(gltest.kill_tagged, self.tag)
        self.hosts = gltest.SimulatedHosts(2)
        self.addCleanup(self.hosts.close)
        tmp = gltest.TempDir()
        self.tmp = tmp.__enter__()
        self.addCleanup(tmp.__exit__, None, None, None)
        os.chmod(self.tmp, 0o755)
        self.script = os.path.join(self.tmp, "hang.py")
        with open(self.script, "w") as f:
            f.write(HANG)

    def start(self, extra, timeout="3s", script=None):
        jobs = []
        for i in range(2):
            args = ["--nproc-per-node", "2", "--device", "cpu", "--python", gltest.PYTHON,
                    "--grace-period", "5", "--hang-timeout", timeout,
                    "--log-dir", os.path.join(self.tmp, "logs%d" % i)] + extra + [
                        script or self.script]
            job = gltest.NodeJob(self.hosts, i, 2, PORT, args, self.tag)
            self.addCleanup(job.__exit__, None, None, None)
            jobs.append(job)
        return jobs

    def test_node_0_reports_every_nodes_stacks_names_the_rank_and_every_node_exits_6(self):
        node0, node1 = self.start([])
        node0.wait_for(lambda out, err: out.count("enters all_reduce") == 2, timeout=120,
                       what="node 0's ranks in the all_reduce")
        node1.wait_for(lambda out, err: "rank 2 is stuck" in out
                       and "rank 3 enters all_reduce" in out, timeout=120,
                       what="node 1's ranks up")
        silent_since = time.monotonic()
        node0.wait_for(lambda out, err: "differs from the majority" in err
                       or "every dumped rank" in err, timeout=60, what="the hang report")
        latency = time.monotonic() - silent_since
        gltest.eprint("two nodes: hang reported %.2f s after the last output (timeout 3 s)"
                      % latency)
        self.assertLess(latency, 3 + 6, node0.stderr)
        code0 = node0.wait(timeout=90)
        code1 = node1.wait(timeout=90)
        err0, err1 = node0.stderr, node1.stderr
        self.assertEqual((code0, code1), (6, 6), err0 + "\n=== node 1:\n" + err1)
        self.assertRegex(err0, r"gculaunch: hang \(no progress from any rank for 3\.\d s "
                               r"\(--hang-timeout 3\.0 s\)\): stacks of epoch 0, every node")
        # Node 1's stacks reached node 0: every rank of the job, under each node's title.
        titles = re.findall(r"^gculaunch: stacks of run \S+, node (\d) \(", err0, re.M)
        self.assertEqual(titles, ["0", "1"], err0)
        for rank in range(4):
            self.assertRegex(err0, r"---- rank %d \(local rank %d, pid \d+\) ----\n"
                             % (rank, rank % 2))
        self.assertLess(err0.index(", node 1 ("), err0.index("---- rank 2 "))
        self.assertRegex(err0, r"rank 2 differs from the majority: in "
                               r"stuck_in_my_own_function \(.*hang\.py:\d+\)")
        self.assertEqual(err0.count(" in all_reduce\n"), 3, err0)
        # The marker every node read names the rank, its node and its function.
        for err in (err0, err1):
            self.assertRegex(err, r"the job hung: no progress from any rank for 3\.\d s "
                                  r"\(--hang-timeout 3\.0 s\); rank 2 \(local rank 0\) on node 1 "
                                  r"differs from the majority: in stuck_in_my_own_function; "
                                  r"every node stops \(exit code 6\)")
        self.assertNotIn("gculaunch: hang (", err1)  # node 1 does not decide
        reports = [os.path.join(d, f) for d, _, files in os.walk(os.path.join(self.tmp, "logs0"))
                   for f in files if f.startswith("hang_")]
        self.assertEqual(len(reports), 1, reports)
        with open(reports[0]) as f:
            text = f.read()
        self.assertIn("rank 2 differs from the majority", text)
        self.assertIn("---- rank 3 (local rank 1", text)
        # Node 0's events.jsonl has the `hang` event, with the odd rank of the whole job.
        events = [os.path.join(d, f) for d, _, files in os.walk(os.path.join(self.tmp, "logs0"))
                  for f in files if f == "events.jsonl"]
        self.assertEqual(len(events), 1, events)
        with open(events[0]) as f:
            hangs = [e for e in map(json.loads, f) if e["event"] == "hang"]
        self.assertEqual(len(hangs), 1, hangs)
        self.assertEqual((hangs[0]["node_rank"], hangs[0]["epoch"], hangs[0]["timeout_s"],
                          hangs[0]["action"], hangs[0]["odd_ranks"]), (0, 0, 3.0, "stop", [2]),
                         hangs)
        self.assertGreaterEqual(hangs[0]["silent_s"], 3.0)
        self.assertEqual(gltest.wait_no_tagged(self.tag, 10), [])

    def test_on_hang_restart_reforms_the_job_and_the_second_epoch_completes(self):
        node0, node1 = self.start(["--on-hang", "restart", "--max-restarts", "1"])
        code0 = node0.wait(timeout=240)
        code1 = node1.wait(timeout=60)
        err0, err1 = node0.stderr, node1.stderr
        self.assertEqual((code0, code1), (0, 0), err0 + "\n=== node 1:\n" + err1)
        self.assertIn("rank 2 differs from the majority", err0)
        for err in (err0, err1):
            self.assertRegex(err, r"the job hung: .*; every node restarts its ranks "
                                  r"\(restart 1 of 1\)")
        for job, ranks in ((node0, (0, 1)), (node1, (2, 3))):
            for rank in ranks:
                self.assertIn("[rank%d]: rank %d done: 4" % (rank, rank), job.stdout)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_a_rank_of_node_1_whose_heartbeat_stops_is_flagged_while_node_0_beats(self):
        node0, node1 = self.start([], timeout="2s", script=self.write("beat.py", HEARTBEAT))
        code0 = node0.wait(timeout=90)
        code1 = node1.wait(timeout=60)
        err0, err1 = node0.stderr, node1.stderr
        self.assertEqual((code0, code1), (6, 6), err0 + "\n=== node 1:\n" + err1)
        self.assertIn("gculaunch: hang (rank 2 stopped touching GCULAUNCH_HEARTBEAT_FILE (more "
                      "than 2.0 s ago) while other ranks still do): stacks of epoch 0", err0)
        self.assertNotRegex(err0, r"ranks? (\d+, )*[013](, \d+)* stopped touching")
        self.assertIn("the job hung: rank 2 stopped touching GCULAUNCH_HEARTBEAT_FILE", err1)

    def test_on_hang_report_reports_each_silence_of_the_job_once_and_keeps_running(self):
        node0, node1 = self.start(["--on-hang", "report"], timeout="2s",
                                  script=self.write("pauses.py", PAUSES))
        code0 = node0.wait(timeout=120)
        code1 = node1.wait(timeout=60)
        err0, err1 = node0.stderr, node1.stderr
        self.assertEqual((code0, code1), (0, 0), err0 + "\n=== node 1:\n" + err1)
        self.assertEqual(len(re.findall(r"gculaunch: hang \(", err0)), 2, err0)
        self.assertEqual(err0.count("--on-hang report: the ranks keep running"), 2, err0)
        self.assertNotIn("hang", err1)
        for job, ranks in ((node0, (0, 1)), (node1, (2, 3))):
            for rank in ranks:
                self.assertIn("[rank%d]: rank %d phase 2" % (rank, rank), job.stdout)


if __name__ == "__main__":
    unittest.main()
