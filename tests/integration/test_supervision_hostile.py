"""Supervision that never hits a stranger (issue 24; docs/runtime.md, "Process groups and
pid reuse", "The guardian", "Descriptors").

- Pid reuse, in a private pid namespace where /proc/sys/kernel/ns_last_pid hands a chosen
  number to the next process: an exited rank's zombie pins its number while its group has
  members, the number is freed as soon as the group is empty, and a stranger that then gets
  the number (leading its own group) survives the end of the job.
- A guardian killed mid-job is logged and replaced; the replacement still cleans up after a
  kill -9 of gculaunch, and its command line and environment hold nothing of the launch.
- With the descriptor table full (a low hard limit, idle control connections), gculaunch
  does not spin on accept(), and a rank failure still tears down every process of the job.
"""
import glob
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import gltest

# Runs inside `unshare --pid --fork --mount-proc`: pid 1 of a fresh pid namespace.  Prints
# one JSON object with what it saw.
PIDNS_DRIVER = r'''
import json, os, subprocess, sys, time
gculaunch, tmp, mode = sys.argv[1], sys.argv[2], sys.argv[3]
rank = os.path.join(tmp, "rank.sh")
with open(rank, "w") as f:
    f.write("""#!/bin/sh
if [ "$LOCAL_RANK" = 0 ]; then
  if [ "%s" = grandchild ]; then
    (i=0; while [ ! -e %s/release ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done) &
  fi
  echo $$ > %s/r0.tmp; mv %s/r0.tmp %s/r0pid
  exit 0
fi
i=0; while [ ! -e %s/go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
exit 0
""" % ((mode,) + (tmp,) * 5))
os.chmod(rank, 0o755)
out = {}
log = open(os.path.join(tmp, "gculaunch.log"), "w")
job = subprocess.Popen([gculaunch, "--standalone", "--nproc-per-node", "2", "--grace-period", "2",
                        "--no-python", rank], stdout=log, stderr=subprocess.STDOUT)

def wait_file(name, limit=30):
    deadline = time.monotonic() + limit
    while not os.path.exists(os.path.join(tmp, name)):
        if time.monotonic() > deadline:
            raise SystemExit("no " + name)
        time.sleep(0.02)

def stat(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[2])  # state, pgrp
    except OSError:
        return None, None

def reap_orphans():
    # As pid 1 of the namespace this driver inherits the ranks' orphans; their zombies would
    # keep rank 0's number (a pgid) in use.
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != job.pid:
            state = stat(int(name))[0]
            try:
                ppid = int(open("/proc/%s/stat" % name).read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if state == "Z" and ppid == 1:
                os.waitpid(int(name), os.WNOHANG)

def stranger_for(number):
    # The next process gets `number` if it is free.
    reap_orphans()
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(number - 1))
    return subprocess.Popen(["setsid", "sleep", "60"])

wait_file("r0pid")
r0 = int(open(os.path.join(tmp, "r0pid")).read())
out["r0"] = r0
if mode == "grandchild":
    time.sleep(0.5)
    out["pinned_state"] = stat(r0)[0]           # the zombie, while its grandchild lives
    early = stranger_for(r0)
    out["early_stranger"] = early.pid            # cannot be r0: the number is pinned
    early.kill(); early.wait()
    open(os.path.join(tmp, "release"), "w").close()
deadline = time.monotonic() + 10
while stat(r0)[0] is not None and time.monotonic() < deadline:
    time.sleep(0.02)                             # released once its group is empty
out["released"] = stat(r0)[0] is None
stranger = stranger_for(r0)
time.sleep(0.3)
out["stranger"] = stranger.pid
out["stranger_pgrp"] = stat(stranger.pid)[1]
open(os.path.join(tmp, "go"), "w").close()
out["rc"] = job.wait(timeout=60)
time.sleep(0.5)
out["stranger_state"] = stat(stranger.pid)[0]
stranger.kill(); stranger.wait()
log.close()
out["log"] = open(os.path.join(tmp, "gculaunch.log")).read()
print(json.dumps(out))
'''


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PidReuse(unittest.TestCase):
    def run_driver(self, mode):
        with gltest.TempDir() as tmp:
            proc = subprocess.run(
                ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                 PIDNS_DRIVER, gltest.require_binary(), tmp, mode],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            return json.loads(proc.stdout.strip().splitlines()[-1])

    def check_stranger_survives(self, seen):
        log = seen["log"]
        self.assertTrue(seen["released"], "rank 0's zombie was never released\n" + log)
        # The number went to the stranger, which leads its own group of that number ...
        self.assertEqual(seen["stranger"], seen["r0"], log)
        self.assertEqual(seen["stranger_pgrp"], seen["r0"], log)
        # ... and the end of the job (SIGTERM to every group, then SIGKILL) left it alone.
        self.assertEqual(seen["rc"], 0, log)
        self.assertIn(seen["stranger_state"], ("S", "R"), log)
        self.assertNotIn("SIGKILL", log)

    def test_a_stranger_with_an_exited_ranks_number_survives_the_job(self):
        self.check_stranger_survives(self.run_driver("plain"))

    def test_the_number_stays_pinned_while_the_group_has_members(self):
        seen = self.run_driver("grandchild")
        self.assertEqual(seen["pinned_state"], "Z", seen["log"])
        self.assertNotEqual(seen["early_stranger"], seen["r0"], seen["log"])
        self.check_stranger_survives(seen)


