"""Warm ranks (issue 29, --warm-ranks): a restarted rank is a standby that already imported
torch, handed the attempt's environment.  Real gculaunch, real torch 1.13 and gloo, two ranks.

The rank program records a snapshot of everything a script can see of its process (the
environment as the script sees it, argv, sys.path, cwd, stdin, signal dispositions and mask,
process group, parent-death signal, rlimits, __loader__, sys.flags), runs a real gloo
all_reduce, and in attempt 0 fails once the standbys are ready (their ready files exist in
gculaunch's private directory, found beside TORCHELASTIC_ERROR_FILE).  A run with
--warm-ranks and one without must give attempt 1 the same snapshot, field by field, up to the
names of each run's private directory; only the warm run's attempt 1 comes from standbys
(their /proc/self/environ still holds the standby's variables, which the script never sees).

Also: a --preload module that fails means a cold start, with one line naming the module; a
standby never outlives the run.
"""
import json
import os
import subprocess
import time
import unittest

import gltest

RANK_PROGRAM = r'''
import ctypes, glob, json, os, resource, signal, stat, sys, time

out_dir = sys.argv[1]
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
local_rank = int(os.environ["LOCAL_RANK"])

def at_exec():
    with open("/proc/self/environ", "rb") as f:
        items = [i for i in f.read().split(b"\0") if i]
    return dict(i.decode().split("=", 1) for i in items)

st = os.fstat(0)
libc = ctypes.CDLL(None, use_errno=True)
pdeath = ctypes.c_int(0)
libc.prctl(2, ctypes.byref(pdeath), 0, 0, 0)  # PR_GET_PDEATHSIG
snapshot = {
    "env": dict(os.environ),
    "argv": sys.argv,
    "orig_argv": getattr(sys, "orig_argv", None),
    "path": sys.path,
    "cwd": os.getcwd(),
    "stdin": [stat.S_ISCHR(st.st_mode), st.st_rdev],
    "signals": {str(int(s)): repr(signal.getsignal(s)) for s in
                (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGPIPE,
                 signal.SIGCHLD, signal.SIGQUIT)},
    "sigmask": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "leads_group": os.getpgid(0) == os.getpid(),
    "pdeathsig": pdeath.value,
    "rlimits": {n: resource.getrlimit(getattr(resource, n)) for n in
                ("RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_STACK", "RLIMIT_NPROC")},
    "loader": type(__loader__).__name__,
    "file": __file__,
    "name": __name__,
    "flags": repr(sys.flags),
    "nice": os.getpriority(os.PRIO_PROCESS, 0),
    "warm": "GCULAUNCH_STANDBY_PARENT" in at_exec(),
}
with open(os.path.join(out_dir, "a%d_r%d.json" % (attempt, local_rank)), "w") as f:
    json.dump(snapshot, f)

def standby_pids():
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if b"GCULAUNCH_STANDBY_PARENT=%d\0" % os.getppid() in f.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            pass
    return found

root = os.environ["TORCHELASTIC_ERROR_FILE"].split("/attempt_")[0]
if attempt == 0 and os.path.isdir(os.path.join(root, "standbys")):  # --warm-ranks
    # Before this rank entered init_process_group, the standbys may not compete with it:
    # they wait at SCHED_IDLE.
    deadline = time.monotonic() + 60
    while len(standby_pids()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    with open(os.path.join(out_dir, "standby_policy_r%d.json" % local_rank), "w") as f:
        json.dump([os.sched_getscheduler(p) for p in standby_pids()], f)

import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size()
dist.barrier()
if attempt == 0:
    root = os.environ["TORCHELASTIC_ERROR_FILE"].split("/attempt_")[0]
    if os.path.isdir(os.path.join(root, "standbys")):  # --warm-ranks
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            ready = [p for p in glob.glob(os.path.join(root, "standbys", "standby-*"))
                     if not p.endswith(".failed")]
            failed = glob.glob(os.path.join(root, "standbys", "*.failed"))
            if len(ready) + len(failed) >= 2:
                break
            time.sleep(0.05)
        # The standbys' priority while they wait (gculaunch runs as root: it may raise it):
        # nice +10, and no longer SCHED_IDLE once every rank went through
        # init_process_group (these did, before the all_reduce).
        nices = []
        for pid in os.listdir("/proc"):
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    env = f.read()
                if b"GCULAUNCH_STANDBY_PARENT=%d\0" % os.getppid() in env:
                    nices.append([os.getpriority(os.PRIO_PROCESS, int(pid)),
                                  os.sched_getscheduler(int(pid))])
            except (OSError, ValueError):
                pass
        with open(os.path.join(out_dir, "standby_nice_r%d.json" % local_rank), "w") as f:
            json.dump(nices, f)
    proceed = os.environ.get("GL_PROCEED")
    deadline = time.monotonic() + 90
    while proceed and not os.path.exists(proceed) and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(3)
'''


