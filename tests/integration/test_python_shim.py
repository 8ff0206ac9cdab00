"""The --python-shim sitecustomize, driven directly (no launcher): this test
process plays gculaunch, starting "ranks" as its own children with the
variables gculaunch gives them (python_shim.h), the real Debian PyTorch and
gloo over loopback.  The launcher-level tests are in test_python_shim_launch.py."""
import json
import os
import shutil
import subprocess
import textwrap
import unittest

import gltest

PY = gltest.PYTHON
PYTHON_DIR = os.path.join(gltest.SOURCE_DIR, "launcher", "frontend", "python")
SHIM_SOURCE = os.path.join(PYTHON_DIR, "python_shim", "sitecustomize.py")
SITE_SOURCE = os.path.join(PYTHON_DIR, "_gculaunch_site.py")  # written beside it

# torch.cuda.set_device(LOCAL_RANK) (what MMEngine's init_dist does first), then the
# collective the job needs.  Reports what it saw to $REPORT_DIR/rank<N>.json.
RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    import torch.distributed as dist
    report = {"initialized_at_start": dist.is_available() and dist.is_initialized(),
              "shim_vars": sorted(k for k in os.environ if k.startswith("GCULAUNCH_SHIM_")),
              "pythonpath": os.environ.get("PYTHONPATH"),
              "shim_module": "gculaunch_shim" in sys.modules}
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    report["current_device"] = torch.cuda.current_device()
    report["device_count"] = torch.cuda.device_count()
    if not dist.is_initialized():
        dist.init_process_group("gloo")  # a script that does it itself
    t = torch.ones(1) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    report["sum"] = t.item()
    report["backend"] = dist.get_backend()
    state = sys.modules.get("gculaunch_shim")
    report["fell_back"] = getattr(state, "fell_back", None)
    with open(os.path.join(os.environ["REPORT_DIR"], "rank%s.json" % os.environ["RANK"]), "w") as f:
        json.dump(report, f)
""")

# A rank that starts a multiprocessing child and DataLoader workers with "spawn":
# both re-import site modules and must not initialise a process group again.
SPAWN_SCRIPT = textwrap.dedent("""
    import json, multiprocessing, os, sys
    import torch
    import torch.distributed as dist

    def describe(tag):
        import torch.distributed as d
        with open(os.path.join(os.environ["REPORT_DIR"], tag + ".json"), "w") as f:
            json.dump({"initialized": d.is_available() and d.is_initialized(),
                       "shim_module": "gculaunch_shim" in sys.modules,
                       "shim_vars": sorted(k for k in os.environ
                                           if k.startswith("GCULAUNCH_SHIM_")),
                       "pythonpath": os.environ.get("PYTHONPATH")}, f)

    def child():
        describe("mp-child-rank%s" % os.environ["RANK"])

    def worker_init(worker_id):
        describe("worker%d-rank%s" % (worker_id, os.environ["RANK"]))

    if __name__ == "__main__":
        assert dist.is_initialized(), "the shim did not initialise the rank"
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=child)
        p.start()
        p.join()
        assert p.exitcode == 0, p.exitcode
        data = torch.utils.data.TensorDataset(torch.arange(4.0))
        loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=2,
                                             multiprocessing_context="spawn",
                                             worker_init_fn=worker_init)
        assert sum(float(b[0].sum()) for b in loader) == 6.0
        t = torch.ones(1)
        dist.all_reduce(t)
        describe("rank%s" % os.environ["RANK"])
