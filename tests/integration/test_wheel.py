"""The wheel (issue 42): scripts/build_wheel.sh packs the built executable into
gculaunch-<version>-py3-none-manylinux1_x86_64.whl, which the host's pip installs offline.

Checked here: the name, version and size; the rules by which pip 9 (Ubuntu 18.04, the oldest pip
the docs promise) accepts it, written out as pip 9 applies them (its file-name pattern, the tags
it supports on CPython 3.6 x86-64 with glibc >= 2.5, Wheel-Version 1.x, and the zip mode that
makes it mark the script executable); every RECORD hash; the executable inside stripped, with
the build's build id, and the debug file beside the wheel matching it; an install into a venv
and one with --target, each running a 2-rank gloo all-reduce through the installed `gculaunch`
and through `python -m gculaunch`; pip uninstall leaving the venv as it was; the unpacked wheel's
executable running a 2-rank --no-python job in the Debian bullseye root (glibc 2.31, no pip, no
torch); and build_wheel.sh refusing what it must not pack, each with a one-line error.
"""
import base64
import csv
import hashlib
import io
import os
import re
import stat
import subprocess
import sys
import unittest
import zipfile

import gltest

BUILD_WHEEL = os.path.join(gltest.SOURCE_DIR, "scripts", "build_wheel.sh")
ALLREDUCE = os.path.join(gltest.SOURCE_DIR, "examples", "allreduce.py")
TAG = "py3-none-manylinux1_x86_64"
MAX_BYTES = 6 * 1000 * 1000
# pip 9.0.3's wheel file-name pattern (pip/wheel.py, wheel_file_re).
PIP9_WHEEL_NAME = re.compile(
    r"""^(?P<namever>(?P<name>.+?)-(?P<ver>\d.*?))
    ((-(?P<build>\d.*?))?-(?P<pyver>.+?)-(?P<abi>.+?)-(?P<plat>.+?)
    \.whl|\.dist-info)$""", re.VERBOSE)


def pip9_supported_tags():
    """The (python, abi, platform) tags pip 9.0.3 accepts on CPython 3.6 x86-64 Linux with glibc
    >= 2.5 (pep425tags.get_supported): manylinux1 joins linux_x86_64 there, and "py3-none-<arch>"
    is its entry for binaries that use no Python API."""
    versions = ["36", "35", "34", "33", "32", "31", "30"]
    arches = ["linux_x86_64", "manylinux1_x86_64"]
    tags = [("cp36", abi, arch) for abi in ("cp36m", "abi3", "none") for arch in arches]
    tags += [("py3", "none", arch) for arch in arches]
    tags += [("cp36", "none", "any"), ("cp3", "none", "any")]
    tags += [("py" + v, "none", "any") for v in versions] + [("py3", "none", "any")]
    return set(tags)


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def readelf(*args):
    return subprocess.run(["readelf", "-W"] + list(args), check=True, capture_output=True,
                          text=True).stdout


def build_id(path):
    found = re.search(r"Build ID: ([0-9a-f]+)", readelf("-n", path))
    return found.group(1) if found else None


def section_names(path):
    return set(re.findall(r"^\s*\[\s*\d+\]\s+(\S+)", readelf("-S", path), re.M))


