"""docs/kubernetes.md's recipes use the exit classes the binary has (issue 41): the YAML blocks
parse, the Job's podFailurePolicy and the Volcano job's policies name each class code as the
README says, with the API's rules (values sorted, no 0 with In; a Volcano item holds an event
or one non-zero exit code, never both), the pod gives gculaunch its grace period plus 10 s,
and the Slurm script requeues on retry and reschedule.  The codes come from `gculaunch
--help` (the --exit-codes line; tests/launcher/frontend/packaging_test.cc holds it to the
code's table) and from README's outcome table (tests/base/outcome_test.cc)."""
import os
import re
import subprocess
import unittest

import yaml

import gltest

DOC = os.path.join(gltest.SOURCE_DIR, "docs", "kubernetes.md")
README = os.path.join(gltest.SOURCE_DIR, "README.md")


def blocks(text, lang):
    return re.findall(r"```%s\n(.*?)```" % lang, text, re.S)


def help_classes():
    """{class: code} from gculaunch --help's --exit-codes line."""
    out = subprocess.run([gltest.require_binary(), "--help"], capture_output=True, text=True,
                         timeout=30, env=gltest.tagged_env(gltest.new_tag()))
    text = " ".join(out.stdout.split())
    at = text.find("--exit-codes")
    if at < 0:
        raise AssertionError("gculaunch --help does not list --exit-codes:\n" + out.stdout[-2000:])
    found = dict((name, int(code)) for code, name in re.findall(
        r"(\d+) (success|retry|preempted|reschedule|fatal)\b", text[at:at + 600]))
    return found


def readme_classes():
    """{class: code} from README's outcome table's "classes" column."""
    with open(README) as f:
        text = f.read()
    return dict((name, int(code)) for name, code in re.findall(
        r"^\| `\w+` \| [^|]+ \| (success|retry|preempted|reschedule|fatal) (\d+) \|", text, re.M))


class KubernetesDoc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DOC) as f:
            cls.text = f.read()
        cls.codes = help_classes()

    def test_the_binary_and_readme_agree_on_the_class_codes(self):
        self.assertEqual(sorted(self.codes), sorted(["success", "retry", "preempted",
                                                     "reschedule", "fatal"]), self.codes)
        self.assertEqual(self.codes, readme_classes())
        self.assertEqual(self.codes["success"], 0)
        self.assertTrue(all(80 <= c <= 99 for n, c in self.codes.items() if n != "success"))

    def docs(self):
        return [doc for block in blocks(self.text, "yaml") for doc in yaml.safe_load_all(block)]

    def job(self):
        jobs = [d for d in self.docs() if isinstance(d, dict) and d.get("kind") == "Job"
                and d.get("apiVersion") == "batch/v1"]
        self.assertEqual(len(jobs), 1)
        return jobs[0]

    def test_the_job_spec(self):
        job = self.job()
        pod = job["spec"]["template"]["spec"]
        self.assertEqual(pod["restartPolicy"], "Never")
        (trainer,) = [c for c in pod["containers"] if c["name"] == "trainer"]
        command = trainer["command"]
        self.assertEqual(command[0], "gculaunch")
        self.assertEqual(command[command.index("--exit-codes") + 1], "classes")
        grace = float(command[command.index("--grace-period") + 1])
        self.assertGreaterEqual(pod["terminationGracePeriodSeconds"], grace + 10)

    def test_the_pod_failure_policy(self):
        rules = self.job()["spec"]["podFailurePolicy"]["rules"]
        # The first signal of a preemption: the DisruptionTarget condition, first.
        self.assertEqual(rules[0]["action"], "Ignore")
        self.assertEqual(rules[0]["onPodConditions"], [{"type": "DisruptionTarget"}])
        by_action = {}
        for rule in rules[1:]:
            on = rule["onExitCodes"]
            self.assertEqual(on["containerName"], "trainer")
            self.assertEqual(on["operator"], "In")
            values = on["values"]
            self.assertEqual(values, sorted(values))
            self.assertNotIn(0, values)
            self.assertEqual(len(values), len(set(values)))
            by_action.setdefault(rule["action"], []).extend(values)
        c = self.codes
        self.assertEqual(by_action, {"FailJob": [c["fatal"]],
                                     "Ignore": sorted([c["preempted"], c["reschedule"]]),
                                     "Count": [c["retry"]]})

    def test_the_volcano_job(self):
        (vj,) = [d for d in self.docs() if isinstance(d, dict)
                 and d.get("apiVersion", "").startswith("batch.volcano.sh/")]
        items = list(vj["spec"].get("policies", []))
        for task in vj["spec"]["tasks"]:
            items += task.get("policies", [])
            self.assertEqual(task["template"]["spec"]["restartPolicy"], "Never")
        actions = {}
        for item in items:
            has_event = "event" in item or "events" in item
            has_code = "exitCode" in item
            self.assertNotEqual(has_event, has_code, item)  # one or the other, never both
            if has_code:
                self.assertIsInstance(item["exitCode"], int)
                self.assertNotEqual(item["exitCode"], 0)
                self.assertNotIn(item["exitCode"], actions, "one item per code")
                actions[item["exitCode"]] = item["action"]
        c = self.codes
        self.assertEqual(actions, {c["retry"]: "RestartJob", c["preempted"]: "RestartJob",
                                   c["reschedule"]: "RestartJob", c["fatal"]: "AbortJob"})

    def test_the_slurm_script_requeues_on_retry_and_reschedule(self):
        (script,) = blocks(self.text, "bash")
        self.assertIn("--exit-codes classes", script)
        requeue = [l for l in script.splitlines() if 'scontrol requeue "$SLURM_JOB_ID"' in l]
        self.assertEqual(len(requeue), 1, script)
        pattern = requeue[0].split(")")[0].strip()
        self.assertEqual(sorted(int(c) for c in pattern.split("|")),
                         sorted([self.codes["retry"], self.codes["reschedule"]]))
        # bash parses it
        subprocess.run(["bash", "-n"], input=script, text=True, check=True, timeout=30)


if __name__ == "__main__":
    unittest.main()
