"""The health gate before every attempt (issue 44), on one node.

A test device profile (--device PATH.yaml) counts cards from fakegpuN files below a --sysroot
tree and names a vendor tool, `fake-smi`, which is the test's own script on PATH: it answers
the profile's query from a state directory the ranks write to (ECC errors after attempt 0,
[N/A] values, a field it does not know, a hang), the way nvidia-smi answers
--query-gpu=...,--format=csv,noheader.  The ranks are shell scripts, so no accelerator and no
Python are needed.

Scenarios: a card with uncorrectable ECC errors after attempt 0 (named, no second attempt,
exit 5, events.jsonl, --summary-json); the same with --health-check; --health-check's
variables; [N/A], Yes/No and an unknown field (the job runs); a hung tool (exit 5, every card);
a missing tool ("not checked", said once, the job runs); a device file that disappears;
`gculaunch check` showing the same rows in text and JSON.
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
  tool: %(tool)s
  args: ['--query-gpu={fields}', '--format=csv,noheader']
  index: index
  fields:
    - {name: ecc.errors.uncorrected.volatile.total, unhealthy: above 0, says: uncorrectable ECC errors}
    - {name: remapped_rows.pending, unhealthy: 'Yes', says: a row remap is pending}
    - {name: remapped_rows.failure, unhealthy: 'Yes', says: row remapping failed}
  lost: ['GPU is lost']
  timeout: %(timeout)s
"""

# The fake tool: one row per card 0..CARDS-1, from $FAKE_SMI_STATE: "ecc.N" gives card N two
# uncorrectable errors, "na" answers [N/A], "pending" says Yes for card 0's pending remap (only
# while "pending" exists), "old" refuses remapped_rows.failure as an old driver does (exit 2),
# "hang" never answers.  Every call is counted in "calls".
FAKE_SMI = r"""#!/bin/sh
s="$FAKE_SMI_STATE"
echo "$*" >> "$s/calls"
[ -e "$s/hang" ] && exec sleep 60
query="${1#--query-gpu=}"
case "$query" in
  *remapped_rows.failure*) if [ -e "$s/old" ]; then
      echo 'Field "remapped_rows.failure" is not a valid field to query.' >&2; exit 2; fi;;
esac
i=0
while [ $i -lt "${FAKE_SMI_CARDS:-2}" ]; do
  line="$i"
  for f in $(echo "$query" | tr ',' ' '); do
    case "$f" in
      index) continue;;
      ecc.*) if [ -e "$s/na" ]; then v='[N/A]'; elif [ -e "$s/ecc.$i" ]; then v=2; else v=0; fi;;
      remapped_rows.pending) if [ -e "$s/pending" ] && [ $i -eq 0 ]; then v=Yes; else v=No; fi;;
      *) v=No;;
    esac
    line="$line, $v"
  done
  echo "$line"
  i=$((i+1))
done
"""

# A rank: counts its start in $1/starts.<attempt>; in attempt 0, rank 1 "breaks" its card
# (the state file the fake tool reads) and fails.
RANK = r"""#!/bin/sh
echo "$LOCAL_RANK" >> "$1/starts.$TORCHELASTIC_RESTART_COUNT"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 1 ] && [ -n "$BREAK" ]; then
  touch "$FAKE_SMI_STATE/$BREAK"
  exit 3
fi
exit 0
"""


