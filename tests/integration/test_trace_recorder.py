"""The trace recorder (tests/traces/record.sh --short) against real torch 1.13 and torch 2.6,
so that it cannot rot: one set + get per version through the recording proxy, checked
message by message, and then decoded and replayed by our C++ codec and store
(rendezvous_tests '[trace-dir]').  Needs root (a private network namespace) and the torch
2.6 root, which gltest.torch2_python() makes when it is missing (the test fails, never
skips, when it cannot)."""
import json
import os
import struct
import subprocess
import unittest

import gltest

RECORD = os.path.join(gltest.SOURCE_DIR, "tests", "traces", "record.sh")
KEY, VALUE = b"/short_key", b"short_value"


def blob(b):
    return struct.pack("<Q", len(b)) + b


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class TraceRecorderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        root = gltest.torch2_python()[1]  # [in_root.sh, ROOT, python]
        cls.tmp = gltest.TempDir(prefix="gltest-traces-")
        cls.dir = cls.tmp.path
        tag = gltest.new_tag()
        try:
            cls.run_out = subprocess.run(
                ["bash", RECORD, "--short", "--out", cls.dir, "--torch2-root", root],
                env=gltest.tagged_env(tag), capture_output=True, text=True, timeout=300)
        finally:
            leftovers = gltest.wait_no_tagged(tag, 5)
            gltest.kill_tagged(tag)
        cls.leftovers = leftovers

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def test_recording_succeeds_and_stops_everything(self):
        out = self.run_out
        self.assertEqual(out.returncode, 0, "record.sh failed:\n%s\n%s" % (out.stdout, out.stderr))
        self.assertIn("short-torch1.13: ", out.stdout)
        self.assertIn("short-torch2.6: ", out.stdout)
        self.assertEqual(self.leftovers, [], "record.sh left processes running")
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["short-torch1.13.jsonl", "short-torch1.13.txt",
                          "short-torch2.6.jsonl", "short-torch2.6.txt"])

    def check_trace(self, name, dialect, version, set_code, wait_code, get_code):
        self.assertEqual(self.run_out.returncode, 0, self.run_out.stderr)
        records = load(os.path.join(self.dir, name + ".jsonl"))
        self.assertEqual(records[0]["kind"], "meta")
        self.assertEqual(records[0]["format"], "gculaunch-tcpstore-trace/1")
        self.assertEqual(records[0]["decode"], dialect)
        self.assertEqual(records[-1]["kind"], "end")
        self.assertEqual([r["seq"] for r in records], list(range(1, len(records) + 1)))
        ids = [r.get("id") for r in records if r["kind"] == "note" and r.get("id")]
        self.assertEqual(ids, ["server", "client", "short.client", "short.set", "short.get"])
        server_note = next(r["text"] for r in records if r.get("id") == "server")
        self.assertIn("torch " + version, server_note)
        self.assertFalse([r for r in records if r["kind"] == "error"])

        # The client's data connection: the one that carries the SET.
        msgs = [r for r in records if r["kind"] == "msg"]
        set_msg = next(r for r in msgs if r["dir"] == "c2s" and r["op"] == "SET")
        conn = set_msg["conn"]
        self.assertEqual(set_msg["hex"], (bytes([set_code]) + blob(KEY) + blob(VALUE)).hex())
        self.assertEqual(set_msg["fields"]["key"]["text"], KEY.decode())
        self.assertEqual(set_msg["fields"]["value"]["text"], VALUE.decode())
        c2s = [r for r in msgs if r["conn"] == conn and r["dir"] == "c2s"]
        s2c = [r for r in msgs if r["conn"] == conn and r["dir"] == "s2c"]
        ops = [r["op"] for r in c2s]
        if dialect == "v2":
            self.assertEqual(ops, ["VALIDATE", "PING", "SET", "WAIT", "GET"])
            nonce = c2s[1]["fields"]["nonce"]
            self.assertEqual(c2s[0]["hex"], "00cef7853c")
            self.assertEqual(s2c[0]["op"], "UINT32")
            self.assertEqual(s2c[0]["hex"], struct.pack("<I", nonce).hex())
            s2c = s2c[1:]
        else:
            self.assertEqual(ops, ["SET", "WAIT", "GET"])
        self.assertEqual(c2s[-2]["hex"], (bytes([wait_code]) + struct.pack("<Q", 1)
                                          + blob(KEY)).hex())
        self.assertEqual(c2s[-1]["hex"], (bytes([get_code]) + blob(KEY)).hex())
        self.assertEqual([(r["op"], r["reply_to"], r["hex"]) for r in s2c],
                         [("STOP_WAITING", "WAIT", "00"), ("VALUE", "GET", blob(VALUE).hex())])

        # The chunks are the recording: the messages are exactly their bytes.
        for d, decoded in (("c2s", c2s), ("s2c", s2c)):
            chunks = "".join(r["hex"] for r in records
                             if r["kind"] == "chunk" and r["conn"] == conn and r["dir"] == d)
            if d == "s2c" and dialect == "v2":
                chunks = chunks[8:]  # the PING echo, checked above
            self.assertEqual(chunks, "".join(r["hex"] for r in decoded), d)
        closes = [r for r in records if r["kind"] == "close" and r["conn"] == conn]
        self.assertEqual([r["side"] for r in closes], ["client"])

        with open(os.path.join(self.dir, name + ".txt")) as f:
            text = f.read()
        self.assertIn("[short.set]", text)
        self.assertIn("-> SET key='/short_key' value='short_value'", text)
        self.assertIn("<- VALUE (reply to GET) value='short_value'", text)

    def test_torch113_set_and_get(self):
        self.check_trace("short-torch1.13", "v1", "1.13", set_code=0, wait_code=5, get_code=2)

    def test_torch26_set_and_get(self):
        self.check_trace("short-torch2.6", "v2", "2.6", set_code=1, wait_code=6, get_code=3)

    def test_our_decoder_and_store_agree(self):
        self.assertEqual(self.run_out.returncode, 0, self.run_out.stderr)
        build = os.environ.get("GCULAUNCH_BUILD_DIR", "")
        binary = os.path.join(build, "tests", "rendezvous_tests")
        if not build or not os.access(binary, os.X_OK):
            raise RuntimeError("GCULAUNCH_BUILD_DIR does not hold tests/rendezvous_tests "
                               "(got %r); run this test through ctest" % build)
        env = dict(os.environ, GCULAUNCH_TRACE_DIR=self.dir)
        out = subprocess.run([binary, "[trace-dir]"], env=env, capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout[-4000:] + out.stderr[-2000:])
        self.assertIn("All tests passed", out.stdout)


if __name__ == "__main__":
    unittest.main()
