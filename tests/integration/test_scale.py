"""The scale harness (bench/scale.py, issue 46) at a small size: 64 nodes x 8 ranks, node 0
the real gculaunch, nodes 1..63 the real agent code in `scale_sim nodes`.  Asserts what must
hold at any size, never how fast: every node was given its ranks (the nodes of each epoch hold
every global rank of the world exactly once, with one WORLD_SIZE), every rank connected and
passed the barrier of init_process_group and read the unique id, and the job re-formed after
a rank's failure and after a node was killed and started again.  The harness's own numbers
are printed for the log only."""
import json
import os
import subprocess
import sys
import unittest

SOURCE = os.environ.get("GCULAUNCH_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("GCULAUNCH_BUILD_DIR", os.path.join(SOURCE, "build"))
NODES, RANKS = 64, 8


class ScaleHarness(unittest.TestCase):
    def run_bench(self, *extra):
        cmd = [sys.executable, "-m", "bench.scale", "--nodes", str(NODES), "--ranks-per-node",
               str(RANKS), "--json", "--phase", "60", "--timeout", "150"] + list(extra)
        env = dict(os.environ, BUILD_DIR=BUILD, PYTHONPATH=SOURCE)
        out = subprocess.run(cmd, cwd=SOURCE, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=200)
        print(out.stdout, out.stderr[-3000:], sep="\n")
        results = {}
        for line in out.stdout.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                results[record["measurement"]] = record["value"]
        return out.returncode, results

    def check(self, torch):
        code, results = self.run_bench("--torch", torch)
        self.assertNotIn("error", results)
        self.assertEqual(code, 0)
        # check_ranks passed for epoch 0; every phase's barrier was reached (its time exists)
        self.assertEqual(results["ranks_checked"], NODES * RANKS)
        for name in ("rendezvous_s", "connect_barrier_s", "unique_id_s", "restart_s",
                     "node_lost_s"):
            self.assertGreater(results[name], 0, name)
        self.assertLessEqual(results["rendezvous_s"], results["connect_barrier_s"])
        # torch 1.13: two connections per rank reach node 0's store, and the agents' links
        self.assertGreaterEqual(results["store_sockets"],
                                NODES * RANKS * (2 if torch == "1.13" else 1))

    def test_torch113_traffic(self):
        self.check("1.13")

    def test_torch2_traffic(self):
        self.check("2.x")


if __name__ == "__main__":
    unittest.main()
