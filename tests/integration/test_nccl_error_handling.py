"""The NCCL error-handling variable follows the ranks' torch (issue 28, item 5): torchrun up
to 2.1 sets NCCL_ASYNC_ERROR_HANDLING=1, 2.2 and later TORCH_NCCL_ASYNC_ERROR_HANDLING=1, and
gculaunch sets the name the ranks' torch's torchrun would, learnt by running the ranks'
interpreter once without importing torch (and cached); a launch reads torch's version file
from the interpreter's layout instead of waiting for that (issue 38).  Both names when the
version is not known, and with --no-python.  Real launches; each rank writes down the two
variables."""
import json
import os
import unittest

import gltest

NAMES = ("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING")

# Writes the two variables (None: unset) to <dir>/rank<LOCAL_RANK>.json; never imports torch.
RANK_SCRIPT = r"""#!/usr/bin/python3
import json, os, sys
names = ("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING")
with open(os.path.join(sys.argv[1], "rank%s.json" % os.environ["LOCAL_RANK"]), "w") as f:
    json.dump({n: os.environ.get(n) for n in names}, f)
"""

# A torch that must not be imported: importing it leaves a mark and fails.
FAKE_INIT = r"""import os
open(os.path.join(os.path.dirname(__file__), "..", "IMPORTED"), "w").close()
raise RuntimeError("gculaunch's probe imported torch")
"""


