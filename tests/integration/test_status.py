"""`gculaunch status` (issue 15): asks a running gculaunch through its control socket (a path
socket in a 0700 per-user directory, SO_PEERCRED).  A 2-rank job lists both ranks with their
live pids; node 0 of a 2-node job (network namespaces) lists both nodes; another user cannot
connect; --watch ends with the job; after kill -9 of gculaunch the guardian removes the socket.
Every job here gets its own XDG_RUNTIME_DIR, so other jobs of this user are not in the way."""
import json
import os
import signal
import socket
import stat
import subprocess
import time
import unittest

import gltest


def status(env, *args, prefix=(), user=None, timeout=30):
    cmd = list(prefix) + [gltest.require_binary(), "status"] + list(args)
    if user:
        cmd = ["setpriv", "--reuid", user, "--regid", "nogroup", "--clear-groups"] + cmd
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


class Status(unittest.TestCase):
    def setUp(self):
        self.tmp = gltest.TempDir(prefix="gltest-status-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.runtime = os.path.join(self.work, "xdg")
        os.mkdir(self.runtime, 0o700)
        self.env = gltest.tagged_env("none", extra={"XDG_RUNTIME_DIR": self.runtime})

    def job(self, args, **kw):
        job = gltest.Job(args, extra_env={"XDG_RUNTIME_DIR": self.runtime}, **kw)
        self.addCleanup(job.__exit__, None, None, None)
        return job

    def wait_status(self, job, predicate, *args, prefix=(), what="status"):
        """Asks until the JSON satisfies `predicate` (bounded); returns the document.  The job
        is chosen by its pid: other tests' jobs may run on this machine at the same time."""
        if "--pid" not in args:
            args = args + ("--pid", str(job.pid))
        deadline = time.monotonic() + 60
        last = None
        while time.monotonic() < deadline:
            out = status(self.env, "--format", "json", *args, prefix=prefix)
            if out.returncode == 0:
                last = json.loads(out.stdout)
                if predicate(last):
                    return last
            else:
                last = out.stderr
            time.sleep(0.2)
        self.fail("%s: last answer %r\n--- stderr of the job:\n%s" % (what, last,
                                                                      job.stderr[-3000:]))

    def test_two_ranks_with_live_pids_text_and_other_user(self):
        job = self.job(["--nproc-per-node", "2", "--master-port", "0", "--max-restarts", "2",
                        "--run-id", "st1"] + gltest.child_args("print", "hi", "pause"))
        # Both ranks ran their first step (exec'd: their /proc entries are their own).
        job.wait_for(lambda out, err: out.count("hi\n") == 2, timeout=60, what="both ranks")
        doc = self.wait_status(job, lambda d: len([r for r in d["ranks"]
                                                   if r["state"] == "running"]) == 2)
        self.assertEqual(doc["schema"], 1)
        self.assertEqual((doc["run_id"], doc["node_rank"], doc["nnodes"]), ("st1", 0, 1))
        self.assertEqual(doc["pid"], job.pid)
        self.assertEqual((doc["epoch"], doc["restarts_used"], doc["max_restarts"]), (0, 0, 2))
        self.assertIn("layout: 1 node x 2 ranks", doc["layout"])
        self.assertRegex(doc["store_traffic"], r"^to this node's store \(port \d+\)$")
        ranks = sorted(gltest.pids_of_ranks(job.tag, gltest.CHILD_COMM))
        self.assertEqual(sorted(r["pid"] for r in doc["ranks"]), ranks)
        self.assertEqual([r["rank"] for r in doc["ranks"]], [0, 1])
        for r in doc["ranks"]:
            self.assertGreater(r["rss_bytes"], 0)
            self.assertGreaterEqual(r["cpu_s"], 0)
            self.assertIsNotNone(r["last_progress_s"])
            self.assertIn(r["proc_state"], ("S", "R"))
        self.assertEqual(doc["nodes"], [])

        text = status(self.env, "--pid", str(job.pid))
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertTrue(text.stdout.startswith("run st1, node 0 of 1"), text.stdout)
        self.assertIn("RANK  LOCAL  PID", text.stdout)
        self.assertIn("\nstore traffic: to this node's store (port ", text.stdout)

        # Another user: its own control directory has no job, and this user's is closed to it.
        other = status(self.env, "--pid", str(job.pid), user="nobody")
        self.assertEqual(other.returncode, 1, other.stdout)
        self.assertNotIn("st1", other.stdout)
        sockets = os.listdir(os.path.join(self.runtime, "gculaunch"))
        self.assertEqual(len(sockets), 1, sockets)
        path = os.path.join(self.runtime, "gculaunch", sockets[0])
        self.assertEqual(self.connect_as_nobody(path), "refused: PermissionError")
        # Even with the directory and the socket opened to everyone, SO_PEERCRED refuses it:
        # the connection is closed without an answer.
        opened = [self.work, self.runtime, os.path.dirname(path)]
        modes = [os.stat(d).st_mode & 0o777 for d in opened]
        for d in opened:
            os.chmod(d, 0o711)
        os.chmod(path, 0o777)
        try:
            self.assertEqual(self.connect_as_nobody(path), "closed without an answer")
        finally:
            for d, mode in zip(opened, modes):
                os.chmod(d, mode)
        job.signal(signal.SIGTERM)
        self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM)
        self.assertEqual(os.listdir(os.path.join(self.runtime, "gculaunch")), [])

    def connect_as_nobody(self, path):
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX)\n"
                "s.settimeout(10)\n"
                "try:\n"
                "    s.connect(sys.argv[1])\n"
                "except OSError as e:\n"
                "    print('refused: ' + type(e).__name__); sys.exit(0)\n"
                "try:\n"
                "    s.sendall(b'status\\n')\n"
                "    data=s.recv(65536)\n"
                "except (BrokenPipeError, ConnectionResetError):\n"
                "    data=b''\n"
                "print('answered' if data else 'closed without an answer')\n")
        out = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup",
                              "--clear-groups", gltest.PYTHON, "-c", code, path],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.strip()

    def test_watch_ends_with_the_job(self):
        job = self.job(["--nproc-per-node", "1", "--master-port", "0"]
                       + gltest.child_args("sleep", "3", "exit", "0"))
        self.wait_status(job, lambda d: len(d["ranks"]) == 1)
        out = status(self.env, "--watch", "0.5", "--format", "json", "--pid", str(job.pid),
                     timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("gculaunch status: the job ended", out.stderr)
        docs, pos, decoder = [], 0, json.JSONDecoder()
        while out.stdout[pos:].strip():
            doc, end = decoder.raw_decode(out.stdout[pos:].lstrip())
            pos = len(out.stdout) - len(out.stdout[pos:].lstrip()) + end
            docs.append(doc)
        self.assertGreaterEqual(len(docs), 2)
        self.assertEqual(job.wait(timeout=60), 0)

    def test_kill_9_leaves_no_socket(self):
        job = self.job(["--nproc-per-node", "1", "--master-port", "0"]
                       + gltest.child_args("pause"))
        self.wait_status(job, lambda d: len(d["ranks"]) == 1)
        directory = os.path.join(self.runtime, "gculaunch")
        self.assertEqual(len(os.listdir(directory)), 1)
        job.signal(signal.SIGKILL)
        job.proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while os.listdir(directory) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(os.listdir(directory), [])
        self.assertEqual(gltest.wait_no_tagged(job.tag, 15), [])
        after = status(self.env, "--pid", str(job.pid))
        self.assertEqual(after.returncode, 1)

    def test_a_squatted_control_directory_costs_nothing(self):
        # Another user (nobody) created this user's control directory first, open to all.  The
        # launch uses a private 0700 directory in /tmp instead, says where, and status finds it.
        squatted = os.path.join(self.runtime, "gculaunch")
        os.mkdir(squatted)
        os.chmod(squatted, 0o777)
        os.chown(squatted, 65534, 65534)
        job = self.job(["--nproc-per-node", "1", "--master-port", "0", "--run-id", "sq1"]
                       + gltest.child_args("print", "hi", "pause"))
        job.wait_for(lambda out, err: "hi\n" in out, timeout=60, what="the rank")
        doc = self.wait_status(job, lambda d: len(d["ranks"]) == 1, "--job", "sq1")
        self.assertEqual(doc["pid"], job.pid)
        prefix = "/tmp/gculaunch-%d-" % os.geteuid()
        self.assertIn("the control directory %s belongs to uid 65534, not to this user" % squatted,
                      job.stderr)
        line = [l for l in job.stderr.splitlines() if "control socket is in " + prefix in l]
        self.assertEqual(len(line), 1, job.stderr)
        private = line[0].split("control socket is in ")[1].split(" ")[0]
        st = os.lstat(private)
        self.assertEqual((stat.S_ISDIR(st.st_mode), st.st_uid, stat.S_IMODE(st.st_mode)),
                         (True, os.geteuid(), 0o700))
        self.assertEqual(os.listdir(squatted), [])  # nothing of ours went there
        job.signal(signal.SIGTERM)
        self.assertEqual(job.wait(timeout=60), 128 + signal.SIGTERM)
        self.assertFalse(os.path.lexists(private), "the private directory outlived the job")

    def test_bad_arguments_are_one_line(self):
        out = status(self.env, "--format", "yaml")
        self.assertEqual(out.returncode, 2)
        self.assertEqual(out.stderr, "gculaunch: gculaunch status: --format 'yaml' is not a "
                         "format (fix: use --format text or --format json)\n")

    def test_node0_lists_both_nodes(self):
        tag = gltest.new_tag()
        hosts = gltest.SimulatedHosts(2)
        self.addCleanup(hosts.close)
        self.addCleanup(gltest.kill_tagged, tag)
        jobs = []
        for i in range(2):
            args = (["--nproc-per-node", "1", "--device", "cpu", "--run-id", "st2"]
                    + gltest.child_args("pause"))
            job = gltest.NodeJob(hosts, i, 2, 29500, args, tag,
                                 extra_env={"RANK": str(i), "XDG_RUNTIME_DIR": self.runtime})
            self.addCleanup(job.__exit__, None, None, None)
            jobs.append(job)
        doc = self.wait_status(jobs[0], lambda d: len(d["nodes"]) == 2 and all(
            n["last_heartbeat_s"] is not None for n in d["nodes"] if n["node"] == 1),
            "--node", "0", prefix=hosts.command_prefix(0), what="node 0's status")
        self.assertEqual(doc["node_rank"], 0)
        self.assertEqual(doc["nnodes"], 2)
        nodes = {n["node"]: n for n in doc["nodes"]}
        self.assertEqual({k: (n["addr"], n["state"]) for k, n in nodes.items()},
                         {0: (hosts.addr(0), "present"), 1: (hosts.addr(1), "present")})
        self.assertLess(nodes[1]["last_heartbeat_s"], 5)
        one = self.wait_status(jobs[1], lambda d: len(d["ranks"]) == 1, "--node", "1",
                               prefix=hosts.command_prefix(1), what="node 1's status")
        self.assertEqual(one["nodes"], [])  # only node 0 knows the nodes
        self.assertEqual(one["ranks"][0]["rank"], 1)
        for job in jobs:
            job.signal(signal.SIGTERM)
        for job in jobs:
            job.wait(timeout=60)


if __name__ == "__main__":
    unittest.main()
