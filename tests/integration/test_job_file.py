"""--job with the real binary: a job file runs a real two-rank gloo job, the
config for the job's card count reaches the script, flags override the file,
and bad files stop with one line naming file:line and key."""
import json
import os
import resource
import subprocess
import textwrap
import unittest

import gltest

PY = gltest.PYTHON

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    with open(os.path.join(os.environ["OUT"], "rank%s.json" % os.environ["RANK"]), "w") as f:
        json.dump({"argv": sys.argv[1:], "sum": t.item(), "env": os.environ.get("FROM_FILE"),
                   "omp": os.environ.get("OMP_NUM_THREADS")}, f)
""")


class JobFileTest(unittest.TestCase):
    def write(self, tmp, text):
        with open(os.path.join(tmp, "train.py"), "w") as f:
            f.write(SCRIPT)
        path = os.path.join(tmp, "job.yaml")
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_a_job_file_runs_a_job_with_the_config_for_its_card_count(self):
        with gltest.TempDir() as tmp:
            job = self.write(tmp, """
                script: train.py
                args: ["{config}", --epochs, "3"]
                configs: {1: one.py, 2: two.py}
                device: cpu
                nproc_per_node: 2
                standalone: true
                python: %s
                env: {FROM_FILE: "yes", OMP_NUM_THREADS: "3"}
                """ % PY)
            tag = gltest.new_tag()
            env = gltest.tagged_env(tag, extra={"OUT": tmp})
            try:
                r = gltest.run([gltest.require_binary(), "--job", job], env, cwd=tmp, timeout=300)
                one = gltest.run([gltest.require_binary(), "--job", job, "--nproc-per-node", "1"],
                                 env, cwd=tmp, timeout=300)
                with open(os.path.join(tmp, "rank1.json")) as f:
                    rank1 = json.load(f)
                with open(os.path.join(tmp, "rank0.json")) as f:
                    rank0_single = json.load(f)  # the second, 1-rank job wrote it last
            finally:
                gltest.kill_tagged(tag)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(rank1, {"argv": ["two.py", "--epochs", "3"], "sum": 2.0, "env": "yes",
                                 "omp": "3"})
        self.assertEqual(one.returncode, 0, one.stdout + one.stderr)
        self.assertEqual(rank0_single["argv"], ["one.py", "--epochs", "3"])
        self.assertEqual(rank0_single["sum"], 1.0)

    def test_the_dry_run_shows_the_merged_job(self):
        with gltest.TempDir() as tmp:
            job = self.write(tmp, """
                script: train.py
                args: ["{config}"]
                configs: {8: eight.py, 16: sixteen.py}
                device: gcu
                nproc_per_node: 8
                master_addr: node0
                """)
            r = gltest.run([gltest.require_binary(), "--job", job, "--nnodes", "2",
                            "--node-rank", "1", "--dry-run", "--format", "json", "--python", PY],
                           gltest.tagged_env(gltest.new_tag()), cwd=tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["world_size"], 16)
        self.assertEqual(out["master_addr"], "node0")
        self.assertEqual(out["ranks"][0]["argv"], [PY, "-u", "train.py", "sixteen.py"])
        self.assertIn("config sixteen.py for 16 cards (%s:4)" % job, out["notes"])

    def test_a_bad_key_is_one_line_naming_file_line_and_key(self):
        with gltest.TempDir() as tmp:
            job = self.write(tmp, "script: train.py\nnproc_per_nodes: 8\n")
            r = gltest.run([gltest.require_binary(), "--job", job],
                           gltest.tagged_env(gltest.new_tag()), cwd=tmp)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.splitlines(), [
            "gculaunch: %s:2: unknown key 'nproc_per_nodes' (fix: did you mean nproc_per_node? "
            "keys are script, args, env, configs and gculaunch's flags (nproc_per_node, device, "
            "log_dir, ...; see gculaunch --help))" % job])

    def test_dev_zero_as_a_job_or_password_file_is_one_line(self):
        # Under a 1 GiB address-space limit an unbounded read ends in std::bad_alloc (134).
        def limited():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

        def run(args):
            return subprocess.run([gltest.require_binary()] + args, capture_output=True,
                                  text=True, timeout=120, preexec_fn=limited,
                                  env=gltest.tagged_env(gltest.new_tag()))

        r = run(["--job", "/dev/zero", "--dry-run"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr.splitlines(), [
            "gculaunch: --job: '/dev/zero' is a character device, not a regular file "
            "(fix: name a regular file)"])
        r = run(["--dry-run", "--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:2379",
                 "--rdzv-id", "j", "--rdzv-conf", "user=u,password_file=/dev/zero", "x.py"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("password_file=/dev/zero: '/dev/zero' is a character device, not a "
                      "regular file (fix: name a regular file)", r.stderr)


if __name__ == "__main__":
    unittest.main()