""")


def write_shim(directory):
    os.makedirs(directory)
    shutil.copy(SHIM_SOURCE, os.path.join(directory, "sitecustomize.py"))
    shutil.copy(SITE_SOURCE, os.path.join(directory, "_gculaunch_site.py"))


def rank_env(rank, world, port, shim_dir=None, backend="gloo", fallback="1", module="",
             patch_cuda="1", parent=None, pythonpath=None, extra=None):
    env = {
        "PATH": "/usr/bin:/bin",
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "GCULAUNCH_BACKEND": backend, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
    }
    paths = []
    if shim_dir:
        paths.append(shim_dir)
        env.update({"GCULAUNCH_SHIM_PARENT": str(os.getpid() if parent is None else parent),
                    "GCULAUNCH_SHIM_DIR": shim_dir, "GCULAUNCH_SHIM_FALLBACK": fallback,
                    "GCULAUNCH_SHIM_MODULE": module, "GCULAUNCH_SHIM_PATCH_CUDA": patch_cuda,
                    "GCULAUNCH_SHIM_VISIBLE_ENV": ""})
    if pythonpath:
        paths.append(pythonpath)
    if paths:
        env["PYTHONPATH"] = ":".join(paths)
    env.update(extra or {})
    return env


def run_ranks(script, world, tmp, **kwargs):
    """Starts `world` ranks of `script` as children of this process; returns
    [(returncode, stderr)] and the reports they wrote."""
    path = os.path.join(tmp, "rank_script.py")
    with open(path, "w") as f:
        f.write(script)
    reports = os.path.join(tmp, "reports")
    os.makedirs(reports, exist_ok=True)
    port = gltest.free_port()
    tag = gltest.new_tag()
    procs = []
    for rank in range(world):
        env = rank_env(rank, world, port, **kwargs)
        env["REPORT_DIR"] = reports
        env["GCULAUNCH_TEST_TAG"] = tag
        procs.append(subprocess.Popen([PY, path], env=env, cwd=tmp, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            results.append((p.returncode, err))
    finally:
        gltest.kill_tagged(tag)
    found = {}
    for name in os.listdir(reports):
        with open(os.path.join(reports, name)) as f:
            found[name[:-5]] = json.load(f)
    return results, found


class PythonShimTest(unittest.TestCase):
    def test_set_device_then_all_reduce_fails_without_and_works_with_the_shim(self):
        with gltest.TempDir() as tmp:
            results, reports = run_ranks(RANK_SCRIPT, 2, tmp)
        for code, err in results:
            self.assertNotEqual(code, 0)
            self.assertIn("torch.cuda.set_device", err)
        self.assertEqual(reports, {})

        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            results, reports = run_ranks(RANK_SCRIPT, 2, tmp, shim_dir=shim)
        for code, err in results:
            self.assertEqual(code, 0, err)
            self.assertNotIn("gculaunch:", err)
        for rank in (0, 1):
            r = reports["rank%d" % rank]
            self.assertTrue(r["initialized_at_start"])
            self.assertEqual(r["sum"], 3.0)
            self.assertEqual(r["backend"], "gloo")
            self.assertEqual(r["current_device"], rank)
            self.assertEqual(r["device_count"], 0)
            self.assertEqual(r["shim_vars"], [])        # removed before user code ran
            self.assertIsNone(r["pythonpath"])          # the shim's entry, and nothing else
            self.assertTrue(r["shim_module"])
            self.assertFalse(r["fell_back"])

    def test_the_users_sitecustomize_still_runs(self):
        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            user = os.path.join(tmp, "user-site")
            os.makedirs(user)
            with open(os.path.join(user, "sitecustomize.py"), "w") as f:
                f.write("import os\n"
                        "open(os.path.join(os.environ['REPORT_DIR'], 'user-site-%s.json'"
                        " % os.environ['RANK']), 'w').write('{\"ran\": true}')\n")
            results, reports = run_ranks(RANK_SCRIPT, 2, tmp, shim_dir=shim, pythonpath=user)
        for code, err in results:
            self.assertEqual(code, 0, err)
        self.assertEqual(reports["user-site-0"], {"ran": True})
        self.assertEqual(reports["user-site-1"], {"ran": True})
        self.assertEqual(reports["rank0"]["pythonpath"], user)  # the user's entry stays
        self.assertTrue(reports["rank0"]["initialized_at_start"])

    def test_spawned_children_and_dataloader_workers_do_not_initialise_again(self):
        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            results, reports = run_ranks(SPAWN_SCRIPT, 2, tmp, shim_dir=shim)
        for code, err in results:
            self.assertEqual(code, 0, err)
        for rank in (0, 1):
            self.assertTrue(reports["rank%d" % rank]["initialized"])
            self.assertTrue(reports["rank%d" % rank]["shim_module"])
            for child in ("mp-child", "worker0", "worker1"):
                r = reports["%s-rank%d" % (child, rank)]
                self.assertFalse(r["initialized"], child)
                self.assertFalse(r["shim_module"], child)
                self.assertEqual(r["shim_vars"], [], child)
                self.assertIsNone(r["pythonpath"], child)

    def test_only_the_process_gculaunch_started_acts(self):
        # The variables reach a process whose parent is not GCULAUNCH_SHIM_PARENT
        # (as if inherited past a wrapper): it must not initialise anything,
        # and still cleans the environment for its own children.
        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            results, reports = run_ranks(RANK_SCRIPT, 1, tmp, shim_dir=shim, parent=1)
        code, err = results[0]
        self.assertNotEqual(code, 0)  # set_device fails again: no shim acted
        self.assertIn("torch.cuda.set_device", err)
        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            probe = os.path.join(tmp, "probe.py")
            with open(probe, "w") as f:
                f.write("import os, sys, json\n"
                        "print(json.dumps({'vars': sorted(k for k in os.environ if "
                        "k.startswith('GCULAUNCH_SHIM_')), 'module': 'gculaunch_shim' in "
                        "sys.modules}))\n")
            env = rank_env(0, 1, 1, shim_dir=shim, parent=1)
            out = subprocess.run([PY, probe], env=env, capture_output=True, text=True,
                                 timeout=120)
        self.assertEqual(json.loads(out.stdout), {"vars": [], "module": False})

    def test_missing_backend_falls_back_to_gloo_with_one_warning_per_rank(self):
        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            results, reports = run_ranks(RANK_SCRIPT, 2, tmp, shim_dir=shim, backend="madeup")
        for rank, (code, err) in enumerate(results):
            self.assertEqual(code, 0, err)
            warnings = [l for l in err.splitlines() if l.startswith("gculaunch:")]
            self.assertEqual(warnings, [
                "gculaunch: warning: rank %d: torch.distributed backend 'madeup' is not "
                "available (ValueError: Invalid backend: 'madeup'); using gloo instead "
                "(--no-backend-fallback forbids this)" % rank])
            self.assertTrue(reports["rank%d" % rank]["fell_back"])
            self.assertEqual(reports["rank%d" % rank]["backend"], "gloo")
            self.assertEqual(reports["rank%d" % rank]["sum"], 3.0)

    def test_no_fallback_stops_the_rank_with_a_clear_error(self):
        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            results, reports = run_ranks(RANK_SCRIPT, 2, tmp, shim_dir=shim, backend="madeup",
                                         fallback="0")
        for rank, (code, err) in enumerate(results):
            self.assertEqual(code, 1)
            self.assertEqual(err.strip().splitlines(), [
                "gculaunch: error: rank %d: torch.distributed backend 'madeup' is not available "
                "(ValueError: Invalid backend: 'madeup') and --no-backend-fallback forbids using "
                "gloo (fix: run gculaunch check to see what is missing, or drop "
                "--no-backend-fallback)" % rank])
        self.assertEqual(reports, {})  # the user's script never ran

    def test_vendor_module_takes_the_cuda_device_calls(self):
        with gltest.TempDir() as tmp:
            shim = os.path.join(tmp, "run", "python-shim")
            write_shim(shim)
            vendor = os.path.join(tmp, "vendor", "fake_gcu")
            os.makedirs(vendor)
            with open(os.path.join(vendor, "__init__.py"), "w") as f:
                f.write("_current = [None]\n"
                        "def set_device(i):\n    _current[0] = 100 + i\n"
                        "def current_device():\n    return _current[0]\n"
                        "def device_count():\n    return 8\n")
            results, reports = run_ranks(RANK_SCRIPT, 2, tmp, shim_dir=shim, module="fake_gcu",
                                         pythonpath=os.path.dirname(vendor))
        for code, err in results:
            self.assertEqual(code, 0, err)
        self.assertEqual(reports["rank1"]["current_device"], 101)
        self.assertEqual(reports["rank1"]["device_count"], 8)


if __name__ == "__main__":
    unittest.main()
