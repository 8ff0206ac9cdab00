"""The health gate on several nodes (issue 44): simulated hosts (gltest.SimulatedHosts, one
network namespace per node), one gculaunch per host running examples/ckpt_train.py with one
real gloo rank, and a --health-check script that fails on the node the test marks bad from
attempt 1 on (GCULAUNCH_HEALTH_ATTEMPT), after rank 0 failed once in attempt 0 (--fail-rank).

Scenarios: an elastic 2:3 job of three nodes: the bad node leaves (exit 5) and the two others
re-form and finish; a fixed-size job of two: the bad node leaves, the job waits, a replacement
joins and the job finishes; node 0 unhealthy on the built-in store: it exits 5 and the other
node sees node 0 lost (exit 4).
"""
import json
import os
import unittest

import gltest

PORT = 29500
STEPS = 30
EVERY = 5
STEP_TIME = 0.15
LAST_CALL = 2

CHECK = r"""#!/bin/sh
echo "node=$HEALTH_NODE attempt=$GCULAUNCH_HEALTH_ATTEMPT" >> "$HEALTH_SEEN"
if [ -n "$HEALTH_BAD_FROM" ] && [ "$GCULAUNCH_HEALTH_ATTEMPT" -ge "$HEALTH_BAD_FROM" ]; then
  echo "card 0: uncorrectable ECC errors (simulated)"
  exit 1
fi
exit 0
"""


class HealthMultinode(gltest.CheckpointJobCase):
    WORK_PREFIX = "gltest-health-mn-"

    @classmethod
    def setUpClass(cls):
        cls.final_state = gltest.ckpt_example().simulate(STEPS)[-1]

    def node(self, hosts, host, node_rank, nnodes, bad_from=None, rdzv_timeout=30,
             fail_rank0=True):
        check = os.path.join(self.work, "check.sh")
        if not os.path.exists(check):
            gltest.write_script(self.work, "check.sh", CHECK)
        args = (["--nnodes", nnodes, "--nproc-per-node", "1", "--device", "cpu",
                 "--grace-period", "5", "--max-restarts", "3", "--rdzv-timeout",
                 str(rdzv_timeout), "--rdzv-conf", "last_call_timeout=%d" % LAST_CALL,
                 "--health-check", check, "--summary-json",
                 os.path.join(self.work, "summary.%d.json" % host)]
                + ["--python", gltest.PYTHON, gltest.CKPT_EXAMPLE, self.ckpt, "--steps",
                   str(STEPS), "--ckpt-every", str(EVERY), "--step-time", str(STEP_TIME),
                   "--journal", self.journal, "--result", self.result, "--pg-timeout", "60"]
                + (["--fail-rank", "0", "--fail-step", "8"] if fail_rank0 else []))
        env = {"RANK": str(node_rank), "HEALTH_NODE": str(host),
               "HEALTH_SEEN": os.path.join(self.work, "seen")}
        if bad_from is not None:
            env["HEALTH_BAD_FROM"] = str(bad_from)
        job = gltest.NodeJob(hosts, host, 3, PORT, args, self.tag, extra_env=env)
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def summary(self, host):
        with open(os.path.join(self.work, "summary.%d.json" % host)) as f:
            return json.load(f)

    def assert_result(self):
        with open(self.result) as f:
            self.assertEqual(json.load(f)["state"], self.final_state)

    def test_elastic_job_reforms_without_the_unhealthy_node(self):
        hosts = self.hosts(3)
        jobs = [self.node(hosts, i, 0 if i == 0 else 1, "2:3", bad_from=1 if i == 2 else None)
                for i in range(3)]
        self.assertEqual(jobs[2].wait(timeout=120), 5, jobs[2].stderr[-4000:])
        self.assertIn("this node is unhealthy: --health-check: ", jobs[2].stderr)
        self.assertIn("card 0: uncorrectable ECC errors (simulated)", jobs[2].stderr)
        self.assertEqual(self.summary(2)["outcome"], "unhealthy")
        codes = [job.wait(timeout=180) for job in jobs[:2]]
        self.assertEqual(codes, [0, 0], "\n".join("--- stderr:\n" + j.stderr[-4000:]
                                                  for j in jobs[:2]))
        self.assert_result()
        self.assertEqual(self.worlds()[0], (3, 0), self.worlds())
        self.assertEqual(self.worlds()[-1][0], 2, self.worlds())
        self.assertRegex(jobs[0].stderr, r"node \d+ \(\S+, 198\.18\.0\.3\) .*its cards are "
                                         r"unhealthy")
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "tagged processes survived")

    def test_fixed_size_job_waits_for_a_replacement(self):
        hosts = self.hosts(2, spares=1)
        n0 = self.node(hosts, 0, 0, "2")
        n1 = self.node(hosts, 1, 1, "2", bad_from=1)
        self.assertEqual(n1.wait(timeout=120), 5, n1.stderr[-4000:])
        self.assertIn("this node is unhealthy: ", n1.stderr)
        self.wait_until(lambda: "its cards are unhealthy" in n0.stderr,
                        "node 0 to log the unhealthy node", [n0], timeout=30)
        replacement = self.node(hosts, 2, 1, "2")
        codes = [job.wait(timeout=180) for job in (n0, replacement)]
        self.assertEqual(codes, [0, 0], n0.stderr[-4000:] + replacement.stderr[-3000:])
        self.assert_result()
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "tagged processes survived")

    def test_node0_unhealthy_on_the_store_is_node0_lost_for_the_others(self):
        hosts = self.hosts(2)
        n0 = self.node(hosts, 0, 0, "2", bad_from=0, rdzv_timeout=6, fail_rank0=False)
        n1 = self.node(hosts, 1, 1, "2", rdzv_timeout=6, fail_rank0=False)
        self.assertEqual(n0.wait(timeout=60), 5, n0.stderr[-4000:])
        self.assertEqual(n1.wait(timeout=90), 4, n1.stderr[-4000:])
        self.assertRegex(n1.stderr, r"node 0 .*(lost|gone|unreachable)")
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "tagged processes survived")


if __name__ == "__main__":
    unittest.main()
