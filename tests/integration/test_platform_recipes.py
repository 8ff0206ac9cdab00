"""Platform recipes: configs/examples/platforms/ and packaging/start_multinode_platform.sh.

For each manifest the test rebuilds the environment the platform gives node k
-- from the manifest itself, plus what the platform's controller injects
(Volcano's pytorch plugin, Kubeflow's training-operator, Slurm's srun), as
their sources describe it -- runs the container's command with the real
gculaunch in `--dry-run --format json` mode, and checks the topology each
node comes out with (nnodes, node_rank, world_size, master) and the layout
line naming exactly the variables the recipe relies on.

The startup script runs with a fake gculaunch that records its argv and
environment (everything must pass through untouched, activation aside), and
with the real gculaunch in --dry-run mode.

The Kubernetes recipes must also let a lost node rejoin (docs/multinode.md, "Lost nodes and
rejoin"): a restart policy that restarts the container in place, a platform restart budget
that does not end the job first, --max-restarts above 0, a --rdzv-timeout longer than a pod
restart can take, a host name (never an address) for MASTER_ADDR, the job's name as its
identity, and a checkpoint directory on a PersistentVolumeClaim.

Nothing here starts a rank: no process outlives a test.
"""
import ipaddress
import json
import os
import re
import shlex
import stat
import subprocess
import tempfile
import unittest

import yaml

import gltest

RECIPES = os.path.join(gltest.SOURCE_DIR, "configs", "examples", "platforms")
START_SCRIPT = os.path.join(gltest.SOURCE_DIR, "packaging", "start_multinode_platform.sh")
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/trainer", "LANG": "C.UTF-8"}
# Set by bash itself when it runs the startup script.
BASH_OWN = {"PWD", "SHLVL", "_", "OLDPWD"}
GCU = "enflame.com/gcu"
INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
# The longest the kubelet waits before restarting a crashed container (10 s doubling to 5 min).
KUBELET_MAX_BACKOFF_S = 300
# After that, or after a replacement pod is created: scheduling, image pull, gculaunch start.
POD_START_S = 120
# Kubernetes' toleration for node.kubernetes.io/unreachable when a pod sets none.
DEFAULT_UNREACHABLE_S = 300
# gculaunch's default --grace-period; the pod must allow more before its SIGKILL.
GRACE_PERIOD_S = 25
# Volcano actions that end the job instead of replacing a pod.
VOLCANO_ENDING = {"AbortJob", "TerminateJob", "CompleteJob"}


def load(name):
    with open(os.path.join(RECIPES, name)) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def only(items, what):
    if len(items) != 1:
        raise AssertionError("expected exactly one %s, found %d" % (what, len(items)))
    return items[0]


def write_executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def dry_run(argv, env):
    """Runs a container command whose argv[0] is gculaunch as a JSON dry run."""
    if argv[0] != "gculaunch":
        raise AssertionError("the entrypoint is %r, not gculaunch" % argv[0])
    cmd = [gltest.require_binary(), "--dry-run", "--format", "json"] + list(argv[1:])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AssertionError("gculaunch exited %d: %s %s" % (proc.returncode, proc.stdout,
                                                             proc.stderr))
    return json.loads(proc.stdout)


def split_command(command):
    """A container command -> (gculaunch's options as {flag: value}, the script's arguments).
    The script is the first argument ending in .py; every option before it takes a value."""
    script = next(i for i, arg in enumerate(command) if arg.endswith(".py"))
    options = command[1:script]
    if len(options) % 2 or not all(flag.startswith("--") for flag in options[::2]):
        raise AssertionError("options are not --flag value pairs: %r" % options)
    return dict(zip(options[::2], options[1::2])), command[script + 1:]


def is_ip_address(host):
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def layout_sources(report):
    """The inputs the layout line names: 'layout: ... (from A, B, C)' -> [A, B, C]."""
    layout = report["notes"][0]
    match = re.fullmatch(r"layout: .* \(from (.*)\)", layout)
    if not match:
        raise AssertionError("no layout line with sources first in the notes: %r" % layout)
    return re.split(r", (?![^()]*\))", match.group(1))


