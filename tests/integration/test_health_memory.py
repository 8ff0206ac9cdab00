"""The wait for device memory before a restart (issue 44, item 3), on one node.

A test device profile (as in test_health.py) names a vendor tool, `fake-smi`, the test's own
script on PATH, and a `health.memory` entry (memory.used below 1024 MiB).  In attempt 0 local
rank 1 writes the time it died (nanoseconds) to a file and fails; the fake tool reports card 1
holding 3000 MiB until $RELEASE_S seconds after that time, as a driver still freeing a dead
context would, and 2 MiB otherwise.  Nothing in gculaunch's path sleeps: the tool reads the
file's time on each call.

Scenarios: the memory is freed 2 s after the rank died: the restart waits for it (the log line,
attempt 1 starts after the release, a device_memory_wait event, the status count); the memory
stays held past --device-memory-wait 1: one warning naming the card and the MiB, and the restart
still happens; --device-memory-wait 0: no wait.
"""
import json
import os
import unittest

import gltest

PROFILE = """name: fakegpu
backend: gloo
visible_env: [FAKE_VISIBLE_DEVICES]
devices:
  dir: /dev
  pattern: 'fakegpu([0-9]+)'
driver_path: /sys/module/fakegpu
health:
  tool: fake-smi
  args: ['--query-gpu={fields}', '--format=csv,noheader']
  index: index
  fields:
    - {name: ecc.errors.uncorrected.volatile.total, unhealthy: above 0, says: uncorrectable ECC errors}
  timeout: 5
  memory: {field: memory.used, below_mib: 1024}
"""

# One row per card; memory.used of card 1 is "3000 MiB" until $RELEASE_S s after the time in
# $FAKE_SMI_STATE/died (ns), else "2 MiB"; every memory query is counted in "memory_calls".
FAKE_SMI = r"""#!/bin/sh
s="$FAKE_SMI_STATE"
query="${1#--query-gpu=}"
case "$query" in *memory.used*) echo x >> "$s/memory_calls";; esac
held=0
if [ -e "$s/died" ]; then
  died=$(cat "$s/died")
  now=$(date +%s%N)
  [ "$now" -lt $((died + ${RELEASE_S:-2} * 1000000000)) ] && held=1
fi
for i in 0 1; do
  line="$i"
  for f in $(echo "$query" | tr ',' ' '); do
    case "$f" in
      index) continue;;
      memory.used) if [ $held = 1 ] && [ $i = 1 ]; then v='3000 MiB'; else v='2 MiB'; fi;;
      *) v=0;;
    esac
    line="$line, $v"
  done
  echo "$line"
done
"""

# Each start writes its time (ns) to $1/start.<attempt>.<local rank>; in attempt 0 local rank 1
# writes the time it dies to the tool's state and fails.
RANK = r"""#!/bin/sh
date +%s%N > "$1/start.$TORCHELASTIC_RESTART_COUNT.$LOCAL_RANK"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 1 ]; then
  date +%s%N > "$FAKE_SMI_STATE/died.tmp" && mv "$FAKE_SMI_STATE/died.tmp" "$FAKE_SMI_STATE/died"
  exit 3
fi
exit 0
"""


