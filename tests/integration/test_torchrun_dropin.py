"""Drop-in, round four (issue 38): where a script could tell gculaunch from torchrun.

  * --virtual-local-rank (torch 2.10+): every rank gets LOCAL_RANK=0 and, in the device
    profile's visible-devices variable, only its own card (mapped through a list already in
    the environment); two ranks on a fake device profile record both.
  * The log-line prefix template (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, or
    --log-line-prefix-template): torch's ${role_name}, ${rank}, ${local_rank}; a template
    without a placeholder is the same prefix for every rank.
  * An unknown --rdzv-conf key (overlap_timeout=600) is accepted with one warning naming it.
  * --redirects mapping a rank to 0 keeps no copy of that rank's output.
  * python3 on PATH as a pyenv shim (a fake one in the test's directory, in pyenv's own form):
    the ranks run the interpreter it chooses, with its PYENV_VERSION and PATH; the dry run
    shows both; PYTHON_EXEC naming the shim is used as given.
(`--` after SCRIPT or -m MODULE: tests/integration/test_torchrun_flags.py.)
"""
import glob
import json
import os
import unittest

import gltest

# A rank that writes down what it sees: <out>/rank<RANK>.json.
RECORD = r"""import json, os, sys
names = ("LOCAL_RANK", "RANK", "FAKE_VISIBLE_DEVICES", "GCULAUNCH_DEVICE_INDEX", "PYENV_VERSION",
         "PATH")
with open(os.path.join(sys.argv[1], "rank%s.json" % os.environ["RANK"]), "w") as f:
    json.dump(dict({n: os.environ.get(n) for n in names}, executable=sys.executable), f)
print("out %s" % os.environ["RANK"])
"""

FAKE_PROFILE = """name: fake-accel
description: a fake accelerator for tests
visible_env: [FAKE_VISIBLE_DEVICES]
devices:
  dir: /dev
  pattern: 'fakeacc([0-9]+)'
backend: gloo
"""

# pyenv exec's plain case, as tests/support/fake_pyenv.cc writes it; every run leaves a line
# in <root>/exec.log.
FAKE_PYENV_EXEC = r"""#!/bin/bash
set -e
echo "$$" >> "$PYENV_ROOT/exec.log"
[ "$1" = exec ] || exit 2
shift
program=$1
shift
version=${PYENV_VERSION:-}
if [ -z "$version" ]; then
  dir=$PWD
  while :; do
    if [ -f "$dir/.python-version" ]; then read -r version _ < "$dir/.python-version"; break; fi
    [ -n "$dir" ] || break
    dir=${dir%/*}
  done
fi
if [ -z "$version" ] && [ -f "$PYENV_ROOT/version" ]; then
  read -r version _ < "$PYENV_ROOT/version"
fi
export PYENV_VERSION=$version
export PATH="$PYENV_ROOT/versions/$version/bin:$PATH"
exec "$PYENV_ROOT/versions/$version/bin/$program" "$@"
"""


def fake_pyenv(root, version="9.9.9"):
    """A pyenv in `root` whose python3 is Debian's; returns its shim."""
    for sub in ("libexec", "shims"):
        os.makedirs(os.path.join(root, sub))
    gltest.write_script(os.path.join(root, "libexec"), "pyenv", FAKE_PYENV_EXEC)
    shim = gltest.write_script(
        os.path.join(root, "shims"), "python3",
        '#!/usr/bin/env bash\nset -e\n[ -n "$PYENV_DEBUG" ] && set -x\n\nprogram="${0##*/}"\n\n'
        'export PYENV_ROOT="%s"\nexec "%s/libexec/pyenv" exec "$program" "$@"\n' % (root, root))
    bin_dir = os.path.join(root, "versions", version, "bin")
    os.makedirs(bin_dir)
    os.symlink(gltest.PYTHON, os.path.join(bin_dir, "python3"))
    with open(os.path.join(root, "version"), "w") as f:
        f.write(version + "\n")
    return shim


