"""--cpu-affinity end to end on this machine: the ranks gculaunch starts run
on exactly the CPUs the plan gives them (their /proc/self/status
Cpus_allowed_list), which the dry run shows as GCULAUNCH_CPUS."""
import json
import os
import textwrap
import unittest

import gltest

PY = gltest.PYTHON

REPORT = textwrap.dedent("""
    import json, os, sys
    with open("/proc/self/status") as f:
        allowed = [l.split(":", 1)[1].strip() for l in f if l.startswith("Cpus_allowed_list")][0]
    with open(os.path.join(sys.argv[1], "rank%s.json" % os.environ["LOCAL_RANK"]), "w") as f:
        json.dump({"allowed": allowed, "cpus": os.environ.get("GCULAUNCH_CPUS"),
                   "omp": os.environ.get("OMP_NUM_THREADS")}, f)
""")


def parse_list(text):
    cpus = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


class CpuAffinityLaunchTest(unittest.TestCase):
    def run_job(self, flags, nproc, env=None):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "report.py")
            with open(script, "w") as f:
                f.write(REPORT)
            tag = gltest.new_tag()
            base = ["--nproc-per-node", str(nproc), "--device", "cpu", "--standalone",
                    "--python", PY] + flags
            dry = gltest.run([gltest.require_binary(), "--dry-run", "--format", "json"] + base +
                             [script, tmp], gltest.tagged_env(tag, extra=env))
            self.assertEqual(dry.returncode, 0, dry.stderr)
            try:
                r = gltest.run([gltest.require_binary()] + base + [script, tmp],
                               gltest.tagged_env(tag, extra=env), timeout=300)
            finally:
                gltest.kill_tagged(tag)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            reports = []
            for rank in range(nproc):
                with open(os.path.join(tmp, "rank%d.json" % rank)) as f:
                    reports.append(json.load(f))
        planned = [rank["env"].get("GCULAUNCH_CPUS") for rank in json.loads(dry.stdout)["ranks"]]
        return planned, reports

    def test_spread_pins_each_rank_to_its_share(self):
        nproc = 2
        planned, reports = self.run_job(["--cpu-affinity", "spread"], nproc)
        mine = parse_list(open("/proc/self/status").read().split("Cpus_allowed_list:")[1]
                          .split("\n")[0].strip())
        shares = []
        for rank, report in enumerate(reports):
            self.assertEqual(report["cpus"], planned[rank])
            self.assertEqual(parse_list(report["allowed"]), parse_list(planned[rank]))
            self.assertEqual(report["omp"], str(len(parse_list(planned[rank]))))
            shares.append(parse_list(planned[rank]))
        if len(mine) >= nproc:
            self.assertEqual(shares[0] & shares[1], set())  # disjoint when there is room
        self.assertEqual(shares[0] | shares[1], mine)     # together: every CPU we may use

    def test_without_affinity_ranks_keep_gculaunchs_mask(self):
        planned, reports = self.run_job([], 2)
        self.assertEqual(planned, [None, None])
        mine = open("/proc/self/status").read().split("Cpus_allowed_list:")[1].split("\n")[0]
        for report in reports:
            self.assertIsNone(report["cpus"])
            self.assertEqual(parse_list(report["allowed"]), parse_list(mine.strip()))
            self.assertEqual(report["omp"], "1")

    def test_the_users_omp_num_threads_wins(self):
        _, reports = self.run_job(["--cpu-affinity", "spread"], 2, env={"OMP_NUM_THREADS": "7"})
        self.assertEqual([r["omp"] for r in reports], ["7", "7"])


if __name__ == "__main__":
    unittest.main()
