"""A rank that dies of ModuleNotFoundError: the exit summary names the interpreter that ran
it and how it was chosen (python3 on PATH, --python, PYTHON_EXEC), with the fix (issue 11
item 11)."""
import os
import shutil
import unittest

import gltest

SCRIPT = "import some_module_that_does_not_exist_xyz\n"
MODULE = "some_module_that_does_not_exist_xyz"


class MissingModule(unittest.TestCase):
    def run_job(self, args, extra_env=None):
        with gltest.Job(["--standalone", "--nproc-per-node", "2", "--device", "cpu"] + args,
                        extra_env=extra_env) as job:
            self.assertEqual(job.wait(timeout=60), 1, job.stderr)
            self.assertIn("ModuleNotFoundError: No module named '%s'" % MODULE, job.stderr)
            return job.stderr

    def test_the_summary_names_the_interpreter_and_its_origin(self):
        on_path = shutil.which("python3", path=gltest.tagged_env("x")["PATH"])
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "imports.py")
            with open(script, "w") as f:
                f.write(SCRIPT)
            err = self.run_job([script])
            self.assertIn(" found no module named '%s': it ran %s (the "
                          "python3 found on PATH); install it for that interpreter, or pass "
                          "--python PATH (or set PYTHON_EXEC)" % (MODULE, on_path), err)
            err = self.run_job([script], extra_env={"PYTHON_EXEC": gltest.PYTHON})
            self.assertIn("it ran %s (chosen by PYTHON_EXEC); install it for that interpreter, "
                          "or point PYTHON_EXEC (or --python) at one that has it"
                          % gltest.PYTHON, err)
            err = self.run_job(["--python", gltest.PYTHON, script])
            self.assertIn("it ran %s (chosen by --python); install it for that interpreter, or "
                          "give --python an interpreter that has it" % gltest.PYTHON, err)


if __name__ == "__main__":
    unittest.main()
