"""Bad input gives one clear line and a non-zero exit: a program that cannot be started
follows the shell (127 not found, 126 found but not executable); a bad flag -> 2.  Nothing
is started in any case."""
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

    def assert_start_error(self, args, code, line, cwd=None):
        with gltest.Job(args, cwd=cwd) as job:
            self.assertEqual(job.wait(timeout=30), code, job.stderr)
            self.assertEqual(job.stderr, line + "\n")
            self.assertEqual(job.stdout, "")
            self.assertEqual(gltest.wait_no_tagged(job.tag, 5), [])

    def test_not_executable_is_126_and_not_found_is_127_as_in_the_shell(self):
        with gltest.TempDir() as tmp:
            plain = os.path.join(tmp, "plain.sh")
            with open(plain, "w") as f:
                f.write("#!/bin/sh\necho hi\n")
            os.chmod(plain, 0o644)
            self.assert_start_error(
                ["--nproc-per-node", "2", "--no-python", plain], 126,
                "gculaunch: SCRIPT '%s' is not an executable file (fix: make it executable "
                "(chmod +x), or drop --no-python to run it with Python)" % plain)
            missing = os.path.join(tmp, "missing.sh")
            self.assert_start_error(
                ["--no-python", missing], 127,
                "gculaunch: SCRIPT '%s' was not found (fix: check the path (a relative path "
                "starts in the current directory))" % missing)
            self.assert_start_error(
                ["--no-python", "gculaunch-no-such-program"], 127,
                "gculaunch: SCRIPT 'gculaunch-no-such-program' was not found on PATH (fix: give "
                "its path, e.g. ./gculaunch-no-such-program)")
            self.assert_start_error(
                ["--python", plain, "x.py"], 126,
                "gculaunch: --python '%s': not an executable file (fix: give the path of a "
                "Python interpreter)" % plain)
            self.assert_start_error(
                ["--python", missing, "x.py"], 127,
                "gculaunch: --python '%s': not found (fix: give the path of a Python "
                "interpreter)" % missing)

    def test_bad_flag_is_2(self):
        with gltest.Job(["--nproc-per-node", "two", "x.py"]) as job:
            self.assertEqual(job.wait(timeout=30), 2)
            self.assertEqual(len(job.stderr.splitlines()), 1, job.stderr)
            self.assertTrue(job.stderr.startswith("gculaunch: --nproc-per-node 'two'"),
                            job.stderr)


if __name__ == "__main__":
    unittest.main()
