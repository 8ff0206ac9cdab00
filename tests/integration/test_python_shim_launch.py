"""--python-shim end to end: real gculaunch, real Debian PyTorch (CPU, gloo),
two ranks per launch.  The shim's own rules are tested in depth by
test_python_shim.py with a direct harness; this file proves the launcher wires
it up: it writes the shim, puts it first on PYTHONPATH, and exports its own
pid so that exactly the ranks act."""
import json
import os
import unittest

import gltest
from test_python_shim import RANK_SCRIPT, SPAWN_SCRIPT

PY = gltest.PYTHON


def launch(tmp, script, flags, env=None, timeout=300):
    path = os.path.join(tmp, "rank_script.py")
    with open(path, "w") as f:
        f.write(script)
    reports = os.path.join(tmp, "reports")
    os.makedirs(reports, exist_ok=True)
    tag = gltest.new_tag()
    extra = {"REPORT_DIR": reports}
    extra.update(env or {})
    try:
        r = gltest.run([gltest.require_binary(), "--nproc-per-node", "2", "--standalone",
                        "--python", PY] + flags + [path], gltest.tagged_env(tag, extra=extra),
                       timeout=timeout, cwd=tmp)
        left = gltest.wait_no_tagged(tag, 10)
    finally:
        gltest.kill_tagged(tag)
    found = {}
    for name in os.listdir(reports):
        with open(os.path.join(reports, name)) as f:
            found[name[:-5]] = json.load(f)
    return r, found, left


class PythonShimLaunchTest(unittest.TestCase):
    def test_set_device_then_all_reduce_needs_the_shim(self):
        with gltest.TempDir() as tmp:
            r, reports, left = launch(tmp, RANK_SCRIPT, ["--device", "cpu"])
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("torch.cuda.set_device", r.stdout + r.stderr)
        self.assertEqual(reports, {})
        self.assertEqual(left, [])

        with gltest.TempDir() as tmp:
            r, reports, left = launch(tmp, RANK_SCRIPT, ["--device", "cpu", "--python-shim"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(left, [])
        for rank in (0, 1):
            report = reports["rank%d" % rank]
            self.assertTrue(report["initialized_at_start"])
            self.assertEqual(report["sum"], 3.0)
            self.assertEqual(report["current_device"], rank)
            self.assertEqual(report["shim_vars"], [])
            self.assertIsNone(report["pythonpath"])
            self.assertFalse(report["fell_back"])

    def test_the_users_sitecustomize_still_runs(self):
        with gltest.TempDir() as tmp:
            user = os.path.join(tmp, "user-site")
            os.makedirs(user)
            with open(os.path.join(user, "sitecustomize.py"), "w") as f:
                f.write("import os\n"
                        "open(os.path.join(os.environ['REPORT_DIR'], 'user-site-%s.json'"
                        " % os.environ['RANK']), 'w').write('{\"ran\": true}')\n")
            r, reports, _ = launch(tmp, RANK_SCRIPT, ["--device", "cpu", "--python-shim"],
                                   env={"PYTHONPATH": user})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(reports["user-site-0"], {"ran": True})
        self.assertEqual(reports["user-site-1"], {"ran": True})
        self.assertEqual(reports["rank1"]["pythonpath"], user)
        self.assertTrue(reports["rank1"]["initialized_at_start"])

    def test_spawned_children_of_a_rank_do_not_initialise_again(self):
        with gltest.TempDir() as tmp:
            r, reports, _ = launch(tmp, SPAWN_SCRIPT, ["--device", "cpu", "--python-shim"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for rank in (0, 1):
            self.assertTrue(reports["rank%d" % rank]["initialized"])
            for child in ("mp-child", "worker0", "worker1"):
                report = reports["%s-rank%d" % (child, rank)]
                self.assertFalse(report["initialized"], child)
                self.assertFalse(report["shim_module"], child)
                self.assertEqual(report["shim_vars"], [], child)

    def madeup_profile(self, tmp):
        profile = os.path.join(tmp, "madeup.yaml")
        with open(profile, "w") as f:
            f.write("name: madeup\nbackend: madeup\n")
        return profile

    def test_a_missing_backend_falls_back_with_one_warning_per_rank(self):
        with gltest.TempDir() as tmp:
            r, reports, _ = launch(tmp, RANK_SCRIPT,
                                   ["--device", self.madeup_profile(tmp), "--python-shim"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        output = r.stdout + r.stderr
        for rank in (0, 1):
            line = ("gculaunch: warning: rank %d: torch.distributed backend 'madeup' is not "
                    "available (ValueError: Invalid backend: 'madeup'); using gloo instead "
                    "(--no-backend-fallback forbids this)" % rank)
            self.assertEqual(output.count(line), 1, output)
            self.assertTrue(reports["rank%d" % rank]["fell_back"])
            self.assertEqual(reports["rank%d" % rank]["sum"], 3.0)

    def test_no_backend_fallback_stops_the_ranks_with_a_clear_error(self):
        with gltest.TempDir() as tmp:
            r, reports, left = launch(tmp, RANK_SCRIPT,
                                      ["--device", self.madeup_profile(tmp), "--python-shim",
                                       "--no-backend-fallback"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        # The first rank to fail stops the other, which may not get as far as its own line.
        self.assertRegex(r.stdout + r.stderr,
                         r"gculaunch: error: rank [01]: torch\.distributed backend 'madeup' is "
                         r"not available \(ValueError: Invalid backend: 'madeup'\) and "
                         r"--no-backend-fallback forbids using gloo \(fix: run gculaunch check "
                         r"to see what is missing, or drop --no-backend-fallback\)")
        self.assertEqual(reports, {})
        self.assertEqual(left, [])

    def test_dry_run_shows_the_pythonpath_change(self):
        tag = gltest.new_tag()
        r = gltest.run([gltest.require_binary(), "--dry-run", "--format", "json",
                        "--nproc-per-node", "2", "--device", "cpu", "--python-shim",
                        "--python", PY, "--log-dir", "/logs", "--run-id", "r1", "train.py"],
                       gltest.tagged_env(tag, extra={"PYTHONPATH": "/opt/project"}))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        env = out["ranks"][1]["env"]
        # gculaunch's private directory, never below --log-dir (docs/security.md).
        self.assertEqual(env["PYTHONPATH"],
                         "<temporary directory created at launch>/python-shim:/opt/project")
        self.assertEqual(env["GCULAUNCH_SHIM_PARENT"], "<gculaunch pid>")
        self.assertTrue(any(n.startswith("--python-shim: each rank loads gculaunch's "
                                         "sitecustomize") for n in out["notes"]))


if __name__ == "__main__":
    unittest.main()
