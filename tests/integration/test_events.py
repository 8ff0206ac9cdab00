"""events.jsonl (issue 15): with a log directory, gculaunch writes one JSON object per line next
to the rank logs.  A one-node run with a rank failure and a restart must hold exactly the
documented sequence; a two-node job (network namespaces) whose node 1 is SIGKILLed and started
again must show node 0 telling the nodes' joins, the loss and the return."""
import glob
import json
import os
import signal
import time
import unittest

import gltest

# Attempt 0: rank 1 fails (exit 3) while rank 0 sleeps (SIGTERMed).  Attempt 1: rank 0 exits 0
# first and leaves a file; rank 1 exits 0 once it sees that file (a fixed order of exits).
FLAKY = r"""
import os, sys, time
count = os.environ["TORCHELASTIC_RESTART_COUNT"]
rank = os.environ["RANK"]
marker = sys.argv[1]
if count == "0":
    if rank == "1":
        sys.exit(3)
    time.sleep(60)
    sys.exit(9)
if rank == "0":
    with open(marker, "w") as f:
        f.write(str(os.getpid()))
    sys.exit(0)
# Rank 1 exits only once rank 0 has (its process is a zombie or gone), so that the two exits of
# attempt 1 have one order: the marker alone let rank 1 win the race now and then.
def exited(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True
for _ in range(600):
    if os.path.exists(marker):
        pid = open(marker).read()
        if pid and exited(pid):
            sys.exit(0)
    time.sleep(0.05)
sys.exit(8)
"""

# Node test: attempt 0 runs until its node is killed; attempt 1 ends at once.
NODE_RANK = r"""
import os, sys, time
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    time.sleep(60)
    sys.exit(9)
"""

HEAD = ["schema", "ts", "time", "event", "run_id", "node_rank"]


def read_events(root):
    with open(os.path.join(root, "events.jsonl")) as f:
        text = f.read()
    assert text.endswith("\n"), text
    return [json.loads(line) for line in text.splitlines()]


