"""The torch-version cache directory cannot be raced by another user (issue 37, item 3).

The attack of the hostile probe of 2026-11-28 (N10), by a second uid (setpriv to nobody, no
account needed): gculaunch runs as root with XDG_CACHE_HOME naming a missing path in a sticky,
world-writable directory (as /tmp is), which the attacker keeps turning into a symlink to a
directory of its own and back.  That directory already holds 300 files with cache-entry names
(16 hex digits), some carrying gculaunch's marker.  gculaunch checked the path once and used
it by name later, so root wrote entries into the attacker's directory and pruned its files.

Now the cache is reached one held directory at a time, each checked: across many dry runs
(each runs the interpreter once and writes the cache) nothing owned by root appears in the
attacker's tree, none of its files goes, and the launches themselves all succeed.  The test
asserts that the attack really ran: the path was a symlink during some launches and root's own
directory during others.
"""
import os
import shutil
import stat
import subprocess
import time
import unittest

import gltest

NOBODY = 65534
LAUNCHES = 30

# The attacker, as nobody: flips <link> between absent and a symlink to <target> every few ms
# until <stop> appears (bounded: 120 s), and counts the flips that made the link.
FLIPPER = r"""
import os, sys, time
link, target, stop, count_file = sys.argv[1:5]
made = 0
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    try:
        os.symlink(target, link)
        made += 1
    except OSError:
        pass  # root's directory is there: it cannot be touched
    time.sleep(0.004)
    try:
        if os.path.islink(link):
            os.unlink(link)
    except OSError:
        pass
    time.sleep(0.004)
with open(count_file, "w") as f:
    f.write(str(made))
"""


def tree(root):
    """{path: (uid, size)} of every file and directory below root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out[path] = (st.st_uid, st.st_size)
    return out


class TorchCacheRace(unittest.TestCase):
    def test_a_second_user_flipping_the_cache_path_gets_nothing(self):
        self.assertEqual(os.geteuid(), 0, "the race needs root as the victim and setpriv")
        with gltest.TempDir(prefix="gltest-cacherace-") as tmp:
            os.chmod(tmp, 0o755)
            shared = os.path.join(tmp, "shared")  # like /tmp: sticky and world-writable
            os.mkdir(shared)
            os.chmod(shared, 0o1777)
            attacker = os.path.join(tmp, "attacker")
            entries = os.path.join(attacker, "gculaunch", "torch-versions")
            os.makedirs(entries)
            for i in range(300):
                with open(os.path.join(entries, "%016x" % (0xabc000 + i)), "w") as f:
                    f.write("gculaunch torch cache 2\nkey 00\nfound 0\n" if i % 2 else "mine\n")
                os.utime(os.path.join(entries, "%016x" % (0xabc000 + i)), (1000 + i, 1000 + i))
            for dirpath, dirnames, filenames in os.walk(attacker):
                for name in [dirpath] + [os.path.join(dirpath, n) for n in filenames]:
                    os.chown(name, NOBODY, NOBODY)
            before = tree(attacker)
            script = os.path.join(tmp, "x.py")
            with open(script, "w") as f:
                f.write("print('hi')\n")
            os.chmod(script, 0o644)

            link = os.path.join(shared, "cache")
            stop = os.path.join(tmp, "stop")
            count_file = os.path.join(shared, "flips")
            flipper = subprocess.Popen(
                ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                 gltest.PYTHON, "-c", FLIPPER, link, attacker, stop, count_file])
            codes, made_by_root = [], 0
            try:
                for _ in range(LAUNCHES):
                    done = gltest.run([gltest.require_binary(), "--dry-run", "--device", "cpu",
                                       "--python", gltest.PYTHON, script],
                                      gltest.tagged_env(gltest.new_tag(),
                                                        {"XDG_CACHE_HOME": link}), timeout=60)
                    codes.append(done.returncode)
                    # root's own directory: the attacker cannot replace it; the next launch
                    # must race again.
                    # One lstat: isdir() then islink() raced with the flipper (a link seen by
                    # the first call was gone by the second, and rmtree found nothing).
                    try:
                        is_roots_dir = stat.S_ISDIR(os.lstat(link).st_mode)
                    except FileNotFoundError:
                        is_roots_dir = False
                    if is_roots_dir:
                        made_by_root += 1
                        shutil.rmtree(link)
            finally:
                open(stop, "w").close()
                flipper.wait(timeout=130)
            with open(count_file) as f:
                flips = int(f.read())

            self.assertEqual(codes, [0] * LAUNCHES)
            after = tree(attacker)
            planted = sorted(p for p, (uid, _) in after.items() if uid != NOBODY)
            self.assertEqual(planted, [], "root wrote into the attacker's directory")
            self.assertEqual(sorted(set(before) - set(after)), [],
                             "files of the attacker's were removed")
            self.assertEqual(after, before)
            # The attack ran: links were made, and root's cache was made in between.
            self.assertGreater(flips, LAUNCHES)
            self.assertGreater(made_by_root, 0)


if __name__ == "__main__":
    unittest.main()
