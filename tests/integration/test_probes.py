"""/healthz and /readyz on the metrics endpoint (issue 45), with real gloo ranks on torch 1.13
and 2.6 (the agent store: gculaunch sees the keys init_process_group leaves).

Every rank stops twice in each attempt, blocked opening a FIFO of its own until the test opens
the other end: before init_process_group and after it.  So each state the test asks about
holds while it asks: /readyz is 503 before init_process_group, 200 after it, 503 from rank 1's
failure through the next attempt's start, and 200 again once that attempt's ranks passed
init_process_group.  /healthz is 200 throughout, and `gculaunch status` says what /readyz says.
No wall-clock assertion: each answer is read after the event it follows."""
import http.client
import json
import os
import re
import subprocess
import threading
import unittest

import gltest

RANK = r'''
import os, sys
import torch
import torch.distributed as dist

work = sys.argv[1]
rank = int(os.environ["RANK"])
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])


def wait(name):
    # Blocks until the test opens the other end of this rank's FIFO.
    fd = os.open(os.path.join(work, "%s%d_r%d" % (name, attempt, rank)), os.O_RDONLY)
    os.read(fd, 1)
    os.close(fd)


print("attempt %d rank %d before init" % (attempt, rank), flush=True)
wait("init")
dist.init_process_group("gloo", init_method="env://")
print("attempt %d rank %d initialised" % (attempt, rank), flush=True)
wait("go")
if attempt == 0 and rank == 1:
    sys.exit(3)
dist.barrier()
dist.destroy_process_group()
print("attempt %d rank %d done" % (attempt, rank), flush=True)
'''


