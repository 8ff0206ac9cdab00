"""Every flag of torchrun's real argument parser is accepted by gculaunch, with its meaning.

The flag list is read at run time from torch.distributed.run.get_args_parser() of Debian's
torch 1.13 (/usr/bin/python3) and of torch 2.6 (the python3 of the cached trixie root), never
from a copied list.  For each flag, in each of its spellings, `gculaunch --dry-run` must accept
it (and, where the dry run shows it, apply it).  argparse's abbreviations are computed by the
parser itself: every prefix argparse resolves must resolve in gculaunch to the same flag, and
every prefix argparse refuses because it names two different flags must be refused by
gculaunch as ambiguous.  (A prefix of both spellings of one flag, such as --nproc, which
Python 3.13's argparse refuses, is resolved by gculaunch: it names one flag.)

The later torchrun flags (--signals-to-handle, --shutdown-timeout, --event-log-handler,
--virtual-local-rank, --numa-binding, --duplicate-stdout-filters, --duplicate-stderr-filters)
are in neither parser.  For them the option strings of torch 2.11's parser are kept in
tests/data/torchrun_2_11_flags.txt (no torch 2.11 here), and every one of them goes through
the same dry-run check (not the abbreviation check, which needs argparse itself); the unit
tests (tests/launcher/frontend/cli_test.cc, torchrun_flags_test.cc) cover them too.
"""
import json
import os
import subprocess
import unittest

import gltest

# Runs inside the interpreter of the torch under test: argv[1] is a JSON object
# {dest: sample value}.  Prints a JSON list of the parser's flags and, for each long
# spelling, the prefixes argparse accepts and those it refuses as ambiguous.
PARSER_DUMP = r"""
import contextlib, io, json, re, sys
import torch.distributed.run as run

samples = json.loads(sys.argv[1])
parser = run.get_args_parser()
strings_to_dest = {}
for action in parser._actions:
    for s in action.option_strings:
        strings_to_dest[s] = action.dest

def parse(args):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(args), ""
    except SystemExit:
        return None, err.getvalue()

flags = []
for action in parser._actions:
    if not action.option_strings or action.dest == "help":
        continue
    takes_value = action.nargs != 0
    value = samples.get(action.dest)
    entry = {"dest": action.dest, "strings": action.option_strings,
             "takes_value": takes_value, "accepted": [], "ambiguous": []}
    flags.append(entry)
    if takes_value and value is None:
        continue  # the test reports the missing sample
    tail = ([value] if takes_value else []) + ["x.py"]
    for s in action.option_strings:
        if not s.startswith("--"):
            continue
        full, _ = parse([s] + tail)
        for length in range(3, len(s)):
            prefix = s[:length]
            ns, err = parse([prefix] + tail)
            if ns is not None:
                if ns == full:  # the prefix means the flag itself
                    entry["accepted"].append(prefix)
                continue
            m = re.search(r"ambiguous option: (\S+) could match (.*)", err)
            if m and m.group(1) == prefix:
                dests = {strings_to_dest[o.strip()] for o in m.group(2).split(",")}
                if len(dests) > 1:
                    entry["ambiguous"].append(prefix)
print(json.dumps(flags))
"""

# A value for each of torchrun's value flags, by argparse dest.
SAMPLES = {
    "nnodes": "1:1",
    "nproc_per_node": "2",
    "rdzv_backend": "c10d",
    "rdzv_endpoint": "127.0.0.1:29511",
    "rdzv_id": "job-flags",
    "rdzv_conf": "join_timeout=900",
    "max_restarts": "1",
    "monitor_interval": "0.5",
    "start_method": "fork",
    "role": "trainer",
    "log_dir": "LOGDIR",  # replaced by a temporary directory
    "redirects": "3",
    "tee": "1",
    "local_ranks_filter": "0",
    "node_rank": "0",
    "master_addr": "127.0.0.2",
    "master_port": "29512",
    "local_addr": "127.0.0.1",
    "logs_specs": "default",
    # torch 2.11's list only (tests/data/torchrun_2_11_flags.txt)
    "event_log_handler": "console",
    "duplicate_stdout_filters": "loss,acc",
    "duplicate_stderr_filters": "WARN,,x",
    "numa_binding": "node",
    "signals_to_handle": "SIGTERM,SIGINT",
    "shutdown_timeout": "30",
}