class Dropin(unittest.TestCase):
    def setUp(self):
        self.tmp = gltest.TempDir(prefix="gltest-dropin-")
        self.dir = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.script = os.path.join(self.dir, "record.py")
        with open(self.script, "w") as f:
            f.write(RECORD)
        self.out = os.path.join(self.dir, "out")
        os.mkdir(self.out)

    def ranks(self, count):
        found = {}
        for rank in range(count):
            with open(os.path.join(self.out, "rank%d.json" % rank)) as f:
                found[rank] = json.load(f)
        return found

    def launch(self, args, extra_env=None, nproc=2, timeout=120):
        with gltest.Job(["--standalone", "--nproc-per-node", str(nproc)] + args +
                        [self.script, self.out], extra_env=extra_env, cwd=self.dir) as job:
            code = job.wait(timeout=timeout)
        return code, job

    # ---- --virtual-local-rank ----

    def fake_node(self, cards):
        root = os.path.join(self.dir, "root")
        os.makedirs(os.path.join(root, "dev"))
        for i in range(cards):
            open(os.path.join(root, "dev", "fakeacc%d" % i), "w").close()
        profile = os.path.join(self.dir, "fake-accel.yaml")
        with open(profile, "w") as f:
            f.write(FAKE_PROFILE)
        return ["--sysroot", root, "--device", profile]

    def test_virtual_local_rank_gives_local_rank_0_and_one_card(self):
        device = self.fake_node(4)
        for pool, cards in ((None, ["0", "1"]), ("5,7", ["5", "7"])):
            with self.subTest(pool=pool):
                extra = {"FAKE_VISIBLE_DEVICES": pool} if pool else None
                code, job = self.launch(device + ["--virtual-local-rank", "--python",
                                                  gltest.PYTHON], extra)
                self.assertEqual(code, 0, job.stderr)
                ranks = self.ranks(2)
                for rank in (0, 1):
                    self.assertEqual(ranks[rank]["LOCAL_RANK"], "0", ranks)
                    self.assertEqual(ranks[rank]["RANK"], str(rank))
                    self.assertEqual(ranks[rank]["FAKE_VISIBLE_DEVICES"], cards[rank], ranks)
                    self.assertEqual(ranks[rank]["GCULAUNCH_DEVICE_INDEX"], "0")
        # The dry run shows the same, and says what the flag means.
        done = gltest.run([gltest.require_binary(), "--dry-run", "--format", "json",
                           "--nproc-per-node", "2", "--virtual-local-rank"] + device +
                          [self.script], gltest.tagged_env(gltest.new_tag(),
                                                           {"FAKE_VISIBLE_DEVICES": "5,7"}))
        self.assertEqual(done.returncode, 0, done.stderr)
        plan = json.loads(done.stdout)
        self.assertEqual([r["env"]["LOCAL_RANK"] for r in plan["ranks"]], ["0", "0"])
        self.assertEqual([r["env"]["FAKE_VISIBLE_DEVICES"] for r in plan["ranks"]], ["5", "7"])
        self.assertTrue(any("every rank gets LOCAL_RANK=0" in n for n in plan["notes"]),
                        plan["notes"])
        # On the CPU there is no card to hide: LOCAL_RANK=0 all the same, and a note says so.
        code, job = self.launch(["--device", "cpu", "--virtual-local-rank", "--python",
                                 gltest.PYTHON])
        self.assertEqual(code, 0, job.stderr)
        self.assertEqual([r["LOCAL_RANK"] for r in self.ranks(2).values()], ["0", "0"])

    # ---- the log-line prefix template ----

    def test_log_line_prefix_template(self):
        base = ["--device", "cpu", "--python", gltest.PYTHON]
        cases = [
            ([], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[${role_name}-r${rank}]:"},
             ["[default-r0]:out 0", "[default-r1]:out 1"]),
            (["--role", "trainer", "--log-line-prefix-template", "${role_name}/$local_rank| "],
             {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "ignored"},
             ["trainer/0| out 0", "trainer/1| out 1"]),
            ([], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "plain> "},
             ["plain> out 0", "plain> out 1"]),
            ([], {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": ""},
             ["[rank0]: out 0", "[rank1]: out 1"]),
        ]
        for flags, env, lines in cases:
            with self.subTest(flags=flags, env=env):
                code, job = self.launch(base + flags, env)
                self.assertEqual(code, 0, job.stderr)
                shown = job.stdout.splitlines()
                for line in lines:
                    self.assertIn(line, shown)

    # ---- --rdzv-conf keys of other backends ----

    def test_an_unknown_rdzv_conf_key_is_accepted_with_one_warning(self):
        code, job = self.launch(["--device", "cpu", "--python", gltest.PYTHON, "--rdzv-conf",
                                 "join_timeout=900,overlap_timeout=600"])
        self.assertEqual(code, 0, job.stderr)
        warnings = [line for line in job.stderr.splitlines() if "overlap_timeout" in line]
        self.assertEqual(warnings, [
            "gculaunch: warning: --rdzv-conf: key overlap_timeout is not gculaunch's and "
            "ignored, as torchrun's rendezvous ignores keys it does not know"], job.stderr)
        self.assertEqual(sorted(self.ranks(2)), [0, 1])
        # A known key keeps its check.
        code, job = self.launch(["--device", "cpu", "--rdzv-conf",
                                 "overlap_timeout=600,join_timeout=soon"])
        self.assertEqual(code, 2)
        self.assertIn("'join_timeout' expects seconds", job.stderr)

    # ---- --redirects without --log-dir ----

    def test_ranks_mapped_to_0_keep_no_copy(self):
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp)
        code, job = self.launch(["--device", "cpu", "--python", gltest.PYTHON, "--redirects",
                                 "1:3"], {"TMPDIR": tmp})
        self.assertEqual(code, 0, job.stderr)
        runs = glob.glob(os.path.join(tmp, "torchelastic_*", "*", "attempt_0"))
        self.assertEqual(len(runs), 1, os.listdir(tmp))
        attempt = runs[0]
        # torch makes the rank directories and files only what it redirects.
        self.assertEqual(sorted(os.listdir(os.path.join(attempt, "0"))), [])
        self.assertEqual(sorted(os.listdir(os.path.join(attempt, "1"))),
                         ["stderr.log", "stdout.log"])
        with open(os.path.join(attempt, "1", "stdout.log")) as f:
            self.assertEqual(f.read(), "out 1\n")
        self.assertIn("[rank0]: out 0", job.stdout)
        self.assertNotIn("out 1", job.stdout)

    # ---- the interpreter behind a shim ----

    def test_ranks_run_the_interpreter_behind_a_pyenv_shim(self):
        root = os.path.join(self.dir, "pyenv")
        shim = fake_pyenv(root)
        real = os.path.join(root, "versions", "9.9.9", "bin", "python3")
        log = os.path.join(root, "exec.log")
        path = "%s/shims:/usr/bin:/bin" % root
        env = {"PATH": path}
        code, job = self.launch(["--device", "cpu"], env)
        self.assertEqual(code, 0, job.stderr)
        for rank in self.ranks(2).values():
            self.assertEqual(rank["executable"], real)
            self.assertEqual(rank["PYENV_VERSION"], "9.9.9")
            self.assertEqual(rank["PATH"], os.path.dirname(real) + ":" + path)
        # The ranks did not go through the shim: at most the probe (beside them) did.
        runs = open(log).read().split() if os.path.exists(log) else []
        self.assertLessEqual(len(runs), 1, runs)
        # The dry run shows the shim and the interpreter; argv[0] is the interpreter.
        done = gltest.run([gltest.require_binary(), "--dry-run", "--format", "json", "--device",
                           "cpu", self.script], gltest.tagged_env(gltest.new_tag(), env),
                          cwd=self.dir)
        self.assertEqual(done.returncode, 0, done.stderr)
        plan = json.loads(done.stdout)
        self.assertEqual(plan["python"]["shim"], shim)
        self.assertEqual(plan["python"]["interpreter"], real)
        self.assertEqual(plan["ranks"][0]["argv"][0], real)
        self.assertEqual(plan["ranks"][0]["env"]["PYENV_VERSION"], "9.9.9")
        # PYTHON_EXEC naming the shim is used exactly as given: the ranks go through it.
        before = len(open(log).read().split())
        code, job = self.launch(["--device", "cpu"], dict(env, PYTHON_EXEC=shim))
        self.assertEqual(code, 0, job.stderr)
        self.assertGreaterEqual(len(open(log).read().split()) - before, 2)
        self.assertEqual(self.ranks(2)[0]["executable"], real)


if __name__ == "__main__":
    unittest.main()