class GuardianHealth(unittest.TestCase):
    def test_a_killed_guardian_is_logged_and_replaced(self):
        with gltest.TempDir() as tmp:
            gc = os.path.join(tmp, "grandchild")
            args = ["--nproc-per-node", "2", "--standalone", "--rdzv-conf", "timeout=77"] + \
                gltest.child_args("grandchild", gc + ".${local_rank}", "print", "ready", "pause")
            with gltest.Job(args) as job:
                job.wait_for(lambda out, err: out.count("ready") == 2, what="ranks ready")
                first = gltest.wait_guardian_of(job.pid)
                self.assertIsNotNone(first)
                os.kill(first, signal.SIGKILL)  # ours: a child of the gculaunch we started
                job.wait_for(lambda out, err: "started a new one" in err, timeout=30,
                             what="the guardian's replacement")
                self.assertIn("the guardian process (pid %d) was killed by SIGKILL" % first,
                              job.stderr)
                second = gltest.wait_guardian_of(job.pid)
                self.assertIsNotNone(second)
                self.assertNotEqual(second, first)
                with open("/proc/%d/cmdline" % second, "rb") as f:
                    self.assertEqual(f.read(), b"gculaunch-guard\0--gculaunch-guardian\0")
                with open("/proc/%d/environ" % second, "rb") as f:
                    self.assertEqual(f.read(), b"")
                grandchildren = []
                for rank in range(2):
                    with open("%s.%d" % (gc, rank)) as f:
                        grandchildren.append(int(f.read()))
                job.signal(signal.SIGKILL)
                job.proc.wait(timeout=10)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 2.0), [],
                                 "the new guardian did not clean up after kill -9")
                for pid in grandchildren:
                    self.assertFalse(gltest.process_alive(pid))


class DescriptorExhaustion(unittest.TestCase):
    def test_full_descriptor_table_neither_spins_nor_loses_processes(self):
        limit = 256
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 4096 <= hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))  # the test's own sockets
        with gltest.TempDir() as tmp:
            runtime = os.path.join(tmp, "run")
            os.mkdir(runtime, 0o700)
            fail = os.path.join(tmp, "fail")
            gc = os.path.join(tmp, "grandchild")
            # Rank 1 fails on demand; rank 0 keeps a grandchild that ignores SIGTERM.
            rank = gltest.write_script(
                tmp, "rank.sh",
                "#!/bin/sh\n"
                "if [ \"$LOCAL_RANK\" = 1 ]; then\n"
                "  i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
                "  exit 3\nfi\n"
                "(trap '' TERM; exec sleep 60) &\n"
                "echo $! > %s\necho ready\nwait\n" % (fail, gc))
            port = gltest.free_port()
            args = ["--nproc-per-node", "2", "--standalone", "--master-port", str(port),
                    "--grace-period", "1", "--no-python", rank]

            def low_limit():
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

            conns = []
            try:
                with gltest.Job(args, extra_env={"XDG_RUNTIME_DIR": runtime},
                                preexec_fn=low_limit) as job:
                    job.wait_for(lambda out, err: out.count("ready") == 1, what="rank 0 ready")
                    with open(gc) as f:
                        grandchild = int(f.read())
                    # The store refuses connections beyond its cap, which sits below the
                    # descriptor budget ...
                    for _ in range(limit):
                        conns.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                    # ... so fill the rest through the control socket (idle for 5 s each).
                    sock_path = glob.glob(os.path.join(runtime, "gculaunch", "*.sock")) or \
                        glob.glob(os.path.join(runtime, "*", "*.sock"))
                    self.assertTrue(sock_path, "no control socket under " + runtime)
                    # Until gculaunch's table is full: a connect that finds the backlog full
                    # (gculaunch has not accepted yet, or cannot) is tried again.
                    deadline = time.monotonic() + 20
                    while "cannot accept connections" not in job.stderr:
                        self.assertLess(time.monotonic(), deadline,
                                        "no line about accept() failing\n" + job.stderr[-2000:])
                        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        c.settimeout(0.2)
                        try:
                            c.connect(sock_path[0])
                            conns.append(c)
                        except OSError:
                            c.close()
                            job._pump(0.05)
                    before = cpu_seconds(job.pid)
                    time.sleep(1.0)
                    spent = cpu_seconds(job.pid) - before
                    self.assertLess(spent, 0.5, "gculaunch spun on accept() for 1 s")
                    self.assertEqual(job.stderr.count("cannot accept connections"), 1,
                                     job.stderr)
                    open(fail, "w").close()
                    code = job.wait(timeout=60)
                    self.assertEqual(code, 3, job.stderr)
                    self.assertFalse(gltest.process_alive(grandchild),
                                     "gculaunch exited with the rank's grandchild alive\n" +
                                     job.stderr)
                    self.assertEqual(gltest.wait_no_tagged(job.tag, 2.0), [])
            finally:
                for c in conns:
                    c.close()


if __name__ == "__main__":
    unittest.main()