# What the dry run must show for a flag, where it shows it: dest -> check(plan).
def _env(plan, key):
    return plan["ranks"][0]["env"].get(key)


EFFECTS = {
    "nproc_per_node": lambda p: len(p["ranks"]) == 2,
    "rdzv_endpoint": lambda p: p["master_addr"] == "127.0.0.1" and p["master_port"] == 29511,
    "rdzv_id": lambda p: _env(p, "TORCHELASTIC_RUN_ID") == "job-flags",
    "max_restarts": lambda p: _env(p, "TORCHELASTIC_MAX_RESTARTS") == "1",
    "role": lambda p: _env(p, "ROLE_NAME") == "trainer",
    "master_addr": lambda p: p["master_addr"] == "127.0.0.2",
    "master_port": lambda p: p["master_port"] == 29512,
    "module": lambda p: "-m" in p["ranks"][0]["argv"],
    "no_python": lambda p: p["ranks"][0]["argv"][0].endswith("x.py"),
    "standalone": lambda p: p["master_addr"] == "127.0.0.1",
    "log_dir": lambda p: p.get("log_dir", "").startswith(p["_log_dir"]),
    "start_method": lambda p: any("start-method" in n for n in p["notes"]),
    "run_path": lambda p: any("--run-path" in n for n in p["notes"]),
    "duplicate_stdout_filters": lambda p: p.get("duplicate_stdout_filters") == ["loss", "acc"],
    "duplicate_stderr_filters": lambda p: p.get("duplicate_stderr_filters") == ["WARN,x"],
}

FLAGS_2_11 = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data",
                          "torchrun_2_11_flags.txt")
POSITIONALS_2_11 = os.path.join(os.path.dirname(FLAGS_2_11), "torchrun_2_11_positionals.txt")

# Where a "--" can stand, and what torchrun makes of each: "X" is the script (a real file),
# "M" a module.  Each runs through the parsers below and through gculaunch.
DASH_CASES = [
    ["X", "--", "--depth=24"],
    ["-m", "M", "--", "--depth=24"],
    ["--", "X", "--", "a"],
    ["X", "a", "--", "b"],
    ["--", "X", "a"],
    ["X", "--"],
    ["X", "--", "--"],
    ["X", "a", "--", "--", "b"],
    ["--nnodes", "1", "--", "X", "--", "a"],
    ["X", "--", "a", "--", "b"],
    ["--", "--", "X"],
    ["--", "-m", "M"],
    ["-m", "--", "M", "--", "x"],
    ["X", "--nnodes", "2", "--", "y"],
    ["--standalone", "X", "--", "--standalone"],
]

# Runs in a torch's interpreter: argv[1] the cases, argv[2] either "live" (torch's own parser)
# or a JSON [flags, positionals] to build torch 2.11's parser from the kept declarations.
# Prints [[training_script, training_script_args, module], ...] and the parser's positionals.
DASH_DUMP = r"""
import argparse, contextlib, io, json, sys
cases = json.loads(sys.argv[1])
if sys.argv[2] == "live":
    import torch.distributed.run as run
    parser = run.get_args_parser()
else:
    flags, positionals = json.loads(sys.argv[2])
    parser = argparse.ArgumentParser()
    for flag in flags:
        parser.add_argument(*flag["strings"], **({} if flag["takes_value"] else
                                                  {"action": "store_true"}))
    for dest, nargs in positionals:
        parser.add_argument(dest, **({"nargs": argparse.REMAINDER} if nargs == "REMAINDER"
                                     else {}))
results = []
for case in cases:
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            ns = parser.parse_args(case)
        results.append([ns.training_script, ns.training_script_args, bool(ns.module)])
    except SystemExit:
        results.append(None)
positionals = [[a.dest, "REMAINDER" if a.nargs == argparse.REMAINDER else str(a.nargs)]
               for a in parser._actions if not a.option_strings]
print(json.dumps({"results": results, "positionals": positionals}))
"""