def get(port, path):
    """(status, body) of GET http://127.0.0.1:port/path."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        res = conn.getresponse()
        return res.status, res.read().decode()
    finally:
        conn.close()


def release(path, timeout=120):
    """Lets the rank blocked opening the FIFO `path` go on: opening its write end is the event.
    Fails if no rank opened it within `timeout` (a rank that died)."""
    opened = []

    def opener():
        os.close(os.open(path, os.O_WRONLY))
        opened.append(True)

    t = threading.Thread(target=opener, daemon=True)
    t.start()
    t.join(timeout)
    if not opened:
        raise AssertionError("no rank opened %s within %s s" % (path, timeout))


def status_json(job, runtime):
    env = gltest.tagged_env("none", extra={"XDG_RUNTIME_DIR": runtime})
    out = subprocess.run([gltest.require_binary(), "status", "--format", "json", "--pid",
                          str(job.pid)], env=env, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise AssertionError("gculaunch status failed: %s" % out.stderr)
    return json.loads(out.stdout)


def both(job, text, attempt):
    job.wait_for(lambda out, err: all(("[rank%d]: attempt %d rank %d %s" % (r, attempt, r, text))
                                      in out for r in (0, 1)),
                 timeout=180, what="attempt %d: both ranks %s" % (attempt, text))


class Probes(unittest.TestCase):
    def run_probes(self, python, extra_env, mark):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "rank.py")
            with open(script, "w") as f:
                f.write(RANK)
            for name in ("init", "go"):
                for attempt in (0, 1):
                    for r in (0, 1):
                        os.mkfifo(os.path.join(tmp, "%s%d_r%d" % (name, attempt, r)))
            runtime = os.path.join(tmp, "xdg")
            os.mkdir(runtime, 0o700)
            env = dict(extra_env, XDG_RUNTIME_DIR=runtime)
            args = ["--standalone", "--nproc-per-node", "2", "--device", "cpu",
                    "--max-restarts", "1", "--restart-backoff", "off", "--grace-period", "5",
                    "--metrics-port", "0", "--python", python, script, tmp]
            with gltest.Job(args, extra_env=env) as job:
                job.wait_for(lambda out, err: "metrics: http://127.0.0.1:" in err, timeout=60,
                             what="the metrics address")
                port = int(re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics",
                                     job.stderr).group(1))
                self.assertEqual(get(port, "/healthz"), (200, "ok\n"))

                # Attempt 0, before init_process_group.
                both(job, "before init", 0)
                code, body = get(port, "/readyz")
                self.assertEqual((code, body),
                                 (503, "not ready: 2 local ranks of epoch 0 running; waiting "
                                       "for every rank to pass init_process_group\n"))
                doc = status_json(job, runtime)
                self.assertIs(doc["ready"], False, doc)
                self.assertEqual(doc["ready_reason"], body[len("not ready: "):-1])

                # After it.
                for r in (0, 1):
                    release(os.path.join(tmp, "init0_r%d" % r))
                both(job, "initialised", 0)
                ready = ("ready: 2 local ranks of epoch 0 running, every rank passed "
                         "init_process_group (%s)\n" % mark)
                self.assertEqual(get(port, "/readyz"), (200, ready))
                self.assertEqual(get(port, "/healthz"), (200, "ok\n"))
                doc = status_json(job, runtime)
                self.assertIs(doc["ready"], True, doc)

                # Rank 1 fails: not ready from then on, through the restart.
                release(os.path.join(tmp, "go0_r1"))
                job.wait_for(lambda out, err: "failed with exit code 3" in err, timeout=60,
                             what="rank 1's failure")
                code, body = get(port, "/readyz")
                self.assertEqual(code, 503, body)
                self.assertTrue(body.startswith("not ready: "), body)
                both(job, "before init", 1)
                self.assertEqual(get(port, "/readyz"),
                                 (503, "not ready: 2 local ranks of epoch 1 running; waiting "
                                       "for every rank to pass init_process_group\n"))
                self.assertEqual(get(port, "/healthz"), (200, "ok\n"))

                # The new attempt passed init_process_group: ready again.
                for r in (0, 1):
                    release(os.path.join(tmp, "init1_r%d" % r))
                both(job, "initialised", 1)
                self.assertEqual(get(port, "/readyz"), (200, ready.replace("epoch 0",
                                                                           "epoch 1")))
                for r in (0, 1):
                    release(os.path.join(tmp, "go1_r%d" % r))
                self.assertEqual(job.wait(timeout=120), 0, job.stderr)
            both(job, "done", 1)

    def test_readyz_through_init_and_a_restart_torch113(self):
        self.run_probes(gltest.PYTHON, {},
                        "torch's store barrier after init_process_group (torch 1.13, 2.0)")

    def test_readyz_through_init_and_a_restart_torch26(self):
        python_cmd = gltest.torch2_python()  # raises (a failure) if it cannot be made
        with gltest.TempDir() as tmp:
            # Debian's 2.6 has no libuv: the test-only sitecustomize makes the env://
            # client TCPStore use_libuv=False (no wire change).
            gltest.write_no_libuv_sitecustomize(tmp)
            env = {"PYTHONPATH": tmp, "GLTEST_TCPSTORE_NO_LIBUV": "1"}
            self.run_probes(gltest.interpreter_file(tmp, python_cmd), env,
                            "every rank's address in gloo's full mesh (torch 2.x)")

    def test_unknown_paths_and_methods(self):
        args = ["--nproc-per-node", "1", "--device", "cpu", "--metrics-port", "0",
                "--no-python", "/bin/sh", "-c", "echo started; exec sleep 60"]
        with gltest.Job(args) as job:
            job.wait_for(lambda out, err: "started" in out, timeout=60, what="the rank")
            port = int(re.search(r"metrics: http://127\.0\.0\.1:(\d+)/metrics",
                                 job.stderr).group(1))
            self.assertEqual(get(port, "/nope"),
                             (404, "not found: the metrics are at /metrics, the probes at "
                                   "/healthz and /readyz\n"))
            # --no-python: whether the program passed init_process_group is not known;
            # running is ready.
            code, body = get(port, "/readyz?verbose=1")
            self.assertEqual(code, 200, body)
            self.assertEqual(body, "ready: 1 local rank of epoch 0 running (whether they "
                                   "passed init_process_group is not visible here: "
                                   "--no-python: the program need not use torch, so ready "
                                   "means every local rank runs)\n")
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("HEAD", "/readyz")
            res = conn.getresponse()
            self.assertEqual(res.status, 200)
            self.assertEqual(res.read(), b"")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("POST", "/healthz")
            self.assertEqual(conn.getresponse().status, 405)
            conn.close()


if __name__ == "__main__":
    unittest.main()