class RecipeTest(unittest.TestCase):
    def assert_topology(self, report, env, nnodes, node_rank, nproc, master_addr, master_port):
        """`env` is the node's environment: the dry run lists only what gculaunch changes."""
        self.assertEqual(report["nnodes"], nnodes)
        self.assertEqual(report["node_rank"], node_rank)
        self.assertEqual(report["nproc_per_node"], nproc)
        self.assertEqual(report["world_size"], nnodes * nproc)
        self.assertEqual(report["master_addr"], master_addr)
        self.assertEqual(report["master_port"], master_port)
        self.assertEqual([n for n in report["notes"] if n.startswith("warning:")], [])
        ranks = [r["rank"] for r in report["ranks"]]
        self.assertEqual(ranks, list(range(node_rank * nproc, (node_rank + 1) * nproc)))
        for rank in report["ranks"]:
            got = dict(env, **rank["env"])
            self.assertEqual(got["RANK"], str(rank["rank"]))
            self.assertEqual(got["WORLD_SIZE"], str(nnodes * nproc))
            self.assertEqual(got["GROUP_RANK"], str(node_rank))
            self.assertEqual(got["MASTER_ADDR"], master_addr)
            self.assertEqual(got["MASTER_PORT"], str(master_port))

    def assert_rejoins(self, pod, container, report, job_name, wait_s):
        """What a node needs to come back into the job after its pod or container restarted
        (docs/multinode.md, "Lost nodes and rejoin").  `wait_s`: the longest the platform
        may take before the lost node's gculaunch runs again."""
        options, script_args = split_command(container["command"] + container.get("args", []))
        restarts = int(options["--max-restarts"])
        self.assertGreater(restarts, 0, "with --max-restarts 0 a lost node ends the job")
        self.assertGreaterEqual(float(options["--rdzv-timeout"]), wait_s,
                                "--rdzv-timeout must outlast a restart of the lost node")
        self.assertEqual(options["--rdzv-id"], job_name, "the job's identity")
        for rank in report["ranks"]:
            self.assertEqual(rank["env"]["TORCHELASTIC_MAX_RESTARTS"], str(restarts))
            self.assertEqual(rank["env"]["TORCHELASTIC_RUN_ID"], job_name)
        self.assertFalse(is_ip_address(report["master_addr"]),
                         "MASTER_ADDR must be a name that follows node 0 to a new address")
        self.assertGreater(pod.get("terminationGracePeriodSeconds", 30), GRACE_PERIOD_S)
        # The checkpoint directory is on a PersistentVolumeClaim mounted in the container.
        path = script_args[script_args.index("--checkpoint-dir") + 1]
        mount = only([m for m in container.get("volumeMounts", [])
                      if path.startswith(m["mountPath"].rstrip("/") + "/")], "checkpoint mount")
        volume = only([v for v in pod.get("volumes", []) if v["name"] == mount["name"]],
                      "checkpoint volume")
        self.assertIn("claimName", volume.get("persistentVolumeClaim", {}),
                      "checkpoints must outlive the pod")
        return restarts

    def nproc_of(self, container):
        """--nproc-per-node from the command, which must match the cards requested."""
        command = container["command"] + container.get("args", [])
        limit = int(container["resources"]["limits"][GCU])
        if "--nproc-per-node" in command:
            self.assertEqual(int(command[command.index("--nproc-per-node") + 1]), limit)
        return limit


