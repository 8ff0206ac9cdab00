"""A rank's error file is read once, when the rank exits, and only when it is a regular file of
the job's user of at most 1 MiB, opened without following a link and without blocking (issue
37, item 1; docs/security.md, "Files a rank can name or create").

Rank 1 turns its TORCHELASTIC_ERROR_FILE into something hostile and exits 3; rank 0 waits to
be stopped.  In every case gculaunch says once which file it did not use and why, exits with
the rank's own code, and its exit summary, --summary-json, its own TORCHELASTIC_ERROR_FILE
and the --log-dir copy use the rank's stderr instead of the file.  The 60 s bound on each run
only guards against the hang the old code had (a FIFO blocked it in open() for good, a link
to /dev/zero grew it without end); it is not a timing assertion.
"""
import json
import os
import time
import unittest

import gltest

NOBODY = 65534
SETPRIV = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]

# $1: what rank 1 leaves at its error file; $2: a file that the mode uses.
RANK = r"""#!/bin/sh
if [ "$LOCAL_RANK" = 0 ]; then exec sleep 60; fi
f=$TORCHELASTIC_ERROR_FILE
case "$1" in
  fifo) mkfifo "$f" ;;
  devzero) ln -s /dev/zero "$f" ;;
  link) ln -s "$2" "$f" ;;
  dir) mkdir "$f" ;;
  huge) # 300 MB: the start and end of an error file around a hole (sparse, so that writing
        # it costs the rank nothing on a loaded machine; gculaunch must read no more of it)
        /usr/bin/python3 -c 'import sys; f = open(sys.argv[1], "w"); f.write("{\"message\": {\"message\": \"")
f.seek(300 << 20); f.write("\"}}")' "$f" ;;
  chown) cp "$2" "$f"; chown 65534:65534 "$f" ;;
  hardlink) ln "$2" "$f" ;;
  plain) cp "$2" "$f" ;;
esac
echo "rank 1 left its error file as $1" >&2
exit 3
"""

# A valid error file (torch's @record form) whose message must never reach the summary when
# the file comes through a link or from another owner.
def planted_error(message):
    return json.dumps({"message": {"message": message,
                                   "extraInfo": {"py_callstack": "Traceback: " + message,
                                                 "timestamp": "1700000000"}}})


