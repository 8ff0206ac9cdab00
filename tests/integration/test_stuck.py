"""A rank stuck in uninterruptible sleep cannot keep gculaunch alive: after
SIGKILL and a bounded wait gculaunch exits 5 and names the pid and its
/proc state.

The D state is made for real with FUSE: this test is a tiny FUSE daemon
(Python standard library only) that mounts a file system, answers FUSE_INIT
and then reads the next request (the rank's lookup) and never answers it.
The kernel waits uninterruptibly for that answer once a fatal signal arrived
(request_wait_answer), so the rank sits in D even after SIGKILL.  At the end
the test closes /dev/fuse (the kernel aborts the connection, the rank dies)
and lazily unmounts."""
import json
import os
import signal
import struct
import subprocess
import threading
import time
import unittest

import gltest

FUSE_LOOKUP = 1
FUSE_GETATTR = 3
FUSE_INIT = 26
IN_HEADER = struct.Struct("<IIQQIIIHH")   # len, opcode, unique, nodeid, uid, gid, pid, extlen, pad
OUT_HEADER = struct.Struct("<IiQ")        # len, error, unique
INIT_IN = struct.Struct("<IIII")          # major, minor, max_readahead, flags


class UnansweringFuse:
    """Mounts at `mountpoint`; answers INIT (and GETATTR of the root), then
    swallows the first LOOKUP without answering it."""

    def __init__(self, mountpoint):
        self.mountpoint = mountpoint
        self.fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        self.lookup_read = threading.Event()
        self.error = None
        out = subprocess.run(
            ["mount", "-t", "fuse", "-o",
             "fd=%d,rootmode=40000,user_id=0,group_id=0" % self.fd, "gltest", mountpoint],
            pass_fds=(self.fd,), capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            os.close(self.fd)
            raise RuntimeError("mount -t fuse failed: %s %s" % (out.stdout, out.stderr))
        self.mounted = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def reply(self, unique, payload=b"", error=0):
        os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), error, unique) + payload)

    def serve(self):
        try:
            while True:
                data = os.read(self.fd, 1 << 20)
                (_, opcode, unique, nodeid, _, _, _, _, _) = IN_HEADER.unpack_from(data)
                if opcode == FUSE_INIT:
                    major, minor, max_readahead, _ = INIT_IN.unpack_from(data, IN_HEADER.size)
                    init_out = struct.pack("<IIIIHHIIHHI7I", 7, min(minor, 31), max_readahead,
                                           0, 16, 12, 65536, 1, 0, 0, 0, *([0] * 7))
                    self.reply(unique, init_out)
                elif opcode == FUSE_GETATTR and nodeid == 1:
                    attr = struct.pack("<QQQQQQIIIIIIIIII", 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                       0o40755, 2, 0, 0, 0, 4096, 0)
                    self.reply(unique, struct.pack("<QII", 1, 0, 0) + attr)
                elif opcode == FUSE_LOOKUP:
                    self.lookup_read.set()  # read, and never answered
                    return
                else:
                    self.reply(unique, error=-38)  # ENOSYS
        except Exception as e:  # reported by the test
            self.error = e
            self.lookup_read.set()

    def release(self):
        """Aborts the connection (closing /dev/fuse fails every pending
        request), then unmounts."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.mounted:
            subprocess.run(["umount", "-l", self.mountpoint], capture_output=True, timeout=30)
            self.mounted = False


STUCK_RANK = """#!/bin/sh
if [ "$LOCAL_RANK" = 0 ]; then exec %(child)s print ready stat %(mnt)s/x; fi
exec %(child)s print ready pause
"""


class StuckRank(unittest.TestCase):
    def test_d_state_rank_gives_exit_5_and_a_report(self):
        gltest.require_helpers()
        tmp = gltest.TempDir()
        mnt = os.path.join(tmp.path, "mnt")
        os.mkdir(mnt)
        fuse = UnansweringFuse(mnt)
        try:
            script = os.path.join(tmp.path, "rank.sh")
            with open(script, "w") as f:
                f.write(STUCK_RANK % {"child": gltest.TEST_CHILD, "mnt": mnt})
            os.chmod(script, 0o755)
            summary = os.path.join(tmp.path, "summary.json")
            with gltest.Job(["--nproc-per-node", "2", "--grace-period", "1", "--summary-json",
                             summary, "--no-python", script]) as job:
                job.wait_for(lambda out, err: out.count("ready") == 2, what="ranks ready")
                self.assertTrue(fuse.lookup_read.wait(30), "the rank never reached the mount")
                self.assertIsNone(fuse.error)
                job.signal(signal.SIGTERM)
                sent = time.monotonic()
                code = job.wait(timeout=60)
                elapsed = time.monotonic() - sent
                self.assertEqual(code, 5, job.stderr)
                # grace (1 s) + the bounded wait after SIGKILL (5 s), with room to spare
                self.assertLess(elapsed, 15)
                with open(summary) as f:
                    doc = json.load(f)
                self.assertEqual(doc["outcome"], "stuck")
                self.assertEqual(len(doc["stuck"]), 1, doc["stuck"])
                stuck = doc["stuck"][0]
                self.assertEqual(stuck["state"], "D")
                self.assertIn("stuck: pid %d (gculaunch_test_) state D (disk sleep: "
                              "uninterruptible)" % stuck["pid"], job.stderr)
                self.assertIn("survived SIGKILL for 5 s", job.stderr)
                with open("/proc/%d/stat" % stuck["pid"]) as f:
                    self.assertEqual(f.read().rsplit(")", 1)[1].split()[0], "D")
                fuse.release()
                self.assertEqual(gltest.wait_no_tagged(job.tag, 10), [])
        finally:
            fuse.release()
            tmp.__exit__(None, None, None)


if __name__ == "__main__":
    unittest.main()