class KubernetesIndexedJobTest(RecipeTest):
    def test_every_node_gets_the_job(self):
        docs = load("kubernetes-indexed-job.yaml")
        service = only([d for d in docs if d["kind"] == "Service"], "Service")
        job = only([d for d in docs if d["kind"] == "Job"], "Job")
        name = job["metadata"]["name"]
        spec = job["spec"]
        pod = spec["template"]["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        nodes = spec["completions"]
        self.assertEqual(spec["parallelism"], nodes)
        self.assertEqual(service["spec"]["clusterIP"], "None")
        self.assertEqual(service["spec"]["selector"], {"job-name": name})
        self.assertEqual(pod["subdomain"], service["metadata"]["name"])
        container = only(pod["containers"], "container")
        nproc = self.nproc_of(container)
        # The variables the manifest sets are exactly the ones gculaunch reads.
        self.assertEqual(sorted(v["name"] for v in container["env"]),
                         ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"])
        # Indexed Job pods are named <job>-<index>; the subdomain puts them under the Service.
        pod0 = "%s-0.%s" % (name, pod["subdomain"])
        for index in range(nodes):
            with self.subTest(node=index):
                env = dict(BASE_ENV, JOB_COMPLETION_INDEX=str(index))  # the Job controller's
                for var in container["env"]:
                    if "value" in var:
                        env[var["name"]] = var["value"]
                    else:
                        self.assertEqual(var["valueFrom"]["fieldRef"]["fieldPath"],
                                         INDEX_ANNOTATION)
                        env[var["name"]] = str(index)
                report = dry_run(container["command"] + container.get("args", []), env)
                self.assert_topology(report, env, nodes, index, nproc, pod0,
                                     int(env["MASTER_PORT"]))
                self.assertEqual(env["MASTER_ADDR"], pod0)
                self.assertEqual(layout_sources(report),
                                 ["WORLD_SIZE=%d (nodes)" % nodes, "RANK=%d" % index,
                                  "MASTER_ADDR", "MASTER_PORT"])
                # A crashed container restarts in place after the kubelet's back-off; a pod
                # on a vanished host is replaced after its unreachable toleration.
                self.assertEqual(pod["restartPolicy"], "OnFailure")
                unreachable = [t.get("tolerationSeconds", 0) for t in pod.get("tolerations", [])
                               if t.get("key") == "node.kubernetes.io/unreachable"]
                wait_s = max(KUBELET_MAX_BACKOFF_S, max(unreachable, default=DEFAULT_UNREACHABLE_S))
                restarts = self.assert_rejoins(pod, container, report, name,
                                               wait_s + POD_START_S)
                # Every container restart counts against backoffLimit: it must not end the
                # job before gculaunch's own budget does.
                self.assertGreaterEqual(spec["backoffLimit"], restarts)
                self.assertNotIn("podFailurePolicy", spec, "needs restartPolicy Never")


class VolcanoJobTest(RecipeTest):
    def test_every_node_gets_the_job(self):
        job = only(load("volcano-job.yaml"), "Volcano Job")
        name = job["metadata"]["name"]
        plugins = job["spec"]["plugins"]
        self.assertIn("svc", plugins)
        args = dict(a.lstrip("-").split("=", 1) for a in plugins["pytorch"])
        master_task, worker_task = args.get("master", "master"), args.get("worker", "worker")
        port = int(args.get("port", "23456"))
        tasks = {t["name"]: t for t in job["spec"]["tasks"]}
        self.assertEqual(set(tasks), {master_task, worker_task})
        nodes = sum(t["replicas"] for t in tasks.values())
        self.assertEqual(job["spec"]["minAvailable"], nodes)
        # Volcano's pytorch plugin: MASTER_ADDR is <job>-<master task>-0.<job> unless the
        # master's pod template names a hostname or subdomain.
        master_pod = tasks[master_task]["template"]["spec"]
        master = "%s.%s" % (master_pod.get("hostname", "%s-%s-0" % (name, master_task)),
                            master_pod.get("subdomain", name))
        seen = []
        for task_name, task in tasks.items():
            container = only(task["template"]["spec"]["containers"], "container")
            nproc = self.nproc_of(container)
            own = {v["name"] for v in container.get("env", [])}
            self.assertEqual(own & {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}, set(),
                             "the plugin sets these; the manifest must not")
            for index in range(task["replicas"]):
                rank = 0 if task_name == master_task else index + 1
                seen.append(rank)
                with self.subTest(task=task_name, index=index):
                    env = dict(BASE_ENV, MASTER_ADDR=master, MASTER_PORT=str(port),
                               WORLD_SIZE=str(nodes), RANK=str(rank))
                    report = dry_run(container["command"] + container.get("args", []), env)
                    self.assert_topology(report, env, nodes, rank, nproc, master, port)
                    self.assertEqual(layout_sources(report),
                                     ["WORLD_SIZE=%d (nodes)" % nodes, "RANK=%d" % rank,
                                      "MASTER_ADDR", "MASTER_PORT"])
                    # The kubelet restarts a crashed container in place (the pod stays
                    # Running, Volcano's policies do not fire).
                    pod = task["template"]["spec"]
                    self.assertEqual(pod["restartPolicy"], "OnFailure")
                    self.assert_rejoins(pod, container, report, name,
                                        KUBELET_MAX_BACKOFF_S + POD_START_S)
        self.assertEqual(sorted(seen), list(range(nodes)))
        # A failed or deleted pod is replaced (RestartTask, or the default sync recreating a
        # deleted pod), never the end of the job.  Task policies come first, then the job's.
        job_policies = {p["event"]: p["action"] for p in job["spec"].get("policies", [])}
        self.assertEqual(job_policies.get("PodFailed"), "RestartTask")
        for task_name, task in tasks.items():
            policies = dict(job_policies)
            policies.update({p["event"]: p["action"]
                             for p in task.get("policies", [])})
            for event in ("PodFailed", "PodEvicted", "*"):
                with self.subTest(task=task_name, event=event):
                    self.assertNotIn(policies.get(event), VOLCANO_ENDING)


class KubeflowPyTorchJobTest(RecipeTest):
    def test_every_node_gets_the_job(self):
        job = only(load("kubeflow-pytorchjob.yaml"), "PyTorchJob")
        name = job["metadata"]["name"]
        replicas = job["spec"]["pytorchReplicaSpecs"]
        self.assertEqual(set(replicas), {"Master", "Worker"})
        nproc = int(job["spec"]["nprocPerNode"])
        nodes = sum(r["replicas"] for r in replicas.values())
        master_container = only(replicas["Master"]["template"]["spec"]["containers"], "container")
        port = only([p["containerPort"] for p in master_container["ports"]
                     if p["name"] == "pytorchjob-port"], "pytorchjob-port")
        master = "%s-master-0" % name
        # training-operator v1.7+: PET_* for torchrun; WORLD_SIZE counts processes, RANK is the
        # pod index.  Some versions add PET_MASTER_ADDR/PORT, older ones only MASTER_ADDR/PORT.
        for with_pet_master in (True, False):
            for role, spec in replicas.items():
                container = only(spec["template"]["spec"]["containers"], "container")
                self.assertEqual(container["name"], "pytorch")
                self.assertEqual(self.nproc_of(container), nproc)
                command = container["command"] + container.get("args", [])
                for flag in ("--nproc-per-node", "--nnodes", "--node-rank", "--master-addr"):
                    self.assertNotIn(flag, command, "the operator's PET_* variables give it")
                for index in range(spec["replicas"]):
                    rank = index if role == "Master" else index + 1
                    with self.subTest(role=role, index=index, pet_master=with_pet_master):
                        env = dict(BASE_ENV, PYTHONUNBUFFERED="0", MASTER_ADDR=master,
                                   MASTER_PORT=str(port), WORLD_SIZE=str(nodes * nproc),
                                   RANK=str(rank), PET_NPROC_PER_NODE=str(nproc),
                                   PET_NODE_RANK=str(rank), PET_NNODES=str(nodes))
                        expected = ["PET_NNODES=%d" % nodes, "PET_NODE_RANK=%d" % rank]
                        if with_pet_master:
                            env.update(PET_MASTER_ADDR=master, PET_MASTER_PORT=str(port))
                            expected += ["PET_MASTER_ADDR", "PET_MASTER_PORT"]
                        else:
                            expected += ["MASTER_ADDR", "MASTER_PORT"]
                        report = dry_run(command, env)
                        self.assert_topology(report, env, nodes, rank, nproc, master, port)
                        self.assertEqual(layout_sources(report), expected)
                        self.assertIn("WORLD_SIZE=%d and RANK=%d are not read: PET_NNODES and "
                                      "PET_NODE_RANK take precedence" % (nodes * nproc, rank),
                                      report["notes"])
                        # The replica's policy (the operator copies it into the pod, and
                        # overrides one set in the template) restarts the container in place.
                        pod = spec["template"]["spec"]
                        self.assertEqual(spec["restartPolicy"], "OnFailure")
                        self.assertNotIn("restartPolicy", pod)
                        restarts = self.assert_rejoins(pod, container, report, name,
                                                       KUBELET_MAX_BACKOFF_S + POD_START_S)
                        self.assertGreaterEqual(job["spec"]["runPolicy"]["backoffLimit"],
                                                restarts)
        self.assertNotIn("elasticPolicy", job["spec"], "torchrun's elastic rendezvous")


FAKE_SRUN = r'''#!/usr/bin/python3
"""A stand-in for srun: runs the command once per node of the allocation, with the
variables srun gives each task of a step, one after the other."""
import json, os, subprocess, sys
args = sys.argv[1:]
options = {}
while args and args[0].startswith("-"):
    option = args.pop(0)
    if "=" not in option:
        sys.exit("fake srun: write options as --name=value: " + option)
    key, value = option.split("=", 1)
    options[key] = value
if options.get("--ntasks-per-node") != "1":
    sys.exit("fake srun: this recipe needs --ntasks-per-node=1")
nodes = int(os.environ["SLURM_JOB_NUM_NODES"])
out = os.environ["FAKE_SRUN_OUT"]
with open(os.path.join(out, "srun.json"), "w") as f:
    json.dump({"options": options, "command": args}, f)
status = 0
for task in range(nodes):
    env = dict(os.environ)
    env.update({"SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_PROCID": str(task),
                "SLURM_NODEID": str(task), "SLURM_LOCALID": "0", "SLURM_NTASKS": str(nodes),
                "SLURM_NNODES": str(nodes), "SLURM_STEP_NUM_TASKS": str(nodes),
                "SLURM_STEP_NUM_NODES": str(nodes),
                "SLURM_STEP_NODELIST": os.environ["SLURM_JOB_NODELIST"],
                "SLURM_STEP_TASKS_PER_NODE": "1(x%d)" % nodes})
    with open(os.path.join(out, "task-%d.json" % task), "w") as stdout:
        status = subprocess.run(args, env=env, stdout=stdout).returncode or status
sys.exit(status)
'''


class SlurmBatchScriptTest(RecipeTest):
    def test_one_gculaunch_per_node(self):
        script = os.path.join(RECIPES, "slurm-gculaunch.sbatch")
        with open(script) as f:
            text = f.read()
        sbatch = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", text, re.M))
        nodes = int(sbatch["nodes"])
        self.assertEqual(sbatch["ntasks-per-node"], "1")
        with tempfile.TemporaryDirectory() as tmp:
            bin_dir = os.path.join(tmp, "bin")
            out = os.path.join(tmp, "out")
            os.mkdir(bin_dir)
            os.mkdir(out)
            write_executable(os.path.join(bin_dir, "srun"), FAKE_SRUN)
            write_executable(os.path.join(bin_dir, "gculaunch"),
                             "#!/bin/sh\nexec %s --dry-run --format json \"$@\"\n"
                             % shlex.quote(gltest.require_binary()))
            hosts = "gcu[07-%02d]" % (7 + nodes - 1)
            batch = dict(BASE_ENV, PATH=bin_dir + ":" + BASE_ENV["PATH"], SLURM_JOB_ID="4242",
                         SLURM_JOBID="4242", SLURM_JOB_NODELIST=hosts, SLURM_NODELIST=hosts,
                         SLURM_JOB_NUM_NODES=str(nodes), SLURM_NNODES=str(nodes),
                         SLURM_CPUS_ON_NODE="96", ENVIRONMENT="BATCH", FAKE_SRUN_OUT=out)
            proc = subprocess.run(["bash", script], env=batch, capture_output=True, text=True,
                                  timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(os.path.join(out, "srun.json")) as f:
                srun = json.load(f)
            self.assertEqual(srun["options"]["--cpus-per-task"], "96")
            self.assertEqual(srun["command"][0], "gculaunch")
            nproc = int(srun["command"][srun["command"].index("--nproc-per-node") + 1])
            # Rank failures restart the job from the checkpoint directory (Slurm does not
            # restart a lost node's task, so there is no rejoin to configure).
            options, script_args = split_command(srun["command"])
            self.assertGreater(int(options["--max-restarts"]), 0)
            self.assertEqual(options["--rdzv-id"], "slurm-4242")
            self.assertIn("--checkpoint-dir", script_args)
            for task in range(nodes):
                with self.subTest(node=task):
                    with open(os.path.join(out, "task-%d.json" % task)) as f:
                        report = json.load(f)
                    step_env = dict(batch, MASTER_PORT="29500")
                    self.assert_topology(report, step_env, nodes, task, nproc, "gcu07", 29500)
                    self.assertEqual(layout_sources(report),
                                     ["SLURM_STEP_NUM_TASKS=%d" % nodes, "SLURM_PROCID=%d" % task,
                                      "first host of SLURM_STEP_NODELIST", "MASTER_PORT"])
            # The same command run in the batch script itself (no srun) sees no step: one node.
            alone = dry_run(srun["command"], dict(batch, MASTER_PORT="29500"))
            self.assertEqual(alone["nnodes"], 1)
            self.assertIn("SLURM_JOB_ID=4242 is set but SLURM_STEP_ID is not: outside an srun "
                          "step gculaunch does not read Slurm's variables (start it with srun "
                          "--ntasks-per-node=1 to run on every node of the allocation)",
                          alone["notes"])


FAKE_GCULAUNCH = r'''#!/usr/bin/python3
import json, os, sys
with open(os.environ["FAKE_GCULAUNCH_OUT"], "w") as f:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, f)
'''

# What a platform hands the startup script, including values a careless script would mangle.
PLATFORM_ENV = {
    "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "jo-x-worker-0", "MASTER_PORT": "29500",
    "PET_NPROC_PER_NODE": "8", "SLURM_JOB_NODELIST": "gcu[01-02]",
    "TOPS_VISIBLE_DEVICES": "4,5,6,7", "NOTE": "two words $HOME `x` \"q\" 'q'\nline",
}


class StartupScriptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.out = os.path.join(self.tmp.name, "gculaunch.json")
        self.fake = write_executable(os.path.join(self.tmp.name, "fake-gculaunch"),
                                     FAKE_GCULAUNCH)

    def run_script(self, args, env):
        return subprocess.run(["bash", START_SCRIPT] + args, env=env, capture_output=True,
                              text=True, timeout=60)

    def recorded(self):
        with open(self.out) as f:
            return json.load(f)

    def assert_passed_through(self, env, changed=()):
        got = self.recorded()["env"]
        for key, value in env.items():
            if key not in changed:
                self.assertEqual(got.get(key), value, key)
        self.assertLessEqual(set(got) - set(env) - set(changed), BASH_OWN)

    def test_arguments_and_platform_variables_pass_through(self):
        args = ["--nproc-per-node", "8", "train.py", "--name", "two words", "$HOME", "a'b\"c"]
        env = dict(BASE_ENV, FAKE_GCULAUNCH_OUT=self.out, GCULAUNCH_BIN=self.fake,
                   **PLATFORM_ENV)
        proc = self.run_script(args, env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.recorded()["argv"], args)
        self.assert_passed_through(env)
        # The same with gculaunch found on PATH.
        bin_dir = os.path.join(self.tmp.name, "bin")
        os.mkdir(bin_dir)
        os.symlink(self.fake, os.path.join(bin_dir, "gculaunch"))
        env = dict(BASE_ENV, PATH=bin_dir + ":" + BASE_ENV["PATH"], FAKE_GCULAUNCH_OUT=self.out,
                   **PLATFORM_ENV)
        proc = self.run_script(args, env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.recorded()["argv"], args)
        self.assert_passed_through(env)

    def test_virtualenv_activation(self):
        venv = os.path.join(self.tmp.name, "venv")
        os.makedirs(os.path.join(venv, "bin"))
        with open(os.path.join(venv, "bin", "activate"), "w") as f:
            # Like the real one, it reads variables that may be unset.
            f.write('if [ -n "$ZSH_VERSION$_OLD_VIRTUAL_PATH" ]; then :; fi\n'
                    'export VIRTUAL_ENV=%s\n'
                    'export PATH="$VIRTUAL_ENV/bin:$PATH"\n' % shlex.quote(venv))
        env = dict(BASE_ENV, FAKE_GCULAUNCH_OUT=self.out, GCULAUNCH_BIN=self.fake,
                   GCULAUNCH_VENV=venv, **PLATFORM_ENV)
        proc = self.run_script(["train.py"], env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        got = self.recorded()["env"]
        self.assertEqual(got["VIRTUAL_ENV"], venv)
        self.assertEqual(got["PATH"], venv + "/bin:" + BASE_ENV["PATH"])
        self.assert_passed_through(env, changed={"PATH", "VIRTUAL_ENV"})

    def test_conda_activation(self):
        conda_sh = os.path.join(self.tmp.name, "conda.sh")
        envs = os.path.join(self.tmp.name, "envs")
        with open(conda_sh, "w") as f:
            f.write('conda() {\n'
                    '  [ "$1" = activate ] || return 1\n'
                    '  [ -d %s/"$2" ] || { echo "no env $2" >&2; return 1; }\n'
                    '  export CONDA_DEFAULT_ENV="$2" CONDA_PREFIX=%s/"$2"\n'
                    '  export PATH="$CONDA_PREFIX/bin:$PATH"\n'
                    '}\n' % (shlex.quote(envs), shlex.quote(envs)))
        os.makedirs(os.path.join(envs, "tiny-vae", "bin"))
        env = dict(BASE_ENV, FAKE_GCULAUNCH_OUT=self.out, GCULAUNCH_BIN=self.fake,
                   GCULAUNCH_CONDA_SH=conda_sh, GCULAUNCH_CONDA_ENV="tiny-vae", **PLATFORM_ENV)
        proc = self.run_script(["train.py"], env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        got = self.recorded()["env"]
        self.assertEqual(got["CONDA_DEFAULT_ENV"], "tiny-vae")
        self.assertEqual(got["PATH"], os.path.join(envs, "tiny-vae", "bin") + ":" +
                         BASE_ENV["PATH"])
        self.assert_passed_through(env, changed={"PATH", "CONDA_DEFAULT_ENV", "CONDA_PREFIX"})
        # An environment conda does not know: one line, exit 2.
        proc = self.run_script(["train.py"], dict(env, GCULAUNCH_CONDA_ENV="nope"))
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.splitlines()[-1],
                         "start_multinode_platform.sh: conda activate nope failed (fix: check "
                         "GCULAUNCH_CONDA_ENV against conda env list)")

    def test_bad_settings_are_one_line_errors(self):
        missing = os.path.join(self.tmp.name, "missing")
        base = dict(BASE_ENV, FAKE_GCULAUNCH_OUT=self.out, GCULAUNCH_BIN=self.fake)
        cases = [
            ([], base,
             "no arguments (fix: start_multinode_platform.sh [GCULAUNCH_OPTIONS] SCRIPT "
             "[ARGS...], e.g. --nproc-per-node 8 train.py)"),
            (["x.py"], dict(base, GCULAUNCH_VENV=self.tmp.name, GCULAUNCH_CONDA_ENV="e"),
             "GCULAUNCH_VENV and GCULAUNCH_CONDA_ENV are both set (fix: set only one of them)"),
            (["x.py"], dict(base, GCULAUNCH_VENV=missing),
             "GCULAUNCH_VENV=%s has no bin/activate (fix: give the virtualenv's directory)"
             % missing),
            (["x.py"], dict(base, GCULAUNCH_CONDA_SH=missing),
             "GCULAUNCH_CONDA_SH is set but GCULAUNCH_CONDA_ENV is not (fix: set "
             "GCULAUNCH_CONDA_ENV to the environment to activate)"),
            (["x.py"], dict(base, GCULAUNCH_CONDA_SH=missing, GCULAUNCH_CONDA_ENV="e"),
             "GCULAUNCH_CONDA_SH=%s: no such file (fix: give <conda install>/etc/profile.d/"
             "conda.sh)" % missing),
            (["x.py"], dict(base, GCULAUNCH_CONDA_ENV="e"),
             "GCULAUNCH_CONDA_ENV=e but conda's shell function is not defined (fix: set "
             "GCULAUNCH_CONDA_SH=<conda install>/etc/profile.d/conda.sh)"),
            (["x.py"], dict(base, GCULAUNCH_BIN=missing),
             "%s: not found (fix: put gculaunch on PATH, or set GCULAUNCH_BIN to its path)"
             % missing),
            (["x.py"], dict(BASE_ENV, PATH="/usr/bin:/bin"),
             "gculaunch: not found (fix: put gculaunch on PATH, or set GCULAUNCH_BIN to its "
             "path)"),
        ]
        for args, env, message in cases:
            with self.subTest(message=message):
                proc = self.run_script(args, env)
                self.assertEqual(proc.returncode, 2)
                self.assertEqual(proc.stderr, "start_multinode_platform.sh: " + message + "\n")
                self.assertFalse(os.path.exists(self.out), "gculaunch must not have run")

    def test_no_rank_arithmetic(self):
        with open(START_SCRIPT) as f:
            code = "\n".join(line for line in f.read().splitlines()
                             if not line.lstrip().startswith("#"))
        self.assertNotRegex(code, r"\$\(\(|\bexpr\b|\blet\b")
        self.assertNotRegex(code, r"\$\{?(WORLD_SIZE|RANK|NODE_RANK|MASTER_ADDR|MASTER_PORT|"
                                  r"SLURM_\w+|OMPI_\w+|PET_\w+)\b")

    def test_real_gculaunch_dry_run_through_the_script(self):
        env = dict(BASE_ENV, GCULAUNCH_BIN=gltest.require_binary(), WORLD_SIZE="2", RANK="1",
                   MASTER_ADDR="jo-x-worker-0", MASTER_PORT="29500")
        proc = self.run_script(["--dry-run", "--format", "json", "--nproc-per-node", "8",
                                "--device", "gcu", "train.py"], env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        report = json.loads(proc.stdout)
        self.assertEqual((report["nnodes"], report["node_rank"], report["world_size"]), (2, 1, 16))
        self.assertEqual((report["master_addr"], report["master_port"]), ("jo-x-worker-0", 29500))
        self.assertEqual(report["notes"][0],
                         "layout: 2 nodes x 8 ranks, node 1, master jo-x-worker-0:29500 (from "
                         "WORLD_SIZE=2 (nodes), RANK=1, MASTER_ADDR, MASTER_PORT)")
        self.assertEqual([r["rank"] for r in report["ranks"]], list(range(8, 16)))


if __name__ == "__main__":
    unittest.main()