class Health(unittest.TestCase):
    def setUp(self):
        gltest.require_binary()
        self.tmp_ctx = gltest.TempDir(prefix="gltest-health-")
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
        self.profile = self.write_profile()

    def write_profile(self, tool="fake-smi", timeout=5):
        path = os.path.join(self.tmp, "fakegpu.yaml")
        with open(path, "w") as f:
            f.write(PROFILE % {"tool": tool, "timeout": timeout})
        return path

    def launch(self, extra_args=(), extra_env=None, max_restarts=3):
        env = {"PATH": self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
               "FAKE_SMI_STATE": self.state}
        env.update(extra_env or {})
        args = (["--sysroot", self.root, "--device", self.profile, "--standalone",
                 "--nproc-per-node", "2", "--max-restarts", str(max_restarts),
                 "--restart-backoff", "off", "--log-dir", self.logs,
                 "--summary-json", os.path.join(self.tmp, "summary.json")]
                + list(extra_args) + ["--no-python", self.rank, self.out])
        with gltest.Job(args, extra_env=env) as job:
            code = job.wait(timeout=90)
        return code, job

    def starts(self):
        """{attempt: sorted local ranks started}."""
        out = {}
        for name in os.listdir(self.out):
            with open(os.path.join(self.out, name)) as f:
                out[int(name.split(".")[1])] = sorted(int(x) for x in f.read().split())
        return out

    def events(self):
        found = []
        for dirpath, _, files in os.walk(self.logs):
            if "events.jsonl" in files:
                with open(os.path.join(dirpath, "events.jsonl")) as f:
                    found += [json.loads(line) for line in f if line.strip()]
        return found

    def summary(self):
        with open(os.path.join(self.tmp, "summary.json")) as f:
            return json.load(f)

    def assert_stepped_aside(self, code, job, card, reason):
        self.assertEqual(code, 5, job.stderr[-3000:])
        self.assertEqual(self.starts(), {0: [0, 1]}, job.stderr[-3000:])  # no attempt 1
        self.assertIn("this node is unhealthy: ", job.stderr)
        self.assertIn(reason, job.stderr)
        self.assertRegex(job.stderr, r"exit code 5 \(unhealthy\)")
        unhealthy = [e for e in self.events() if e["event"] == "node_unhealthy"]
        self.assertEqual(len(unhealthy), 1, self.events())
        self.assertEqual(unhealthy[0]["cards"], [card])
        self.assertEqual(unhealthy[0]["epoch"], 1)
        self.assertIn(reason, unhealthy[0]["reason"])
        summary = self.summary()
        self.assertEqual(summary["outcome"], "unhealthy")
        self.assertIn(reason, summary["unhealthy"])

    # ---------------------------------------------------------------- scenarios

    def test_ecc_errors_after_attempt_0_name_the_card_and_exit_5(self):
        code, job = self.launch(extra_env={"BREAK": "ecc.1"})
        self.assert_stepped_aside(
            code, job, "1",
            "fake-smi: card 1: uncorrectable ECC errors "
            "(ecc.errors.uncorrected.volatile.total = 2)")
        with open(os.path.join(self.state, "calls")) as f:
            self.assertEqual(len(f.read().splitlines()), 2)  # before attempts 0 and 1

    def test_health_check_command_fails_after_attempt_0(self):
        check = gltest.write_script(self.bin, "my-check", r"""#!/bin/sh
echo "cards=$GCULAUNCH_HEALTH_CARDS attempt=$GCULAUNCH_HEALTH_ATTEMPT" >> "$FAKE_SMI_STATE/seen"
if [ -e "$FAKE_SMI_STATE/bad" ]; then echo "card 1: link down"; exit 1; fi
echo fine
""")
        code, job = self.launch(["--health-check", check], extra_env={"BREAK": "bad"})
        self.assertEqual(code, 5, job.stderr[-3000:])
        self.assertEqual(self.starts(), {0: [0, 1]})
        with open(os.path.join(self.state, "seen")) as f:
            self.assertEqual(f.read().splitlines(),
                             ["cards=0,1 attempt=0", "cards=0,1 attempt=1"])
        self.assertIn("--health-check: %s exited 1: card 1: link down" % check, job.stderr)
        self.assertEqual(self.summary()["outcome"], "unhealthy")

    def test_health_check_that_hangs_is_killed_at_its_timeout(self):
        check = gltest.write_script(self.bin, "slow-check", "#!/bin/sh\nexec sleep 60\n")
        code, job = self.launch(["--health-check", check, "--health-check-timeout", "1"])
        self.assertEqual(code, 5, job.stderr[-3000:])
        self.assertEqual(self.starts(), {})  # not even attempt 0
        self.assertIn("still ran after 1.0 s (--health-check-timeout); killed", job.stderr)

    def test_na_yes_no_and_an_unknown_field_let_the_job_run(self):
        open(os.path.join(self.state, "na"), "w").close()
        open(os.path.join(self.state, "old"), "w").close()
        code, job = self.launch()
        self.assertEqual(code, 0, job.stderr[-3000:])
        self.assertEqual(self.starts(), {0: [0, 1]})
        with open(os.path.join(self.state, "calls")) as f:
            calls = f.read().splitlines()
        # The whole query, refused (exit 2), then one query per field.
        self.assertEqual(len(calls), 4, calls)
        self.assertIn("remapped_rows.failure", calls[0])

    def test_pending_remap_is_unhealthy(self):
        open(os.path.join(self.state, "pending"), "w").close()
        code, job = self.launch()
        self.assertEqual(code, 5, job.stderr[-3000:])
        self.assertEqual(self.starts(), {})
        self.assertIn("card 0: a row remap is pending (remapped_rows.pending = Yes)", job.stderr)

    def test_a_hung_tool_makes_every_card_unhealthy(self):
        self.write_profile(timeout=1)
        open(os.path.join(self.state, "hang"), "w").close()
        code, job = self.launch()
        self.assertEqual(code, 5, job.stderr[-3000:])
        self.assertEqual(self.starts(), {})
        self.assertIn("the tool hung (still running after 1.0 s; killed): every card counts as "
                      "unhealthy", job.stderr)
        unhealthy = [e for e in self.events() if e["event"] == "node_unhealthy"]
        self.assertEqual(unhealthy[0]["cards"], ["0", "1"])

    def test_a_missing_tool_is_not_checked_said_once(self):
        self.write_profile(tool="no-such-smi")
        code, job = self.launch(extra_env={"BREAK": "whatever"})
        self.assertEqual(code, 0, job.stderr[-3000:])
        self.assertEqual(self.starts(), {0: [0, 1], 1: [0, 1]})
        self.assertEqual(job.stderr.count("no-such-smi is not installed"), 1, job.stderr)

    def test_a_device_file_gone_after_attempt_0(self):
        rank = gltest.write_script(self.tmp, "rank-rm.sh", r"""#!/bin/sh
echo "$LOCAL_RANK" >> "$1/starts.$TORCHELASTIC_RESTART_COUNT"
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 1 ] && rm -f "$ROOT/dev/fakegpu1" && exit 3
exit 0
""")
        self.rank = rank
        code, job = self.launch(extra_env={"ROOT": self.root})
        self.assertEqual(code, 5, job.stderr[-3000:])
        self.assertEqual(self.starts(), {0: [0, 1]})
        self.assertIn("device files: device file 1 gone from /dev since gculaunch started",
                      job.stderr)

    def test_check_shows_the_same_rows(self):
        env = {"PATH": self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
               "FAKE_SMI_STATE": self.state}
        open(os.path.join(self.state, "ecc.1"), "w").close()
        args = ["check", "--sysroot", self.root, "--device", self.profile, "--no-python",
                "--nproc-per-node", "2"]
        with gltest.Job(args, extra_env=env) as job:
            code = job.wait(timeout=60)
        self.assertEqual(code, 1, job.stdout + job.stderr)
        self.assertRegex(job.stdout, r"health fake-smi.*card 1: uncorrectable ECC errors")
        with gltest.Job(args + ["--format", "json"], extra_env=env) as job:
            job.wait(timeout=60)
        checks = {c["name"]: c for c in json.loads(job.stdout)["checks"]}
        self.assertEqual(checks["health fake-smi"]["status"], "fail")
        self.assertIn("card 1: uncorrectable ECC errors", checks["health fake-smi"]["evidence"])
        self.assertEqual(checks["health device files"]["status"], "ok")
        self.assertEqual(checks["health driver"]["status"], "ok")


if __name__ == "__main__":
    unittest.main()
