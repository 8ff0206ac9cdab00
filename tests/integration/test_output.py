"""Rank output comes out as whole lines prefixed "[rank<N>]: " on gculaunch's
stdout/stderr; nothing is torn, interleaved or lost; --log-dir keeps every
rank's full output in torchrun's layout; --local-ranks-filter and
--redirects only change what the console shows."""
import json
import os
import re
import subprocess
import unittest

import gltest

LINE = re.compile(r"^\[rank(\d+)\]: r(\d+) (\d+) (x*)$")


class Output(unittest.TestCase):
    def test_eight_ranks_thousand_lines_each_no_torn_or_lost_line(self):
        nproc, lines, width = 8, 1000, 200
        args = ["--nproc-per-node", str(nproc)] + gltest.child_args(
            "lines", lines, width, "r${local_rank}")
        with gltest.Job(args) as job:
            self.assertEqual(job.wait(timeout=120), 0, job.stderr)
            out = job.stdout
        self.assertTrue(out.endswith("\n"))
        seen = {r: [] for r in range(nproc)}
        for text in out.splitlines():
            m = LINE.match(text)
            self.assertIsNotNone(m, "torn or foreign line: %r" % text[:300])
            rank, tag_rank, index, payload = m.groups()
            self.assertEqual(rank, tag_rank, text[:100])
            self.assertEqual(len(payload), width, "line %s of rank %s was cut" % (index, rank))
            seen[int(rank)].append(int(index))
        for rank in range(nproc):
            self.assertEqual(seen[rank], list(range(lines)), "rank %d lost or reordered" % rank)

    def test_log_dir_layout_filter_and_redirects(self):
        with gltest.TempDir() as tmp:
            log_dir = os.path.join(tmp, "logs")
            args = ["--nproc-per-node", "3", "--log-dir", log_dir, "--run-id", "outrun",
                    "--local-ranks-filter", "0,2", "--redirects", "2:1"] + gltest.child_args(
                        "print", "out of ${local_rank}", "eprint", "err of ${local_rank}")
            with gltest.Job(args) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                # rank 1 is filtered out; rank 2's stdout is redirected to its file only
                self.assertEqual(sorted(job.stdout.splitlines()), ["[rank0]: out of 0"])
                err_lines = [l for l in job.stderr.splitlines() if l.startswith("[rank")]
                self.assertEqual(sorted(err_lines), ["[rank0]: err of 0", "[rank2]: err of 2"])
            roots = os.listdir(log_dir)
            self.assertEqual(len(roots), 1, roots)
            self.assertRegex(roots[0], r"^outrun_\w{6}$")
            for rank in range(3):
                d = os.path.join(log_dir, roots[0], "attempt_0", str(rank))
                with open(os.path.join(d, "stdout.log")) as f:
                    self.assertEqual(f.read(), "out of %d\n" % rank)
                with open(os.path.join(d, "stderr.log")) as f:
                    self.assertEqual(f.read(), "err of %d\n" % rank)

    def test_a_full_log_disk_is_counted_in_the_summary_and_the_console_keeps_everything(self):
        lines, width = 2000, 200  # about 400 KB per rank for a 64 KiB file system
        with gltest.TempDir() as tmp:
            tiny = os.path.join(tmp, "tiny")
            os.mkdir(tiny)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", tiny], check=True)
            try:
                summary = os.path.join(tmp, "summary.json")
                args = ["--nproc-per-node", "2", "--log-dir", tiny, "--summary-json",
                        summary] + gltest.child_args("lines", lines, width, "r${local_rank}")
                with gltest.Job(args) as job:
                    self.assertEqual(job.wait(timeout=120), 0, job.stderr)
            finally:
                subprocess.run(["umount", tiny], check=True)
            with open(summary) as f:
                dropped = json.load(f)["log_bytes_dropped"]
        self.assertEqual(len([l for l in job.stdout.splitlines() if LINE.match(l)]), 2 * lines)
        # Each rank wrote about 2000 x 212 bytes; at most 64 KiB of it fit.
        self.assertGreater(dropped, 2 * lines * width - 64 * 1024)
        self.assertIn("gculaunch: warning: %d bytes of rank output are missing from the log "
                      "files (their file system was full)" % dropped, job.stderr)

    def test_long_lines_are_split_with_a_marker_and_nothing_is_lost(self):
        width = 200000  # longer than gculaunch's 64 KiB console line limit
        args = ["--nproc-per-node", "1"] + gltest.child_args("lines", 1, width, "r0")
        with gltest.Job(args) as job:
            self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            pieces = job.stdout.splitlines()
        marker = " [gculaunch: line continues]"
        self.assertGreater(len(pieces), 1)
        joined = ""
        for i, piece in enumerate(pieces):
            self.assertTrue(piece.startswith("[rank0]: "), piece[:50])
            body = piece[len("[rank0]: "):]
            if i < len(pieces) - 1:
                self.assertTrue(body.endswith(marker))
                body = body[:-len(marker)]
            joined += body
        self.assertEqual(joined, "r0 0 " + "x" * width)

    def test_progress_bar_updates_show_the_latest_state(self):
        args = ["--nproc-per-node", "1"] + gltest.child_args(
            "raw", "epoch 1\\r 10%\\r 50%\\r100%\\n", "raw", "loading", "sleep", "1",
            "raw", " done\\n")
        with gltest.Job(args) as job:
            self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            # the partial "loading" is flushed when the stream goes idle
            self.assertEqual(job.stdout, "[rank0]: 100%\n[rank0]: loading\n[rank0]:  done\n")

    def test_ranks_see_only_descriptors_0_1_2(self):
        # gculaunch holds pipes, pidfds, epoll, the guardian's pipe, ...: none
        # of them may reach a rank (on either exit-detection path).
        for extra in ({}, {"GCULAUNCH_CHILD_WATCHER": "sigchld"}):
            with gltest.Job(["--nproc-per-node", "4"] + gltest.child_args("fds"),
                            extra_env=extra) as job:
                self.assertEqual(job.wait(timeout=60), 0, job.stderr)
                self.assertEqual(sorted(job.stdout.splitlines()),
                                 ["[rank%d]: fds: 0 1 2" % r for r in range(4)])

    def test_stdin_rank0_gets_gculaunch_stdin_and_the_others_dev_null(self):
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "stdin.py")
            with open(script, "w") as f:
                f.write("import sys\nprint('read %r' % sys.stdin.read())\n")
            stdin_file = os.path.join(tmp, "input")
            with open(stdin_file, "w") as f:
                f.write("hello rank 0\n")
            with open(stdin_file) as stdin:
                with gltest.Job(["--nproc-per-node", "2", "--stdin", "rank0", "--python",
                                 gltest.PYTHON, script], stdin=stdin) as job:
                    self.assertEqual(job.wait(timeout=60), 0, job.stderr)
            self.assertEqual(sorted(job.stdout.splitlines()),
                             ["[rank0]: read 'hello rank 0\\n'", "[rank1]: read ''"])

    def test_stdin_rank0_on_a_terminal_can_read_it(self):
        # gculaunch is the session leader of a pseudo-terminal; rank 0 runs in
        # its own process group and must be made the terminal's foreground
        # group, or reading would stop it with SIGTTIN (breakpoint() hangs).
        import fcntl
        import pty
        import subprocess
        import termios
        with gltest.TempDir() as tmp:
            script = os.path.join(tmp, "ask.py")
            with open(script, "w") as f:
                f.write("import os, sys\n"
                        "if os.environ['LOCAL_RANK'] == '0':\n"
                        "    print('ready', flush=True)\n"
                        "    print('got %r' % input())\n"
                        "else:\n"
                        "    print('other %r' % sys.stdin.read())\n")
            master, slave = pty.openpty()

            def own_terminal():
                os.setsid()
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)

            tag = gltest.new_tag()
            proc = subprocess.Popen(
                [gltest.require_binary(), "--master-port", "0", "--nproc-per-node", "2",
                 "--stdin", "rank0",
                 "--python", gltest.PYTHON, script],
                env=gltest.tagged_env(tag), stdin=slave, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, preexec_fn=own_terminal,
                # Unbuffered: readline() must not read ahead, because
                # communicate() below reads the raw fd and would never see
                # what a buffered reader had already taken (rank 1's line).
                bufsize=0)
            try:
                os.close(slave)
                seen = []
                while "[rank0]: ready\n" not in seen:
                    line = proc.stdout.readline().decode()
                    self.assertTrue(line, "gculaunch ended early: %r" % seen)
                    seen.append(line)
                os.write(master, b"typed at the terminal\n")
                out, err = proc.communicate(timeout=30)
                self.assertEqual(proc.returncode, 0, err.decode())
                lines = [l.rstrip("\n") for l in seen] + out.decode().splitlines()
                self.assertEqual(sorted(lines), ["[rank0]: got 'typed at the terminal'",
                                                 "[rank0]: ready", "[rank1]: other ''"])
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                gltest.wait_no_tagged(tag, 3)  # the guardian may still be cleaning up
                gltest.kill_tagged(tag)
                os.close(master)


if __name__ == "__main__":
    unittest.main()