class NcclErrorHandling(unittest.TestCase):
    def setUp(self):
        self.tmp = gltest.TempDir(prefix="gltest-nccl-")
        self.dir = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.script = os.path.join(self.dir, "rank.py")
        with open(self.script, "w") as f:
            f.write(RANK_SCRIPT)
        os.chmod(self.script, 0o755)
        # A cache of this test's own (XDG_CACHE_HOME): the first launch misses, the next hit.
        self.cache = os.path.join(self.dir, "cache")
        os.makedirs(os.path.join(self.cache, "gculaunch", "torch-versions"), mode=0o700)
        self.out = os.path.join(self.dir, "out")
        os.mkdir(self.out)

    def fake_torch(self, version):
        site = os.path.join(self.dir, "site")
        os.makedirs(os.path.join(site, "torch"))
        with open(os.path.join(site, "torch", "__init__.py"), "w") as f:
            f.write(FAKE_INIT)
        with open(os.path.join(site, "torch", "version.py"), "w") as f:
            f.write("__version__ = '%s'\ndebug = False\n" % version)
        return site

    def env(self, extra=None):
        env = {"XDG_CACHE_HOME": self.cache}
        env.update(extra or {})
        return gltest.tagged_env(gltest.new_tag(), extra=env)

    def launch(self, flags, extra_env=None, nproc=2):
        """Runs a real launch to its end; returns [{name: value}, ...] by local rank."""
        for name in os.listdir(self.out):
            os.unlink(os.path.join(self.out, name))
        args = [gltest.require_binary(), "--nproc-per-node", str(nproc), "--device", "cpu"]
        done = gltest.run(args + flags + [self.script, self.out], self.env(extra_env))
        self.assertEqual(done.returncode, 0, done.stderr)
        ranks = []
        for local_rank in range(nproc):
            with open(os.path.join(self.out, "rank%d.json" % local_rank)) as f:
                ranks.append(json.load(f))
        return ranks

    def dry_run(self, flags, extra_env=None):
        args = [gltest.require_binary(), "--dry-run", "--format", "json", "--device", "cpu"]
        done = gltest.run(args + flags + [self.script, self.out], self.env(extra_env))
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout)

    def assertOnly(self, ranks, name, value="1"):
        for rank in ranks:
            self.assertEqual(rank, {n: (value if n == name else None) for n in NAMES})

    def test_torch113_gets_the_old_name_only(self):
        flags = ["--python", gltest.PYTHON]
        plan = self.dry_run(flags)
        self.assertEqual(plan["torch"]["nccl_error_handling"], ["NCCL_ASYNC_ERROR_HANDLING"])
        self.assertTrue(plan["torch"]["version"].startswith("1.13"), plan["torch"])
        self.assertEqual(plan["torch"]["how"],
                         "found by running %s once; cached" % gltest.PYTHON)
        self.assertNotIn("TORCH_NCCL_ASYNC_ERROR_HANDLING", plan["ranks"][0]["env"])
        # The launch finds it in the cache now.
        self.assertOnly(self.launch(flags), "NCCL_ASYNC_ERROR_HANDLING")
        self.assertTrue(self.dry_run(flags)["torch"]["how"].startswith("from the cache"))
        # Without a cache (nothing usable there) the launch probes, with the same answer.
        os.chmod(self.cache, 0o777)
        self.addCleanup(os.chmod, self.cache, 0o700)
        self.assertOnly(self.launch(flags), "NCCL_ASYNC_ERROR_HANDLING")

    def test_torch26_gets_the_new_name_only_and_torch_is_not_imported(self):
        site = self.fake_torch("2.6.0")
        extra = {"PYTHONPATH": site}
        flags = ["--python", gltest.PYTHON]
        self.assertOnly(self.launch(flags, extra), "TORCH_NCCL_ASYNC_ERROR_HANDLING")
        self.assertFalse(os.path.exists(os.path.join(site, "IMPORTED")),
                         "the probe imported torch")
        plan = self.dry_run(flags, extra)
        self.assertEqual(plan["torch"]["version"], "2.6.0")
        # From the cache when the launch's background run finished before the ranks did.
        self.assertRegex(plan["torch"]["text"],
                         r"^torch 2\.6\.0 \((from the cache; found by running %s earlier|"
                         r"found by running %s once; cached)\) -> "
                         r"TORCH_NCCL_ASYNC_ERROR_HANDLING$" % (gltest.PYTHON, gltest.PYTHON))
        # An upgrade in place is seen at the next launch.
        with open(os.path.join(site, "torch", "version.py"), "w") as f:
            f.write("__version__ = '2.1.2'\n")
        self.assertOnly(self.launch(flags, extra), "NCCL_ASYNC_ERROR_HANDLING")

    def test_no_python_gets_both(self):
        ranks = self.launch(["--no-python"])
        for rank in ranks:
            self.assertEqual(rank, {n: "1" for n in NAMES})
        plan = self.dry_run(["--no-python"])
        self.assertEqual(plan["torch"]["text"],
                         "torch version not looked for (--no-python) -> "
                         "NCCL_ASYNC_ERROR_HANDLING and TORCH_NCCL_ASYNC_ERROR_HANDLING")

    def test_unknown_version_gets_both(self):
        # An interpreter that runs the rank but does not answer the probe.
        python = gltest.interpreter_file(
            self.dir, ["/bin/sh", "-c", 'case "$1" in -c) exit 3;; esac; exec %s "$@"'
                       % gltest.PYTHON, "sh"])
        ranks = self.launch(["--python", python])
        for rank in ranks:
            self.assertEqual(rank, {n: "1" for n in NAMES})

    def test_a_users_value_is_kept(self):
        site = self.fake_torch("2.6.0")
        ranks = self.launch(["--python", gltest.PYTHON],
                            {"PYTHONPATH": site, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"})
        self.assertOnly(ranks, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
        ranks = self.launch(["--python", gltest.PYTHON, "--env",
                             "NCCL_ASYNC_ERROR_HANDLING=3"])
        self.assertOnly(ranks, "NCCL_ASYNC_ERROR_HANDLING", "3")

    def test_torch26_in_the_trixie_root(self):
        # The real torch 2.6 of the trixie root, behind an interpreter wrapper: the probe
        # reads version.py inside the root, where gculaunch cannot look.  Such an answer can
        # neither be found from the files nor cached (gculaunch cannot re-check it), and a
        # launch does not wait for the interpreter (issue 38): both names, and the dry run
        # says what running the interpreter found.
        python = gltest.interpreter_file(self.dir, gltest.torch2_python())
        plan = self.dry_run(["--python", python])
        self.assertIsNone(plan["torch"]["version"], plan["torch"])
        self.assertIn("; running %s found torch 2.6" % python, plan["torch"]["how"])
        self.assertIn("not cached: it does not see", plan["torch"]["how"])
        for rank in self.launch(["--python", python], nproc=1):
            self.assertEqual(rank, {n: "1" for n in NAMES})


if __name__ == "__main__":
    unittest.main()
