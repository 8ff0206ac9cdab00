"""checks.tidy's cache (tests/checks/tidy_cache.py, issue 42): in the user's cache directory,
with keys that hold across clones of the same sources, and trusted only as gculaunch's own
torch-version cache is: a directory another user owns or may write is refused with one line, and
a record that is a link, another user's or writable by others is ignored.  No clang-tidy run:
the Cache is driven with made-up compile commands and dependency lists.
"""
import contextlib
import io
import os
import shutil
import sys
import types
import unittest

import gltest

sys.path.insert(0, os.path.join(gltest.SOURCE_DIR, "tests", "checks"))
import tidy_cache  # noqa: E402

NOBODY = 65534


class TidyCache(unittest.TestCase):
    def setUp(self):
        self.tmp = gltest.TempDir(prefix="gltest-tidy-cache-")
        self.work = self.tmp.__enter__()
        self.addCleanup(self.tmp.__exit__, None, None, None)
        os.chmod(self.work, 0o700)

    def clone(self, name):
        """A small source tree <work>/<name> with a build directory inside it."""
        src = os.path.join(self.work, name)
        os.makedirs(os.path.join(src, "base"))
        os.makedirs(os.path.join(src, "build"))
        for path, text in (("base/x.cc", '#include "base/x.h"\n'), ("base/x.h", "int x;\n")):
            with open(os.path.join(src, path), "w") as f:
                f.write(text)
        return src

    def cache(self, src, directory):
        places = tidy_cache.Places(src, os.path.join(src, "build"))
        tree = tidy_cache.source_tree_listing(src, os.path.join(src, "build"), places)
        return tidy_cache.Cache(directory, "config", tree, tidy_cache.FileHashes(), places,
                                os.geteuid())

    @staticmethod
    def entry(src):
        build = os.path.join(src, "build")
        return {"directory": build, "file": os.path.join(src, "base", "x.cc"),
                "arguments": ["ccache", "/usr/bin/c++", "-I" + src, "-o", "x.o", "-c",
                              os.path.join(src, "base", "x.cc")]}

    def deps(self, cache, src):
        return [cache.places.portable(os.path.join(src, p)) for p in ("base/x.cc", "base/x.h")]

    def records(self, directory):
        return [os.path.join(root, f) for root, _, files in os.walk(directory) for f in files]

    # ------------------------------------------------------------------ where

    def test_directory_follows_xdg_cache_home_then_home(self):
        where = tidy_cache.cache_directory
        self.assertEqual(where({"XDG_CACHE_HOME": "/c", "HOME": "/h"}), "/c/gculaunch/tidy")
        self.assertEqual(where({"XDG_CACHE_HOME": "rel", "HOME": "/h"}),
                         "/h/.cache/gculaunch/tidy")
        self.assertIsNone(where({"XDG_CACHE_HOME": "rel", "HOME": ""}))

    def test_a_record_from_one_clone_is_known_in_another(self):
        directory = os.path.join(self.work, "cache")
        first = self.clone("first")
        cache = self.cache(first, directory)
        cache.record(self.entry(first), self.deps(cache, first))
        self.assertEqual(len(self.records(directory)), 1)
        second = self.clone("second")
        other = self.cache(second, directory)
        self.assertTrue(other.known_without_preprocessor(self.entry(second)))
        # The same clone with a changed header is not.
        with open(os.path.join(second, "base", "x.h"), "a") as f:
            f.write("int y;\n")
        self.assertFalse(self.cache(second, directory).known_without_preprocessor(
            self.entry(second)))

    def test_records_are_private_and_untrusted_ones_are_ignored(self):
        directory = os.path.join(self.work, "cache")
        src = self.clone("src")
        cache = self.cache(src, directory)
        cache.record(self.entry(src), self.deps(cache, src))
        (record,) = self.records(directory)
        self.assertEqual(os.stat(record).st_mode & 0o777, 0o600)
        self.assertEqual(os.stat(os.path.dirname(record)).st_mode & 0o777, 0o700)
        self.assertTrue(cache.known_without_preprocessor(self.entry(src)))
        os.chmod(record, 0o620)
        self.assertFalse(cache.known_without_preprocessor(self.entry(src)))
        os.chmod(record, 0o600)
        os.chown(record, NOBODY, -1)
        self.assertFalse(cache.known_without_preprocessor(self.entry(src)))
        os.chown(record, os.geteuid(), -1)
        moved = os.path.join(self.work, "elsewhere.json")
        shutil.move(record, moved)
        os.symlink(moved, record)
        self.assertFalse(cache.known_without_preprocessor(self.entry(src)))

    def test_old_entries_are_pruned(self):
        directory = os.path.join(self.work, "cache")
        src = self.clone("src")
        cache = self.cache(src, directory)
        cache.record(self.entry(src), self.deps(cache, src))
        (record,) = self.records(directory)
        cache.prune()
        self.assertEqual(self.records(directory), [record])
        old = os.path.getmtime(record) - (tidy_cache.KEEP_DAYS + 1) * 86400
        os.utime(record, (old, old))
        cache.prune()
        self.assertEqual(os.listdir(directory), [])

    # ------------------------------------------------------------------ trust

    def open_cache(self, xdg):
        opts = types.SimpleNamespace(src=self.clone("src-%d" % len(os.listdir(self.work))),
                                     extra_arg=[])
        opts.build = os.path.join(opts.src, "build")
        err = io.StringIO()
        saved = os.environ.get("XDG_CACHE_HOME")
        os.environ["XDG_CACHE_HOME"] = xdg
        try:
            with contextlib.redirect_stderr(err):
                cache = tidy_cache.open_cache(opts)
        finally:
            if saved is None:
                del os.environ["XDG_CACHE_HOME"]
            else:
                os.environ["XDG_CACHE_HOME"] = saved
        return cache, err.getvalue()

    def test_a_private_directory_is_made_and_used(self):
        xdg = os.path.join(self.work, "xdg")
        cache, err = self.open_cache(xdg)
        self.assertIsNotNone(cache, err)
        self.assertEqual(err, "")
        for path in (xdg, os.path.join(xdg, "gculaunch"), os.path.join(xdg, "gculaunch", "tidy")):
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o700, path)
        # A sticky directory writable by all (as /tmp) is fine above it.
        sticky = os.path.join(self.work, "sticky")
        os.mkdir(sticky)
        os.chmod(sticky, 0o1777)
        self.assertIsNotNone(self.open_cache(os.path.join(sticky, "xdg"))[0])

    def check_refused(self, xdg, why):
        cache, err = self.open_cache(xdg)
        self.assertIsNone(cache)
        self.assertRegex(err, r"^tidy: not using the cache %s: %s .*\(fix: .*\); checking every "
                         r"source\n$" % (os.path.join(xdg, "gculaunch", "tidy"), why))

    def test_a_directory_others_may_change_is_refused(self):
        shared = os.path.join(self.work, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        self.check_refused(os.path.join(shared, "xdg"),
                           r"\S+/shared is writable by other users and not sticky \(mode 0777\)")
        self.assertFalse(os.path.exists(os.path.join(shared, "xdg")))
        foreign = os.path.join(self.work, "foreign")
        os.mkdir(foreign)
        os.chown(foreign, NOBODY, -1)
        self.check_refused(foreign, r"\S+/foreign is owned by another user \(uid %d\)" % NOBODY)
        # Through a link: the directory it leads to counts.
        link = os.path.join(self.work, "link")
        os.symlink(shared, link)
        self.check_refused(link, r"\S+/shared is writable by other users and not sticky")


if __name__ == "__main__":
    unittest.main()