def read_flag_list(path):
    """torch 2.11's parser as read_parsers() gives it, from the kept list: one entry per
    argument, without argparse's abbreviations."""
    flags = []
    with open(path) as f:
        for line in f:
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            strings, kind = words[:-1], words[-1]
            assert kind in ("value", "switch"), line
            long_names = [s for s in strings if s.startswith("--")]
            flags.append({"dest": long_names[0][2:].replace("-", "_"), "strings": strings,
                          "takes_value": kind == "value", "accepted": [], "ambiguous": []})
    return flags


def read_parsers(python_cmds):
    """{name: flags} from each interpreter; they run at once (importing torch dominates)."""
    procs = {name: subprocess.Popen(list(cmd) + ["-c", PARSER_DUMP, json.dumps(SAMPLES)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, cmd in python_cmds.items()}
    parsers = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError("could not read torchrun's parser of %s:\n%s" % (name, err[-3000:]))
        parsers[name] = json.loads(out)
    return parsers


def read_positionals(path):
    """torch 2.11's positional arguments as kept in tests/data: [[dest, nargs], ...]."""
    with open(path) as f:
        return [line.split() for line in f if line.strip() and not line.startswith("#")]


def dash_results(python_cmd, cases, declaration="live"):
    out = subprocess.run(list(python_cmd) + ["-c", DASH_DUMP, json.dumps(cases), declaration],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError("could not run the parser in %s:\n%s" % (python_cmd, out.stderr[-3000:]))
    return json.loads(out.stdout)


class TorchrunDashes(unittest.TestCase):
    """`--` anywhere on the command line goes where torchrun's argparse puts it (issue 38)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = gltest.TempDir()
        cls.script = os.path.join(cls.tmp.path, "x.py")
        with open(cls.script, "w") as f:
            f.write("print('hello')\n")
        cls.cases = [[cls.script if w == "X" else "scripts.base_train" if w == "M" else w
                      for w in case] for case in DASH_CASES]
        python2 = gltest.torch2_python()
        kept = json.dumps([read_flag_list(FLAGS_2_11), read_positionals(POSITIONALS_2_11)])
        cls.parsers = {
            "torch 1.13": dash_results([gltest.PYTHON], cls.cases),
            "torch 2.6": dash_results(python2, cls.cases),
            # torch 2.11's declarations under both Pythons (argparse's "--" rules are Python's)
            "torch 2.11 (kept), Python 3.11": dash_results([gltest.PYTHON], cls.cases, kept),
            "torch 2.11 (kept), Python 3.13": dash_results(python2, cls.cases, kept),
        }

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def test_the_kept_positionals_are_the_live_parsers(self):
        kept = read_positionals(POSITIONALS_2_11)
        self.assertEqual(kept, [["training_script", "None"], ["training_script_args", "REMAINDER"]])
        for name, parsed in self.parsers.items():
            self.assertEqual(parsed["positionals"], kept, name)

    def test_every_position_of_dashes_as_argparse(self):
        checked = 0
        for i, case in enumerate(self.cases):
            expected = {name: parsed["results"][i] for name, parsed in self.parsers.items()}
            # The parsers agree (else gculaunch could follow only one of them).
            self.assertEqual(len({json.dumps(v) for v in expected.values()}), 1,
                             "%s: %s" % (case, expected))
            script, script_args, module = expected["torch 1.13"]
            with self.subTest(case=case):
                args = [gltest.require_binary(), "--dry-run", "--format", "json", "--device",
                        "cpu", "--python", gltest.PYTHON] + case
                out = gltest.run(args, gltest.tagged_env(gltest.new_tag()), timeout=30)
                self.assertEqual(out.returncode, 0, out.stderr)
                argv = json.loads(out.stdout)["ranks"][0]["argv"]
                self.assertEqual(argv[:2], [gltest.PYTHON, "-u"])
                self.assertEqual(argv[2:], (["-m"] if module else []) + [script] + script_args)
                checked += 1
        self.assertEqual(checked, len(DASH_CASES))

    def test_a_module_parsing_its_own_flags_after_dashes(self):
        # nanochat's speedrun: torchrun --standalone --nproc_per_node=8 -m scripts.base_train --
        # --depth=24; the module's argparse sees ['--depth=24'].
        work = os.path.join(self.tmp.path, "work")
        os.makedirs(os.path.join(work, "scripts"), exist_ok=True)
        with open(os.path.join(work, "scripts", "__init__.py"), "w"):
            pass
        with open(os.path.join(work, "scripts", "base_train.py"), "w") as f:
            f.write("import argparse, os\n"
                    "parser = argparse.ArgumentParser()\n"
                    "parser.add_argument('--depth', type=int, required=True)\n"
                    "args = parser.parse_args()\n"
                    "print('rank %s depth %d' % (os.environ['RANK'], args.depth))\n")
        with gltest.Job(["--standalone", "--nproc_per_node=2", "--device", "cpu", "--python",
                         gltest.PYTHON, "-m", "scripts.base_train", "--", "--depth=24"],
                        cwd=work) as job:
            code = job.wait(timeout=120)
        self.assertEqual(code, 0, job.stderr)
        for rank in (0, 1):
            self.assertIn("[rank%d]: rank %d depth 24" % (rank, rank), job.stdout)


class TorchrunFlags(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.parsers = read_parsers({"torch 1.13": [gltest.PYTHON],
                                    "torch 2.6": gltest.torch2_python()})
        cls.parsers["torch 2.11 (kept list)"] = read_flag_list(FLAGS_2_11)
        cls.tmp = gltest.TempDir()
        cls.script = os.path.join(cls.tmp.path, "x.py")
        with open(cls.script, "w") as f:
            f.write("print('hello')\n")
        cls.log_dir = os.path.join(cls.tmp.path, "logs")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def dry_run(self, flag_args):
        args = [gltest.require_binary(), "--dry-run", "--format", "json", "--device", "cpu",
                "--python", gltest.PYTHON] + flag_args + [self.script]
        env = gltest.tagged_env(gltest.new_tag())
        return gltest.run(args, env, timeout=30)

    def value_args(self, flag, entry):
        if not entry["takes_value"]:
            return [flag]
        value = SAMPLES[entry["dest"]].replace("LOGDIR", self.log_dir)
        extra = []
        if entry["dest"] in ("redirects", "tee"):
            extra = ["--log-dir", self.log_dir]
        return extra + [flag, value]

    def check_accepted(self, what, flag, entry):
        out = self.dry_run(self.value_args(flag, entry))
        self.assertEqual(out.returncode, 0, "%s: gculaunch refused %s: %s"
                         % (what, flag, out.stderr.strip()))
        plan = json.loads(out.stdout)
        plan["_log_dir"] = self.log_dir
        check = EFFECTS.get(entry["dest"])
        if check is not None:
            self.assertTrue(check(plan), "%s: %s had no effect in the dry run: %s"
                            % (what, flag, json.dumps(plan)[:2000]))

    def test_parsers_were_read(self):
        # The two torches differ as documented: 2.6 adds dash spellings and three flags.
        dests = {name: {e["dest"] for e in flags} for name, flags in self.parsers.items()}
        self.assertGreaterEqual(len(dests["torch 1.13"]), 19)
        self.assertEqual(dests["torch 2.6"] - dests["torch 1.13"],
                         {"local_ranks_filter", "local_addr", "logs_specs"})
        self.assertIn("--nproc-per-node", [s for e in self.parsers["torch 2.6"]
                                           for s in e["strings"]])
        # The kept 2.11 list holds 2.6's flags and the later ones.
        later = {"signals_to_handle", "shutdown_timeout", "event_log_handler",
                 "virtual_local_rank", "numa_binding", "duplicate_stdout_filters",
                 "duplicate_stderr_filters"}
        self.assertEqual(dests["torch 2.11 (kept list)"], dests["torch 2.6"] | later)

    def test_every_flag_in_every_spelling_is_accepted(self):
        count = 0
        for name, flags in self.parsers.items():
            for entry in flags:
                if entry["takes_value"]:
                    self.assertIn(entry["dest"], SAMPLES,
                                  "%s has a new value flag %s: add a sample value"
                                  % (name, entry["strings"]))
                for flag in entry["strings"]:
                    with self.subTest(torch=name, flag=flag):
                        self.check_accepted(name, flag, entry)
                        count += 1
        self.assertGreaterEqual(count, 110)

    def test_argparse_abbreviations(self):
        accepted = ambiguous = 0
        # gculaunch takes the flags of every torch version at once: a prefix one parser
        # accepts may be ambiguous in another (torch 1.13's --l is --log_dir; torch 2.6 also
        # has --local-addr and --logs-specs).  gculaunch then refuses it as ambiguous too.
        ambiguous_anywhere = {p for flags in self.parsers.values() for e in flags
                              for p in e["ambiguous"]}
        for name, flags in self.parsers.items():
            seen = set()
            for entry in flags:
                # Per spelling, the shortest and the longest prefix argparse refuses.
                picked = []
                for s in entry["strings"]:
                    mine = [p for p in entry["ambiguous"] if s.startswith(p) and p not in seen]
                    if mine:
                        picked += sorted({min(mine, key=len), max(mine, key=len)})
                entry["ambiguous"] = picked
                seen.update(picked)
                # Per spelling, the shortest and the longest prefix argparse accepts (the
                # ones in between behave alike; this keeps the test fast).
                chosen = set()
                for s in entry["strings"]:
                    mine = [p for p in entry["accepted"] if s.startswith(p)]
                    if mine:
                        chosen.update({min(mine, key=len), max(mine, key=len)})
                for prefix in sorted(chosen):
                    with self.subTest(torch=name, prefix=prefix):
                        if prefix in ambiguous_anywhere:
                            out = self.dry_run(self.value_args(prefix, entry))
                            self.assertEqual(out.returncode, 2, out.stdout[-500:])
                            self.assertIn("ambiguous flag '%s'" % prefix, out.stderr)
                            self.assertIn("--" + entry["dest"].replace("_", "-"), out.stderr)
                            continue
                        self.check_accepted(name, prefix, entry)
                        accepted += 1
                for prefix in entry["ambiguous"]:
                    with self.subTest(torch=name, prefix=prefix):
                        out = self.dry_run(self.value_args(prefix, entry))
                        self.assertEqual(out.returncode, 2, out.stdout[-500:])
                        lines = out.stderr.strip().splitlines()
                        self.assertEqual(len(lines), 1, out.stderr)
                        self.assertTrue(
                            lines[0].startswith("gculaunch: ambiguous flag '%s': it could be --"
                                                % prefix), lines[0])
                        ambiguous += 1
        # --nnode, --nproc_per_nod, --node_r, ... and --master, --no, --rdzv_, ...
        self.assertGreaterEqual(accepted, 60)
        self.assertGreaterEqual(ambiguous, 15)

    def test_issue_command_lines(self):
        # The spellings from the issue, as users wrote them.
        for flags in (["--start_method", "spawn"], ["--run_path"], ["--local_addr", "127.0.0.1"],
                      ["--logs_specs", "default"], ["--nnode=1"], ["--nproc_per_nod", "2"]):
            with self.subTest(flags=flags):
                out = self.dry_run(flags)
                self.assertEqual(out.returncode, 0, out.stderr)
        out = self.dry_run(["--logs-specs", "custom_plugin"])
        self.assertEqual(out.returncode, 2)
        self.assertIn("only 'default'", out.stderr)


if __name__ == "__main__":
    unittest.main()