class DeviceMemoryWait(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tmp_ctx = gltest.TempDir(prefix="gltest-health-memory-")
        self.tmp = self.tmp_ctx.__enter__()
        self.addCleanup(self.tmp_ctx.__exit__, None, None, None)
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(os.path.join(self.root, "dev"))
        os.makedirs(os.path.join(self.root, "sys", "module", "fakegpu"))
        for i in range(2):
            open(os.path.join(self.root, "dev", "fakegpu%d" % i), "w").close()
        self.state = os.path.join(self.tmp, "state")
        self.out = os.path.join(self.tmp, "out")
        self.bin = os.path.join(self.tmp, "bin")
        self.logs = os.path.join(self.tmp, "logs")
        for d in (self.state, self.out, self.bin):
            os.makedirs(d)
        gltest.write_script(self.bin, "fake-smi", FAKE_SMI)
        self.rank = gltest.write_script(self.tmp, "rank.sh", RANK)
        self.profile = os.path.join(self.tmp, "fakegpu.yaml")
        with open(self.profile, "w") as f:
            f.write(PROFILE)

    def launch(self, extra_args=(), release_s=2):
        env = {"PATH": self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
               "FAKE_SMI_STATE": self.state, "RELEASE_S": str(release_s)}
        args = (["--sysroot", self.root, "--device", self.profile, "--standalone",
                 "--nproc-per-node", "2", "--max-restarts", "1",
                 "--restart-backoff", "off", "--log-dir", self.logs]
                + list(extra_args) + ["--no-python", self.rank, self.out])
        with gltest.Job(args, extra_env=env) as job:
            code = job.wait(timeout=90)
        return code, job

    def read_ns(self, path):
        with open(path) as f:
            return int(f.read().strip())

    def attempt1_start_ns(self):
        return min(self.read_ns(os.path.join(self.out, "start.1.%d" % r)) for r in (0, 1))

    def memory_events(self):
        found = []
        for dirpath, _, files in os.walk(self.logs):
            if "events.jsonl" in files:
                with open(os.path.join(dirpath, "events.jsonl")) as f:
                    found += [json.loads(line) for line in f if line.strip()]
        return [e for e in found if e["event"] == "device_memory_wait"]

    def test_restart_waits_until_the_memory_is_freed(self):
        code, job = self.launch()
        self.assertEqual(code, 0, job.stderr[-3000:])
        died = self.read_ns(os.path.join(self.state, "died"))
        # Attempt 1 began only once the tool said the memory was freed (2 s after the death).
        self.assertGreaterEqual(self.attempt1_start_ns() - died, 2 * 10**9, job.stderr[-3000:])
        self.assertRegex(job.stderr,
                         r"attempt 1: waited \d+\.\d s for the last attempt's device memory to "
                         r"be freed \(card 1: 3000 MiB at first; every card below 1024 MiB now\)")
        self.assertNotIn("still held", job.stderr)
        events = self.memory_events()
        self.assertEqual(len(events), 1, events)
        self.assertEqual(events[0]["epoch"], 1)
        self.assertTrue(events[0]["freed"])
        self.assertEqual(events[0]["cards"], ["1"])
        self.assertGreater(events[0]["waited_s"], 0)
        with open(os.path.join(self.state, "memory_calls")) as f:
            self.assertGreater(len(f.read().splitlines()), 1)  # asked again until freed

    def test_bound_passes_first_warns_and_restarts(self):
        code, job = self.launch(["--device-memory-wait", "1"], release_s=60)
        self.assertEqual(code, 0, job.stderr[-3000:])
        # Restarted after the bound, long before the tool would have said the memory was freed.
        since_death = self.attempt1_start_ns() - self.read_ns(os.path.join(self.state, "died"))
        self.assertGreaterEqual(since_death, 10**9)
        self.assertLess(since_death, 60 * 10**9)
        self.assertRegex(job.stderr,
                         r"attempt 1: device memory still held after \d+\.\d s "
                         r"\(--device-memory-wait\): card 1: 3000 MiB")
        self.assertEqual(job.stderr.count("device memory still held"), 1)
        events = self.memory_events()
        self.assertEqual(len(events), 1, events)
        self.assertFalse(events[0]["freed"])
        self.assertEqual(events[0]["cards"], ["1"])
        self.assertEqual(events[0]["held"], "card 1: 3000 MiB")

    def test_zero_disables_the_wait(self):
        code, job = self.launch(["--device-memory-wait", "0"], release_s=60)
        self.assertEqual(code, 0, job.stderr[-3000:])
        self.assertTrue(os.path.exists(os.path.join(self.out, "start.1.0")))
        self.assertFalse(os.path.exists(os.path.join(self.state, "memory_calls")))
        self.assertEqual(self.memory_events(), [])
        self.assertNotIn("device memory", job.stderr)


if __name__ == "__main__":
    unittest.main()
