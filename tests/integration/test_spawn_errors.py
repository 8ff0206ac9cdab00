"""Bad input gives one clear line and a non-zero exit: a script that does
not exist -> 127; a bad flag -> 2.  Nothing is started in either case."""
import os
import unittest

import gltest


class SpawnErrors(unittest.TestCase):
    def test_missing_script_is_127_with_one_clear_line(self):
        with gltest.TempDir() as tmp:
            with gltest.Job(["--nproc-per-node", "2", "--python", gltest.PYTHON,
                             "no_such_script.py"], cwd=tmp) as job:
                self.assertEqual(job.wait(timeout=30), 127)
                self.assertEqual(job.stderr,
                                 "gculaunch: SCRIPT 'no_such_script.py' was not found (fix: check "
                                 "the path (a relative path starts in the current directory))\n")
                self.assertEqual(job.stdout, "")
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_program_that_fails_to_exec_is_127(self):
        # Executable bit set, but the #! interpreter does not exist: exec fails.
        with gltest.TempDir() as tmp:
            prog = os.path.join(tmp, "prog")
            with open(prog, "w") as f:
                f.write("#!/nonexistent/interpreter\n")
            os.chmod(prog, 0o755)
            with gltest.Job(["--nproc-per-node", "2", "--no-python", prog]) as job:
                self.assertEqual(job.wait(timeout=30), 127, job.stderr)
                self.assertIn("could not be started: cannot start '%s': No such file or "
                              "directory" % prog, job.stderr)
                self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_bad_flag_is_2(self):
        with gltest.Job(["--nproc-per-node", "two", "x.py"]) as job:
            self.assertEqual(job.wait(timeout=30), 2)
            self.assertEqual(len(job.stderr.splitlines()), 1, job.stderr)
            self.assertTrue(job.stderr.startswith("gculaunch: --nproc-per-node 'two'"),
                            job.stderr)


if __name__ == "__main__":
    unittest.main()