class Events(unittest.TestCase):
    def test_restart_writes_the_documented_sequence(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "flaky.py")
            with open(script, "w") as f:
                f.write(FLAKY)
            log_dir = os.path.join(tmp, "logs")
            args = ["--nproc-per-node", "2", "--device", "cpu", "--python", gltest.PYTHON,
                    "--master-port", "0",
                    "--max-restarts", "1", "--log-dir", log_dir, "--run-id", "evt",
                    "--grace-period", "10", script, os.path.join(tmp, "marker")]
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=120), 0, job.stderr)
                gculaunch_pid = job.pid
            roots = glob.glob(os.path.join(log_dir, "evt_*"))
            self.assertEqual(len(roots), 1, roots)
            events = read_events(roots[0])
        for e in events:
            self.assertEqual(list(e)[:6], HEAD, e)
            self.assertEqual(e["schema"], 1)
            self.assertEqual(e["run_id"], "evt")
            self.assertEqual(e["node_rank"], 0)
            self.assertRegex(e["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        stamps = [e["ts"] for e in events]
        self.assertEqual(stamps, sorted(stamps))

        def brief(e):
            kind = e["event"]
            if kind in ("rank_start",):
                return (kind, e["epoch"], e["rank"], e["local_rank"])
            if kind == "rank_exit":
                return (kind, e["epoch"], e["rank"], e["exit_code"], e["signal"])
            if kind == "restart":
                return (kind, e["restarts_used"], e["max_restarts"], e["reason"])
            if kind == "stop":
                return (kind, e["exit_code"], e["reason"])
            return (kind,)

        self.assertEqual([brief(e) for e in events], [
            ("launch",),
            ("rank_start", 0, 0, 0),
            ("rank_start", 0, 1, 1),
            ("rank_exit", 0, 1, 3, None),
            ("rank_exit", 0, 0, None, "SIGTERM"),
            ("restart", 1, 1, "rank 1 failed with exit code 3"),
            ("rank_start", 1, 0, 0),
            ("rank_start", 1, 1, 1),
            ("rank_exit", 1, 0, 0, None),
            ("rank_exit", 1, 1, 0, None),
            ("stop", 0, "success"),
        ])
        launch = events[0]
        self.assertEqual(launch["pid"], gculaunch_pid)
        self.assertEqual((launch["nnodes"], launch["nproc_per_node"], launch["max_restarts"]),
                         (1, 2, 1))
        self.assertTrue(launch["master_port"].isdigit(), launch)
        # the pids of the rank_start events are the ones the exits name
        starts = {(e["epoch"], e["rank"]): e["pid"] for e in events if e["event"] == "rank_start"}
        exits = {(e["epoch"], e["rank"]): e["pid"] for e in events if e["event"] == "rank_exit"}
        self.assertEqual(starts, exits)
        self.assertTrue(all(p > 0 for p in starts.values()))
        self.assertGreaterEqual(events[5]["since_stop_s"], 0)

    def test_no_log_dir_no_event_log(self):
        with gltest.TempDir() as tmp:
            with gltest.Job(["--nproc-per-node", "1", "--master-port", "0"]
                            + gltest.child_args("exit", "0"),
                            extra_env={"TMPDIR": tmp}) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            self.assertEqual(glob.glob(os.path.join(tmp, "**", "events.jsonl"), recursive=True),
                             [])

    def test_two_nodes_join_loss_and_return(self):
        tag = gltest.new_tag()
        hosts = gltest.SimulatedHosts(2)
        self.addCleanup(hosts.close)
        self.addCleanup(gltest.kill_tagged, tag)
        tmp = gltest.TempDir(prefix="gltest-events-")
        work = tmp.__enter__()
        self.addCleanup(tmp.__exit__, None, None, None)
        os.chmod(work, 0o755)
        script = os.path.join(work, "rank.py")
        with open(script, "w") as f:
            f.write(NODE_RANK)

        def node(i):
            args = ["--nproc-per-node", "1", "--device", "cpu", "--grace-period", "5",
                    "--max-restarts", "2", "--rdzv-timeout", "30", "--run-id", "nodes",
                    "--log-dir", os.path.join(work, "logs%d" % i), "--python", gltest.PYTHON,
                    script]
            job = gltest.NodeJob(hosts, i, 2, 29500, args, tag, extra_env={"RANK": str(i)})
            self.addCleanup(job.__exit__, None, None, None)
            return job

        node0, node1 = node(0), node(1)
        node0.wait_for(lambda out, err: "all 2 nodes joined" in err, timeout=60,
                       what="the job to form")
        node1.wait_for(lambda out, err: "all 2 nodes joined" in err, timeout=60,
                       what="node 1 to start its rank")
        node1.signal(signal.SIGKILL)
        node1.proc.wait(timeout=30)
        node0.wait_for(lambda out, err: "waits up to" in err, timeout=60,
                       what="node 0 to notice the loss")
        node1 = node(1)
        codes = [node0.wait(timeout=90), node1.wait(timeout=90)]
        self.assertEqual(codes, [0, 0], node0.stderr[-3000:] + node1.stderr[-3000:])
        roots = glob.glob(os.path.join(work, "logs0", "nodes_*"))
        self.assertEqual(len(roots), 1, roots)
        events = read_events(roots[0])
        nodes = [(e["event"], e["node"]) for e in events if e["event"].startswith("node_")]
        self.assertEqual(sorted(nodes[:2]), [("node_join", 0), ("node_join", 1)], events)
        self.assertEqual(nodes[2:], [("node_loss", 1), ("node_return", 1)], events)
        joins = {e["node"]: e["addr"] for e in events if e["event"] == "node_join"}
        self.assertEqual(joins, {0: hosts.addr(0), 1: hosts.addr(1)})
        loss = [e for e in events if e["event"] == "node_loss"][0]
        self.assertTrue(loss["reason"], loss)
        rdzv = [(e["epoch"], e["nodes"], e["world_size"]) for e in events
                if e["event"] == "rendezvous_complete"]
        self.assertEqual(rdzv, [(0, 2, 2), (1, 2, 2)])
        restarts = [e["restarts_used"] for e in events if e["event"] == "restart"]
        self.assertEqual(restarts, [1])
        self.assertEqual(events[-1]["event"], "stop")
        self.assertEqual(events[-1]["exit_code"], 0)
        self.assertEqual(gltest.wait_no_tagged(tag, 15), [])


if __name__ == "__main__":
    unittest.main()