def unpack(wheel, directory):
    """Unpacks like pip: a member whose zip mode is executable becomes executable."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            path = z.extract(info, directory)
            mode = info.external_attr >> 16
            if stat.S_ISREG(mode) and mode & 0o111:
                os.chmod(path, 0o755)


def tree(directory):
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, dirs, files in os.walk(directory) for name in dirs + files)


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        gltest.require_binary()
        cls.tmp = gltest.TempDir(prefix="gltest-wheel-")
        cls.work = cls.tmp.__enter__()
        os.chmod(cls.work, 0o755)
        cls.version = subprocess.run([gltest.BIN, "--version"], capture_output=True, text=True,
                                     check=True).stdout.split()[1]
        cls.dist = os.path.join(cls.work, "dist")
        cls.built = subprocess.run([BUILD_WHEEL, "--binary", gltest.BIN, "--out", cls.dist],
                                   capture_output=True, text=True, timeout=300)
        cls.wheel = os.path.join(cls.dist, "gculaunch-%s-%s.whl" % (cls.version, TAG))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def setUp(self):
        self.assertEqual(self.built.returncode, 0, self.built.stdout + self.built.stderr)
        self.assertTrue(os.path.isfile(self.wheel), os.listdir(self.dist))
        self.tag = gltest.new_tag()
        self.addCleanup(gltest.kill_tagged, self.tag)

    def members(self):
        with zipfile.ZipFile(self.wheel) as z:
            return {i.filename: (i, z.read(i)) for i in z.infolist()}

    def script_name(self):
        return "gculaunch-%s.data/scripts/gculaunch" % self.version

    def run_job(self, command, python, timeout=240):
        """A 2-rank gloo all-reduce through `command` (the installed gculaunch, or python -m
        gculaunch), the ranks on `python`; asserts both ranks summed right."""
        env = gltest.tagged_env(self.tag)
        args = gltest.hermetic_args(["--standalone", "--nproc-per-node", "2", "--device", "cpu",
                                     "--python", python, ALLREDUCE], env)
        done = subprocess.run(command + args, env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=self.work)
        self.assertEqual(done.returncode, 0, "%s\n%s" % (done.stdout, done.stderr[-3000:]))
        for rank in (0, 1):
            self.assertRegex(done.stdout, r"rank %d/2 .*all_reduce sum 3 \(expected 3\) ok" % rank)
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "a rank survived")

    # ---------------------------------------------------------------- the file

    def test_a_name_version_and_size(self):
        self.assertRegex(self.built.stdout, r"wheel: .*%s" % re.escape(os.path.basename(self.wheel)))
        size = os.path.getsize(self.wheel)
        self.assertLessEqual(size, MAX_BYTES, "the wheel has %d bytes" % size)
        metadata = self.members()["gculaunch-%s.dist-info/METADATA" % self.version][1].decode()
        self.assertIn("\nName: gculaunch\n", metadata)
        self.assertIn("\nVersion: %s\n" % self.version, metadata)

    def test_b_pip9_accepts_it_by_its_rules(self):
        name = PIP9_WHEEL_NAME.match(os.path.basename(self.wheel))
        self.assertIsNotNone(name)
        self.assertEqual((name.group("name"), name.group("ver")), ("gculaunch", self.version))
        tags = {(py, abi, plat) for py in name.group("pyver").split(".")
                for abi in name.group("abi").split(".") for plat in name.group("plat").split(".")}
        self.assertTrue(tags & pip9_supported_tags(), tags)
        members = self.members()
        wheel = members["gculaunch-%s.dist-info/WHEEL" % self.version][1].decode()
        self.assertRegex(wheel, r"(?m)^Wheel-Version: 1\.\d+$")  # pip 9 refuses 2.x
        self.assertIn("\nRoot-Is-Purelib: false\n", wheel)
        self.assertEqual(re.findall(r"(?m)^Tag: (\S+)$", wheel), [TAG])
        info = members[self.script_name()][0]
        mode = info.external_attr >> 16
        # pip 9 (utils.unzip_file) makes a file executable only for a regular-file mode with an
        # execute bit; then (wheel.move_wheel_files) the installed script keeps it.
        self.assertEqual(info.create_system, 3, "zip entry not from Unix")
        self.assertTrue(stat.S_ISREG(mode), oct(mode))
        self.assertEqual(mode & 0o777, 0o755, oct(mode))
        self.assertFalse(members[self.script_name()][1].startswith(b"#!python"))

    def test_c_record_lists_every_file_with_its_hash(self):
        members = self.members()
        record_name = "gculaunch-%s.dist-info/RECORD" % self.version
        rows = list(csv.reader(io.StringIO(members[record_name][1].decode())))
        self.assertEqual(sorted(r[0] for r in rows), sorted(members))
        for path, digest, size in rows:
            if path == record_name:
                self.assertEqual((digest, size), ("", ""))
                continue
            data = members[path][1]
            self.assertEqual(digest, record_hash(data), path)
            self.assertEqual(int(size), len(data), path)

    def test_d_stripped_executable_and_its_debug_file(self):
        with zipfile.ZipFile(self.wheel) as z:
            z.extract(self.script_name(), self.work)
        packed = os.path.join(self.work, self.script_name())
        names = section_names(packed)
        self.assertNotIn(".symtab", names)
        self.assertEqual([n for n in names if n.startswith(".debug_")], [])
        self.assertIn(".gnu_debuglink", names)
        wanted = build_id(gltest.BIN)
        self.assertIsNotNone(wanted, "the build's gculaunch has no build id")
        self.assertEqual(build_id(packed), wanted)
        debug = os.path.join(self.dist, "gculaunch-%s.debug" % self.version)
        self.assertEqual(build_id(debug), wanted)
        self.assertIn(".debug_info", section_names(debug))

    # ---------------------------------------------------------------- installed

    def test_e_venv_install_runs_and_uninstalls_cleanly(self):
        venv = os.path.join(self.work, "venv")
        subprocess.run([gltest.PYTHON, "-m", "venv", "--system-site-packages", venv], check=True,
                       capture_output=True, timeout=300)
        before = tree(venv)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
        installed = subprocess.run(pip + ["install", "--no-index", "--no-cache-dir", self.wheel],
                                   capture_output=True, text=True, timeout=300)
        self.assertEqual(installed.returncode, 0, installed.stdout + installed.stderr)
        command = os.path.join(venv, "bin", "gculaunch")
        self.assertEqual(os.stat(command).st_mode & 0o777, 0o755)
        with open(command, "rb") as f:
            self.assertEqual(f.read(), self.members()[self.script_name()][1])
        python = os.path.join(venv, "bin", "python")
        self.run_job([command], python)
        self.run_job([python, "-m", "gculaunch"], python)
        removed = subprocess.run(pip + ["uninstall", "-y", "gculaunch"], capture_output=True,
                                 text=True, timeout=300)
        self.assertEqual(removed.returncode, 0, removed.stdout + removed.stderr)
        self.assertEqual(tree(venv), before)

    def test_f_target_install_runs(self):
        # pip cannot uninstall a --target install (its RECORD names bin/ as ../../bin):
        # removing the directory is the uninstall, and the TempDir does it.
        target = os.path.join(self.work, "target")
        installed = subprocess.run([gltest.PYTHON, "-m", "pip", "install", "--no-index",
                                    "--no-cache-dir", "--target", target, self.wheel],
                                   capture_output=True, text=True, timeout=300)
        self.assertEqual(installed.returncode, 0, installed.stdout + installed.stderr)
        self.assertEqual(sorted(os.listdir(target)),
                         ["bin", "gculaunch", "gculaunch-%s.dist-info" % self.version])
        self.run_job([os.path.join(target, "bin", "gculaunch")], gltest.PYTHON)
        # python -m gculaunch from the --target directory, as PYTHONPATH users run it.
        wrapper = os.path.join(self.work, "python-m-gculaunch")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nPYTHONPATH=%s exec %s -m gculaunch \"$@\"\n"
                    % (target, gltest.PYTHON))
        os.chmod(wrapper, 0o755)
        self.run_job([wrapper], gltest.PYTHON)

    def test_g_python_m_without_the_executable_says_so(self):
        target = os.path.join(self.work, "broken")
        subprocess.run([gltest.PYTHON, "-m", "pip", "install", "--no-index", "--no-cache-dir",
                        "--target", target, self.wheel], check=True, capture_output=True,
                       timeout=300)
        os.remove(os.path.join(target, "bin", "gculaunch"))
        done = subprocess.run([gltest.PYTHON, "-m", "gculaunch", "--version"], capture_output=True,
                              text=True, timeout=60, env=dict(os.environ, PYTHONPATH=target))
        self.assertEqual(done.returncode, 1)
        self.assertRegex(done.stderr, r"^gculaunch: the gculaunch executable is not in .*\(fix: "
                         r"pip install --force-reinstall the gculaunch wheel\)\n$")

    def test_h_unpacked_wheel_runs_in_bullseye(self):
        out = subprocess.run([os.path.join(gltest.SOURCE_DIR, "scripts", "make_test_root.sh"),
                              "bullseye", os.path.join(gltest.CACHE_DIR, "bullseye-root"),
                              "python3-minimal"], capture_output=True, text=True, timeout=1800)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        root = out.stdout.splitlines()[-1]
        unpacked = os.path.join(self.work, "unpacked")
        unpack(self.wheel, unpacked)
        command = os.path.join(unpacked, self.script_name())
        ranks = os.path.join(self.work, "ranks")
        os.mkdir(ranks)
        env = gltest.tagged_env(self.tag)
        # in_root.sh shows the host's /tmp (where the work directory is) at the same path, but
        # wants a program of the root itself: the root's sh execs the unpacked executable.
        done = subprocess.run(
            [os.path.join(gltest.SOURCE_DIR, "scripts", "in_root.sh"), root, "/bin/sh", "-c",
             'exec "$0" "$@"', command,
             "--standalone", "--master-port", "0", "--nproc-per-node", "2", "--device", "cpu",
             "--no-python", "/bin/sh", "-c",
             'cat /etc/debian_version > "$0/rank$RANK.$WORLD_SIZE"; ldd --version | head -n 1 '
             '>> "$0/rank$RANK.$WORLD_SIZE"', ranks],
            env=env, capture_output=True, text=True, timeout=240, cwd=self.work)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr[-3000:])
        self.assertEqual(sorted(os.listdir(ranks)), ["rank0.2", "rank1.2"])
        for name in os.listdir(ranks):
            with open(os.path.join(ranks, name)) as f:
                text = f.read()
            self.assertRegex(text, r"^11\.\d+\n.*2\.31\n$")
        self.assertEqual(gltest.wait_no_tagged(self.tag, 15), [], "a rank survived")

    # ---------------------------------------------------------------- refusals

    def refused(self, binary, pattern):
        done = subprocess.run([BUILD_WHEEL, "--binary", binary, "--out",
                               os.path.join(self.work, "refused")],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertRegex(done.stderr, r"^build_wheel: error: %s.*\(fix: [^)]*\)\n$" % pattern)
        self.assertFalse(os.path.exists(os.path.join(self.work, "refused"))
                         and os.listdir(os.path.join(self.work, "refused")))

    def test_i_refuses_what_it_must_not_pack(self):
        self.refused(os.path.join(self.work, "missing"), r"\S+/missing does not exist")
        text = os.path.join(self.work, "text")
        with open(text, "w") as f:
            f.write("#!/bin/sh\necho gculaunch 1.0\n")
        os.chmod(text, 0o755)
        self.refused(text, r"\S+/text is not a 64-bit little-endian ELF")
        damaged = os.path.join(self.work, "damaged")
        with open(gltest.BIN, "rb") as f, open(damaged, "wb") as out:
            out.write(f.read(4096))
        self.refused(damaged, r"\S+/damaged is a damaged ELF file")
        # A dynamic executable (the host's python3) would not run where manylinux1 promises.
        self.refused(os.path.realpath(sys.executable), r"\S+ is dynamically linked")
        usage = subprocess.run([BUILD_WHEEL, "--bogus"], capture_output=True, text=True)
        self.assertEqual(usage.returncode, 2)
        self.assertIn("unknown argument '--bogus'", usage.stderr)


if __name__ == "__main__":
    unittest.main()