class WarmRanks(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tmp = gltest.TempDir(prefix="gltest-warm-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.program = os.path.join(self.work, "snap.py")
        with open(self.program, "w") as f:
            f.write(RANK_PROGRAM)
        self.tag = gltest.new_tag()
        self.addCleanup(gltest.kill_tagged, self.tag)

    def args(self, out, extra):
        return (["--nproc-per-node", "2", "--device", "cpu", "--max-restarts", "1",
                 "--run-id", "warm1", "--master-port", str(gltest.free_port()),
                 "--python", gltest.PYTHON, "--env", "GL_SNAPSHOT=1"]
                + extra + [self.program, out])

    def launch(self, name, extra):
        out = os.path.join(self.work, name)
        os.mkdir(out)
        tag = self.tag  # one for both runs: their environments must match
        with gltest.Job(self.args(out, extra), tag=tag) as job:
            code = job.wait(timeout=300)
        self.assertEqual(gltest.wait_no_tagged(tag, 15), [], "processes outlived the run")
        return code, job.stderr, out

    def load(self, out, attempt, rank):
        with open(os.path.join(out, "a%d_r%d.json" % (attempt, rank))) as f:
            return json.load(f)

    @staticmethod
    def normalized(snapshot):
        """Each run's private directory (gculaunch-<id>-XXXXXX) and the ephemeral master port
        replaced by placeholders; the 'warm' marker dropped."""
        snap = dict(snapshot)
        warm = snap.pop("warm")
        out = os.path.dirname(snap["argv"][1] + "/")
        env = dict(snap["env"])
        root = env["TORCHELASTIC_ERROR_FILE"].split("/attempt_")[0]
        port = env["MASTER_PORT"]
        text = json.dumps(dict(snap, env=env), sort_keys=True)
        text = text.replace(root, "<private>").replace('"%s"' % port, '"<port>"')
        text = text.replace(out, "<out>")
        return json.loads(text), warm

    def test_warm_attempt_matches_a_cold_one_field_by_field(self):
        code, err, warm_out = self.launch("warm", ["--warm-ranks"])
        self.assertEqual(code, 0, err[-4000:])
        self.assertIn("attempt 1: local ranks 0,1 started warm (--warm-ranks)", err)
        code, err_cold, cold_out = self.launch("cold", [])
        self.assertEqual(code, 0, err_cold[-4000:])
        self.assertNotIn("started warm", err_cold)
        for rank in (0, 1):
            warm, was_warm = self.normalized(self.load(warm_out, 1, rank))
            cold, was_cold_warm = self.normalized(self.load(cold_out, 1, rank))
            self.assertTrue(was_warm, "rank %d of the warm run's attempt 1 was not a standby"
                            % rank)
            self.assertFalse(was_cold_warm)
            self.assertFalse(self.normalized(self.load(warm_out, 0, rank))[1],
                             "attempt 0 is always cold")
            for field in sorted(cold):
                self.assertEqual(warm[field], cold[field], "rank %d: %s differs" % (rank, field))
            self.assertEqual(warm["nice"], 0, "a warm rank must not keep the standby's priority")
            with open(os.path.join(warm_out, "standby_policy_r%d.json" % rank)) as f:
                self.assertEqual(json.load(f), [os.SCHED_IDLE] * 2,
                                 "the standbys waited at SCHED_IDLE while the ranks started")
            with open(os.path.join(warm_out, "standby_nice_r%d.json" % rank)) as f:
                self.assertEqual(json.load(f), [[10, os.SCHED_OTHER]] * 2,
                                 "the standbys waited at nice +10, out of SCHED_IDLE once "
                                 "every rank had initialised")
            self.assertEqual(warm["env"]["TORCHELASTIC_RESTART_COUNT"], "1")
            self.assertEqual(warm["env"]["RANK"], str(rank))
            self.assertNotIn("GCULAUNCH_STANDBY_PARENT", warm["env"])

    def test_a_failed_preload_means_a_cold_start_named_in_one_line(self):
        code, err, out = self.launch(
            "badpreload", ["--warm-ranks", "--preload", "torch,no_such_module_gl29"])
        self.assertEqual(code, 0, err[-4000:])
        lines = [l for l in err.splitlines() if "starts cold" in l]
        self.assertEqual(len(lines), 2, err[-4000:])
        for line in lines:
            self.assertIn("--preload no_such_module_gl29 failed: ModuleNotFoundError", line)
        for rank in (0, 1):
            self.assertFalse(self.normalized(self.load(out, 1, rank))[1])

    def test_standbys_show_in_status_with_their_pss(self):
        """While attempt 0 runs, `gculaunch status` lists both standbys, ready, with their
        memory as PSS; the job then restarts warm and finishes."""
        out = os.path.join(self.work, "status")
        os.mkdir(out)
        runtime = os.path.join(self.work, "xdg")
        os.mkdir(runtime, 0o700)
        proceed = os.path.join(self.work, "proceed")
        args = self.args(out, ["--warm-ranks", "--env", "GL_PROCEED=" + proceed])
        env = gltest.tagged_env(self.tag, extra={"XDG_RUNTIME_DIR": runtime})
        with gltest.Job(args, tag=self.tag, extra_env={"XDG_RUNTIME_DIR": runtime}) as job:
            deadline = time.monotonic() + 90
            doc = None
            while time.monotonic() < deadline:
                got = subprocess.run([gltest.require_binary(), "status", "--format", "json",
                                      "--pid", str(job.pid)], env=env, capture_output=True,
                                     text=True, timeout=30)
                if got.returncode == 0:
                    doc = json.loads(got.stdout)
                    if [s["state"] for s in doc["standbys"]] == ["ready", "ready"]:
                        break
                time.sleep(0.2)
            self.assertIsNotNone(doc, job.stderr[-3000:])
            self.assertEqual([s["local_rank"] for s in doc["standbys"]], [0, 1], doc)
            self.assertEqual([s["state"] for s in doc["standbys"]], ["ready", "ready"], doc)
            rank_pids = {r["pid"] for r in doc["ranks"]}
            for s in doc["standbys"]:
                self.assertNotIn(s["pid"], rank_pids)
                # torch imported: far more than an empty interpreter's few MB, even shared.
                self.assertGreater(s["pss_bytes"], 20 * 1024 * 1024, doc)
            text = subprocess.run([gltest.require_binary(), "status", "--pid", str(job.pid)],
                                  env=env, capture_output=True, text=True, timeout=30).stdout
            self.assertIn("standbys (--warm-ranks):", text)
            with open(proceed, "w"):
                pass
            self.assertEqual(job.wait(timeout=300), 0, job.stderr[-3000:])
        self.assertIn("attempt 1: local ranks 0,1 started warm", job.stderr)
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "processes outlived the run")

    def test_a_node_waiting_for_the_rendezvous_starts_warm(self):
        """Two simulated hosts: node 1 starts first with --warm-ranks and waits for node 0;
        its standby imports meanwhile, and once node 0 arrives its first attempt's rank is
        the standby (with the plan's RANK and WORLD_SIZE)."""
        script = os.path.join(self.work, "ar.py")
        with open(script, "w") as f:
            f.write("import os, torch, torch.distributed as dist\n"
                    "dist.init_process_group('gloo')\n"
                    "t = torch.ones(1)\n"
                    "dist.all_reduce(t)\n"
                    "print('sum', int(t.item()), 'rank', os.environ['RANK'], flush=True)\n")
        with gltest.SimulatedHosts(2) as hosts:
            self.addCleanup(gltest.kill_tagged, self.tag)
            args = ["--nproc-per-node", "1", "--device", "cpu", "--rdzv-timeout", "120",
                    "--python", gltest.PYTHON, script]
            waiting = gltest.NodeJob(hosts, 1, 2, 29500, ["--warm-ranks"] + args, self.tag)
            with waiting:
                deadline = time.monotonic() + 90
                ready = None
                while ready is None and time.monotonic() < deadline:
                    for pid in gltest.pids_with_tag(self.tag):
                        try:
                            path = gltest.read_environ(pid).get("GCULAUNCH_STANDBY_READY")
                        except OSError:
                            continue
                        if path and os.path.exists(path):
                            ready = path
                    time.sleep(0.1)
                self.assertIsNotNone(ready, "node 1's standby never got ready: " +
                                     waiting.stderr[-3000:])
                with gltest.NodeJob(hosts, 0, 2, 29500, args, self.tag) as first:
                    self.assertEqual(first.wait(timeout=180), 0, first.stderr[-3000:])
                self.assertEqual(waiting.wait(timeout=180), 0, waiting.stderr[-3000:])
            self.assertIn("attempt 0: local rank 0 started warm (--warm-ranks)", waiting.stderr)
            self.assertIn("sum 2 rank 1", waiting.stdout)
            self.assertIn("sum 2 rank 0", first.stdout)
            self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [])
            for i in range(2):
                self.assertEqual(hosts.wait_empty(i), [], "processes left in host %d" % i)

    def test_a_standby_holding_a_device_starts_cold_and_early_output_is_kept(self):
        """A preload that creates a CUDA context (a stand-in torch whose cuda says it is
        initialised) makes the standby unusable: cold start, one line.  What a standby prints
        before the go (a preload module that talks) goes to the attempt it serves."""
        lib = os.path.join(self.work, "lib")
        os.makedirs(os.path.join(lib, "torch"))
        with open(os.path.join(lib, "torch", "__init__.py"), "w") as f:
            f.write("class cuda:\n    @staticmethod\n    def is_initialized():\n"
                    "        return True\n")
        with open(os.path.join(lib, "gl_chatty.py"), "w") as f:
            f.write("print('standby says hi', flush=True)\n")
        script = os.path.join(self.work, "plain.py")
        with open(script, "w") as f:
            f.write("import glob, os, sys, time\n"
                    "root = os.environ['TORCHELASTIC_ERROR_FILE'].split('/attempt_')[0]\n"
                    "n = os.environ['TORCHELASTIC_RESTART_COUNT']\n"
                    "print('attempt', n, flush=True)\n"
                    "deadline = time.monotonic() + 60\n"
                    "while n == '0' and time.monotonic() < deadline and "
                    "len(glob.glob(root + '/standbys/standby-*')) < 1:\n"
                    "    time.sleep(0.05)\n"
                    "sys.exit(3 if n == '0' else 0)\n")
        base = ["--nproc-per-node", "1", "--device", "cpu", "--max-restarts", "1",
                "--python", gltest.PYTHON, "--env", "PYTHONPATH=" + lib, "--warm-ranks"]
        for preload, warm in (("torch", False), ("gl_chatty", True)):
            with gltest.Job(base + ["--preload", preload, script], tag=self.tag) as job:
                self.assertEqual(job.wait(timeout=120), 0, job.stderr[-3000:])
            cold = [l for l in job.stderr.splitlines() if "starts cold" in l]
            if warm:
                self.assertEqual(cold, [], job.stderr[-3000:])
                self.assertIn("attempt 1: local rank 0 started warm", job.stderr)
                # Printed by the standby while it imported, before attempt 1 began; shown as
                # attempt 1's output, after attempt 0's.
                out = job.stdout
                self.assertIn("[rank0]: standby says hi", out)
                self.assertLess(out.index("[rank0]: attempt 0"),
                                out.index("[rank0]: standby says hi"))
            else:
                self.assertEqual(len(cold), 1, job.stderr[-3000:])
                self.assertIn("local rank 0 starts cold: --preload created a CUDA context",
                              cold[0])
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [])

    def test_warm_ranks_do_not_apply_without_python(self):
        out = os.path.join(self.work, "nopy")
        os.mkdir(out)
        args = ["--dry-run", "--no-python", "--warm-ranks", "--max-restarts", "1",
                "/bin/true"]
        with gltest.Job(args, tag=gltest.new_tag()) as job:
            self.assertEqual(job.wait(timeout=60), 0, job.stderr)
        self.assertIn("--no-python: --warm-ranks does not apply", job.stdout)


if __name__ == "__main__":
    unittest.main()