class ErrorFiles(unittest.TestCase):
    def launch(self, tmp, mode, planted="", prefix=None):
        """Runs the job; returns (exit code, stderr, summary json, parent error file, copies)."""
        rank = gltest.write_script(tmp, "rank.sh", RANK)
        logs = os.path.join(tmp, "logs")
        summary = os.path.join(tmp, "summary.json")
        parent = os.path.join(tmp, "parent_error.json")
        args = ["--nproc-per-node", "2", "--standalone", "--grace-period", "3",
                "--log-dir", logs, "--summary-json", summary, "--no-python", rank, mode, planted]
        started = time.monotonic()
        with gltest.Job(args, extra_env={"TORCHELASTIC_ERROR_FILE": parent},
                        prefix=prefix, cwd=tmp) as job:
            code = job.wait(timeout=60)  # hang guard only
            err = job.stderr
        gltest.eprint("error file as %s: gculaunch exited %d after %.1f s"
                      % (mode, code, time.monotonic() - started))
        with open(summary, encoding="utf-8") as f:
            doc = json.load(f)
        with open(parent, encoding="utf-8") as f:
            parent_doc = json.load(f)
        copies = []
        for root, _, files in os.walk(logs):
            copies += [os.path.join(root, n) for n in files if n.startswith("error")]
        return code, err, doc, parent_doc, copies

    def check_refused(self, tmp, mode, why, planted="", secret=None, prefix=None):
        code, err, doc, parent, copies = self.launch(tmp, mode, planted, prefix)
        self.assertEqual(code, 3, err)
        notes = [line for line in err.splitlines() if "rank 1's error file is not used" in line]
        self.assertEqual(len(notes), 1, err)
        self.assertRegex(notes[0], r"^gculaunch: warning: rank 1's error file is not used: '/.*"
                                   r"/attempt_0/1/error\.json' " + why + r"; the exit summary "
                                   r"shows the rank's stderr instead$")
        # The summary names rank 1 and shows its stderr, not the file.
        self.assertIn("rank 1 failed (local rank 1", err)
        self.assertIn("gculaunch:   | rank 1 left its error file as " + mode, err)
        self.assertNotIn("error file /", err)
        root = doc["root_cause"]
        self.assertEqual(doc["exit_code"], 3)
        self.assertEqual(root["rank"], 1)
        self.assertIsNone(root["error_file"], doc)
        self.assertEqual(root["message"], "rank 1 left its error file as " + mode)
        self.assertEqual(parent["message"]["errorCode"], 3)
        self.assertEqual(parent["message"]["message"], "rank 1 left its error file as " + mode)
        self.assertEqual(copies, [], "an error file was copied into --log-dir")
        if secret:
            for text in (err, json.dumps(doc), json.dumps(parent)):
                self.assertNotIn(secret, text)

    def test_a_fifo_is_refused_without_blocking(self):
        with gltest.TempDir() as tmp:
            self.check_refused(tmp, "fifo", r"is a FIFO, not a regular file")

    def test_a_link_to_dev_zero_is_not_followed(self):
        with gltest.TempDir() as tmp:
            self.check_refused(tmp, "devzero",
                               r"is a symbolic link \(gculaunch does not follow one there\)")

    def test_a_link_to_a_readable_file_is_not_followed(self):
        # The link itself is refused, even though the job's user may read what it names.
        with gltest.TempDir() as tmp:
            target = os.path.join(tmp, "readable.json")
            with open(target, "w", encoding="utf-8") as f:
                f.write(planted_error("LINKED-FILE-CONTENT"))
            self.check_refused(tmp, "link",
                               r"is a symbolic link \(gculaunch does not follow one there\)",
                               planted=target, secret="LINKED-FILE-CONTENT")

    def test_a_directory_is_refused(self):
        with gltest.TempDir() as tmp:
            self.check_refused(tmp, "dir", r"is a directory, not a regular file")

    def test_a_300_mb_file_is_read_no_further_than_1_mib(self):
        with gltest.TempDir() as tmp:
            self.check_refused(tmp, "huge", r"is larger than 1 MiB, the most gculaunch reads of "
                                            r"an error file \(it read no further\)")

    def test_a_file_of_another_owner_is_refused(self):
        self.assertEqual(os.geteuid(), 0, "this test chowns a file to uid 65534: run it as root")
        with gltest.TempDir() as tmp:
            source = os.path.join(tmp, "source.json")
            with open(source, "w", encoding="utf-8") as f:
                f.write(planted_error("FOREIGN-OWNER-CONTENT"))
            self.check_refused(tmp, "chown", r"is owned by uid 65534, not by the job's user "
                                             r"\(uid 0\)",
                               planted=source, secret="FOREIGN-OWNER-CONTENT")

    def test_a_hard_link_to_roots_file_is_refused_for_another_user(self):
        # gculaunch and its ranks run as uid 65534 (setpriv); rank 1 hard-links a file of
        # root's that uid 65534 may read and write (fs.protected_hardlinks allows that) into
        # its error file's place: gculaunch must not take root's file as the rank's.
        self.assertEqual(os.geteuid(), 0, "this test runs gculaunch as uid 65534: run it as root")
        with gltest.TempDir() as tmp:
            os.chmod(tmp, 0o755)
            work = os.path.join(tmp, "work")
            os.mkdir(work)
            os.chown(work, NOBODY, NOBODY)
            source = os.path.join(tmp, "roots.json")
            with open(source, "w", encoding="utf-8") as f:
                f.write(planted_error("ROOTS-FILE-CONTENT"))
            os.chmod(source, 0o666)
            # The job's private directory must be on the file system of `source` (a hard
            # link cannot cross file systems): gculaunch makes it in $TMPDIR.
            self.assertEqual(os.stat(source).st_dev, os.stat(work).st_dev)
            env_prefix = SETPRIV + ["env", "TMPDIR=" + work, "HOME=" + work,
                                    "XDG_CACHE_HOME=" + work]
            self.check_refused(work, "hardlink", r"is owned by uid 0, not by the job's user "
                                                 r"\(uid 65534\)",
                               planted=source, secret="ROOTS-FILE-CONTENT", prefix=env_prefix)

    def test_a_plain_error_file_is_still_used_everywhere(self):
        # The control: the rank's own regular file is read once, named and copied.
        with gltest.TempDir() as tmp:
            source = os.path.join(tmp, "source.json")
            with open(source, "w", encoding="utf-8") as f:
                f.write(planted_error("ValueError: the rank's own error"))
            code, err, doc, parent, copies = self.launch(tmp, "plain", source)
            self.assertEqual(code, 3, err)
            self.assertNotIn("error file is not used", err)
            self.assertRegex(err, r"gculaunch: error file /\S+/attempt_0/1/error\.json: "
                                  r"ValueError: the rank's own error")
            self.assertEqual(doc["root_cause"]["message"], "ValueError: the rank's own error")
            self.assertTrue(doc["root_cause"]["error_file"].endswith("/attempt_0/1/error.json"))
            self.assertEqual(parent["message"]["message"], "ValueError: the rank's own error")
            self.assertEqual(len(copies), 1, copies)
            with open(copies[0], encoding="utf-8") as f:
                self.assertEqual(json.load(f)["message"]["message"],
                                 "ValueError: the rank's own error")


if __name__ == "__main__":
    unittest.main()
