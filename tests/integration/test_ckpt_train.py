"""examples/ckpt_train.py under gculaunch on one node, with real gloo ranks: an undisturbed run
reaches exactly the state the example's math predicts (simulate(), one process, no torch); a
run whose rank fails once after a checkpoint restarts (--max-restarts 1), resumes from that
checkpoint and reaches the same state, and its journal shows no step lost and none repeated
except those after the checkpoint; a run resumed with another world size reaches the same
state; and the same restart with torch 2.6 ranks."""
import json
import os
import shutil
import unittest

import gltest

STEPS = 20
EVERY = 5


class CkptTrain(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.example = gltest.ckpt_example()
        cls.states = cls.example.simulate(STEPS)

    def setUp(self):
        gltest.require_binary()
        self.tmp = gltest.TempDir(prefix="gltest-ckpt-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        self.ckpt = os.path.join(self.work, "ckpt")
        self.journal = os.path.join(self.work, "journal")
        self.result = os.path.join(self.work, "result.json")

    def run_job(self, nproc, steps=STEPS, extra_args=(), example_args=(), python=gltest.PYTHON,
                example=gltest.CKPT_EXAMPLE, extra_env=None, timeout=240):
        args = (["--standalone", "--nproc-per-node", str(nproc), "--device", "cpu",
                 "--grace-period", "5"] + list(extra_args)
                + ["--python", python, example, self.ckpt, "--steps", str(steps),
                   "--ckpt-every", str(EVERY), "--journal", self.journal,
                   "--result", self.result] + list(example_args))
        with gltest.Job(args, extra_env=extra_env) as job:
            code = job.wait(timeout=timeout)
            self.assertEqual(gltest.wait_no_tagged(job.tag, 10), [], "tagged processes survived")
            return code, job.stdout, job.stderr

    def result_state(self):
        with open(self.result) as f:
            return json.load(f)["state"]

    def steps_of(self, rank, attempt):
        return [r["step"] for r in gltest.read_ckpt_journal(self.journal)[rank]
                if r["attempt"] == attempt]

    def check_fail_once(self, code, out, err):
        self.assertEqual(code, 0, out + err)
        self.assertIn("[rank1]: rank 1: failing on purpose after step 12 (attempt 0)", out)
        self.assertEqual(self.result_state(), self.states[-1])
        self.assertEqual(gltest.ckpt_journal_problems(self.journal, STEPS, EVERY, 2), [])
        self.assertEqual(gltest.ckpt_attempts(self.journal), {0: [0, 1], 1: [0, 1]})
        # Rank 1 stopped right after step 12; every rank resumed after the checkpoint of
        # step 10, so only steps 11 and 12 ran twice.
        self.assertEqual(self.steps_of(1, 0), list(range(1, 13)))
        for rank in range(2):
            self.assertEqual(self.steps_of(rank, 1), list(range(11, STEPS + 1)))
            self.assertIn("[rank%d]: rank %d/2 attempt 1: resuming at step 10 of %d (value %d)"
                          % (rank, rank, STEPS, self.example.value_of(self.states[10])), out)

    def test_undisturbed_run_reaches_the_predicted_state(self):
        code, out, err = self.run_job(2)
        self.assertEqual(code, 0, out + err)
        self.assertEqual(self.result_state(), self.states[-1])
        self.assertEqual(gltest.ckpt_journal_problems(self.journal, STEPS, EVERY, 2), [])
        self.assertEqual(gltest.ckpt_attempts(self.journal), {0: [0], 1: [0]})
        self.assertIn("[rank0]: rank 0: done, %d steps, final value %d"
                      % (STEPS, self.example.value_of(self.states[-1])), out)
        with open(os.path.join(self.ckpt, "checkpoint.json")) as f:
            self.assertEqual(json.load(f), {"step": STEPS, "state": self.states[-1]})
        self.assertEqual(os.listdir(self.ckpt), ["checkpoint.json"])  # no temporary left

    def test_rank_fails_once_and_the_job_resumes_from_the_checkpoint(self):
        self.check_fail_once(*self.run_job(
            2, extra_args=["--max-restarts", "1"],
            example_args=["--fail-rank", "1", "--fail-step", "12", "--step-time", "0.05"]))

    def test_resume_with_another_world_size(self):
        # 3 ranks do steps 1-10 (the run ends with the checkpoint of step 10), then 2 ranks
        # resume from it and do 11-20: the state does not depend on the world size.
        code, out, err = self.run_job(3, steps=10)
        self.assertEqual(code, 0, out + err)
        self.assertEqual(self.result_state(), self.states[10])
        code, out, err = self.run_job(2)
        self.assertEqual(code, 0, out + err)
        self.assertIn("[rank1]: rank 1/2 attempt 0: resuming at step 10 of %d" % STEPS, out)
        self.assertEqual(self.result_state(), self.states[-1])
        journal = gltest.read_ckpt_journal(self.journal)
        self.assertEqual([(r["step"], r["world"]) for r in journal[0]],
                         [(s, 3) for s in range(1, 11)] + [(s, 2) for s in range(11, 21)])
        self.assertEqual([r["step"] for r in journal[2]], list(range(1, 11)))

    def test_torch26_rank_fails_once(self):
        # in_root.sh shows the host's /tmp inside the root: the example is copied there.
        python = gltest.interpreter_file(self.work, gltest.torch2_python())
        example = shutil.copy(gltest.CKPT_EXAMPLE, self.work)
        # Debian's 2.6 has no libuv: the test-only sitecustomize (see gltest) lets its env://
        # client TCPStore use gculaunch's agent store.
        gltest.write_no_libuv_sitecustomize(self.work)
        self.check_fail_once(*self.run_job(
            2, extra_args=["--max-restarts", "1"], python=python, example=example,
            example_args=["--fail-rank", "1", "--fail-step", "12", "--step-time", "0.05"],
            extra_env={"PYTHONPATH": self.work, "GLTEST_TCPSTORE_NO_LIBUV": "1"}))


if __name__ == "__main__":
    unittest.main()
