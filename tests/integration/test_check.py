"""`gculaunch check` against the real binary, the real Debian PyTorch (CPU,
gloo), loopback sockets, fake device trees (--sysroot) and linker caches made
by the real ldconfig."""
import json
import os
import re
import socket
import subprocess
import unittest

import gltest

PY = gltest.PYTHON


def check(args, env=None, timeout=120):
    tag = gltest.new_tag()
    return gltest.run([gltest.require_binary(), "check"] + args,
                      gltest.tagged_env(tag, extra=env), timeout=timeout)


def line(out, name):
    """The report line of check `name` (status, name, evidence)."""
    for text in out.splitlines():
        parts = text.split(None, 2)
        if len(parts) >= 2 and parts[1] == name and parts[0] in ("ok", "warn", "fail"):
            return text
    raise AssertionError("no %r line in:\n%s" % (name, out))


def status(out, name):
    return line(out, name).split(None, 2)[0]


def evidence(out, name):
    return line(out, name).split(None, 2)[2]


def make_gcu_tree(root, cards=8):
    os.makedirs(os.path.join(root, "dev"))
    for i in range(cards):
        open(os.path.join(root, "dev", "gcu%d" % i), "w").close()
    open(os.path.join(root, "dev", "gcuctl"), "w").close()
    os.makedirs(os.path.join(root, "sys", "module", "enflame"))
    with open(os.path.join(root, "sys", "module", "enflame", "version"), "w") as f:
        f.write("1.2.3\n")


def make_eccl_cache(root):
    """A real shared object with soname libeccl.so.1 and a linker cache that
    lists it, written by the real ldconfig into the fake tree."""
    libdir = os.path.join(root, "opt", "tops", "lib")
    os.makedirs(libdir)
    src = os.path.join(root, "eccl.c")
    with open(src, "w") as f:
        f.write("int ecclGetVersion(int *v) { *v = 2500; return 0; }\n")
    so = os.path.join(libdir, "libeccl.so.1")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libeccl.so.1", "-o", so, src],
                   check=True)
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    conf = os.path.join(root, "etc", "ld.so.conf")
    with open(conf, "w") as f:
        f.write(libdir + "\n")
    subprocess.run(["ldconfig", "-X", "-C", os.path.join(root, "etc", "ld.so.cache"),
                    "-f", conf], check=True)
    return so


def make_fake_torch_gcu(site, register=True):
    """A stand-in vendor module: imports, reports 8 cards and (optionally)
    registers the 'eccl' backend with torch.distributed, as torch_gcu does."""
    pkg = os.path.join(site, "torch_gcu")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("__version__ = '1.10.0+fake'\n"
                "def device_count():\n    return 8\n")
    with open(os.path.join(pkg, "distributed.py"), "w") as f:
        if register:
            f.write("import torch.distributed as dist\n"
                    "dist.Backend.register_backend('eccl', lambda *a, **k: None)\n")


class CheckTest(unittest.TestCase):
    def test_cpu_node_with_debian_torch_is_ready(self):
        r = check(["--device", "cpu", "--nproc-per-node", "2", "--python", PY, "--standalone"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(line(r.stdout, "interpreter"),
                         "ok    interpreter    %s (--python)" % PY)
        self.assertRegex(evidence(r.stdout, "torch"),
                         r"^torch 1\.13\S* \(Python 3\.\d+\.\d+\); the ranks get "
                         r"NCCL_ASYNC_ERROR_HANDLING=1 unless set, as this torch's torchrun does$")
        self.assertEqual(line(r.stdout, "backend"),
                         "ok    backend        torch.distributed backend 'gloo' is available")
        self.assertEqual(r.stdout.splitlines()[-1], "result: ready")

    def test_interpreter_comes_from_python_exec_like_a_launch(self):
        r = check(["--device", "cpu", "--standalone"], env={"PYTHON_EXEC": PY})
        self.assertEqual(line(r.stdout, "interpreter"),
                         "ok    interpreter    %s (PYTHON_EXEC)" % PY)
        self.assertEqual(status(r.stdout, "backend"), "ok")

    def test_made_up_backend_is_reported_unavailable(self):
        with gltest.TempDir() as tmp:
            profile = os.path.join(tmp, "madeup.yaml")
            with open(profile, "w") as f:
                f.write("name: madeup\nbackend: madeup\n")
            r = check(["--device", profile, "--python", PY, "--standalone"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(line(r.stdout, "backend"),
                         "fail  backend        torch.distributed backend 'madeup' is not "
                         "available: ValueError: Invalid backend: 'madeup'")
        self.assertIn("fix: install the PyTorch extension that registers 'madeup'", r.stdout)
        self.assertEqual(r.stdout.splitlines()[-1], "result: 1 failed: this node is not ready")

    def test_gcu_tree_without_torch_gcu_gives_the_users_errors(self):
        with gltest.TempDir() as root:
            make_gcu_tree(root)
            so = make_eccl_cache(root)
            r = check(["--device", "gcu", "--nproc-per-node", "8", "--python", PY,
                       "--sysroot", root, "--standalone"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(evidence(r.stdout, "cards"),
                         "8 device files /dev/gcu0 ... /dev/gcu7 for 8 ranks")
        self.assertEqual(evidence(r.stdout, "driver"),
                         "/sys/module/enflame present (version 1.2.3)")
        self.assertEqual(evidence(r.stdout, "library"), "libeccl.so.1 -> %s (ld.so.cache)" % so)
        self.assertEqual(evidence(r.stdout, "vendor-module"),
                         "import torch_gcu failed: ModuleNotFoundError: No module named "
                         "'torch_gcu'")
        self.assertEqual(evidence(r.stdout, "backend"),
                         "torch.distributed backend 'eccl' is not available after importing "
                         "torch_gcu: ValueError: Invalid backend: 'eccl'")

    def test_gcu_tree_with_a_vendor_module_that_registers_eccl_passes(self):
        with gltest.TempDir() as root:
            make_gcu_tree(root)
            make_eccl_cache(root)
            site = os.path.join(root, "site")
            make_fake_torch_gcu(site)
            r = check(["--device", "gcu", "--nproc-per-node", "8", "--python", PY,
                       "--sysroot", root, "--standalone", "--env", "PYTHONPATH=" + site,
                       "--format", "json"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        report = json.loads(r.stdout)
        checks = {c["name"]: c for c in report["checks"]}
        self.assertEqual(checks["vendor-module"]["evidence"],
                         "torch_gcu 1.10.0+fake imported; device_count() = 8")
        self.assertEqual(checks["backend"]["evidence"],
                         "torch.distributed backend 'eccl' is available after importing "
                         "torch_gcu")
        self.assertTrue(report["ok"])
        self.assertEqual(report["failed"], 0)

    def test_registered_only_by_the_vendor_import(self):
        with gltest.TempDir() as root:
            make_gcu_tree(root)
            site = os.path.join(root, "site")
            make_fake_torch_gcu(site, register=False)
            r = check(["--device", "gcu", "--nproc-per-node", "8", "--python", PY,
                       "--sysroot", root, "--standalone", "--env", "PYTHONPATH=" + site])
        self.assertEqual(status(r.stdout, "vendor-module"), "ok")
        self.assertEqual(status(r.stdout, "backend"), "fail")

    def test_odd_characters_in_exceptions_survive_the_probe(self):
        with gltest.TempDir() as root:
            site = os.path.join(root, "site")
            os.makedirs(os.path.join(site, "torch_gcu"))
            with open(os.path.join(site, "torch_gcu", "__init__.py"), "w") as f:
                f.write("raise RuntimeError('first line\\nC:\\\\dir \"q\" \\u00e9 end')\n")
            r = check(["--device", "gcu", "--nproc-per-node", "1", "--python", PY, "--dry-run",
                       "--standalone", "--env", "PYTHONPATH=" + site])
        self.assertEqual(evidence(r.stdout, "vendor-module"),
                         'import torch_gcu failed: RuntimeError: C:\\dir "q" \u00e9 end')

    def test_port_busy_and_free_on_loopback(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            busy = check(["--device", "cpu", "--python", PY, "--master-port", str(port)])
            worker = check(["--device", "cpu", "--python", PY, "--nnodes", "2", "--node-rank",
                            "1", "--master-addr", "127.0.0.1", "--master-port", str(port)])
        self.assertEqual(busy.returncode, 1, busy.stdout)
        self.assertEqual(evidence(busy.stdout, "master-port"),
                         "port %d is in use on this node: Address already in use" % port)
        self.assertEqual(worker.returncode, 0, worker.stdout)
        self.assertEqual(evidence(worker.stdout, "master-port"),
                         "127.0.0.1:%d accepts connections" % port)
        # The listener is gone now: the port is free on node 0, refused elsewhere.
        free = check(["--device", "cpu", "--python", PY, "--master-port", str(port)])
        self.assertEqual(line(free.stdout, "master-port"),
                         "ok    master-port    port %d is free to listen on (this node hosts "
                         "the store)" % port)
        refused = check(["--device", "cpu", "--python", PY, "--nnodes", "2", "--node-rank", "1",
                         "--master-addr", "127.0.0.1", "--master-port", str(port)])
        self.assertEqual(refused.returncode, 0, refused.stdout)
        self.assertEqual(line(refused.stdout, "master-port"),
                         "warn  master-port    nothing listens on 127.0.0.1:%d yet: Connection "
                         "refused" % port)

    def test_socket_interface_must_exist(self):
        r = check(["--device", "cpu", "--python", PY, "--nnodes", "2", "--master-addr",
                   "127.0.0.1", "--env", "GLOO_SOCKET_IFNAME=nosuchif9"])
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertRegex(evidence(r.stdout, "interface"),
                         r"^GLOO_SOCKET_IFNAME=nosuchif9: no interface nosuchif9 on this node "
                         r"\(it has .*\blo\b.*\)$")
        ok = check(["--device", "cpu", "--python", PY, "--nnodes", "2", "--master-addr",
                    "127.0.0.1", "--env", "GLOO_SOCKET_IFNAME=lo"])
        self.assertEqual(evidence(ok.stdout, "interface"), "GLOO_SOCKET_IFNAME=lo matches lo")

    def test_usage_errors_are_one_line_and_exit_2(self):
        r = check(["--device", "nosuch"])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr.splitlines(), [
            "gculaunch: --device 'nosuch': no device profile named 'nosuch' (fix: use one of "
            "gcu, cuda, ascend, mlu, rocm, cpu, auto, or a YAML file path)"])
        r = check(["--format", "env"])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "gculaunch: --format 'env': gculaunch check prints text or "
                                   "json (fix: use --format text or --format json)\n")

    def test_help(self):
        r = check(["--help"])
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("Usage: gculaunch check [FLAGS]"))


class LinkerCacheFormatsTest(unittest.TestCase):
    """The library check reads real caches of every layout glibc writes (new:
    glibc >= 2.32; compat = old + new: the default of older releases; old) the
    same way `ldconfig -p` does.  The caches are written by the real ldconfig."""

    def assert_cache_agrees(self, cache_format):
        with gltest.TempDir() as root:
            cache = os.path.join(root, "etc", "ld.so.cache")
            os.makedirs(os.path.dirname(cache))
            subprocess.run(["ldconfig", "-X", "-c", cache_format, "-C", cache], check=True)
            with open(cache, "rb") as f:
                magic = f.read(11)
            self.assertEqual(magic, b"glibc-ld.so" if cache_format == "new" else b"ld.so-1.7.0")
            listing = subprocess.run(["ldconfig", "-p", "-C", cache], capture_output=True,
                                     text=True, check=True).stdout
            first = None
            for text in listing.splitlines()[1:]:
                m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)$", text)
                if m and "x86-64" in m.group(2) and m.group(1).startswith("libc.so."):
                    first = (m.group(1), m.group(3))
                    break
            self.assertIsNotNone(first, listing[:2000])
            profile = os.path.join(root, "libc-probe.yaml")
            with open(profile, "w") as f:
                f.write("name: libc-probe\nbackend: gloo\ncollective_library: %s\n" % first[0])
            r = check(["--device", profile, "--sysroot", root, "--python", PY, "--standalone"])
        self.assertEqual(line(r.stdout, "library"),
                         "ok    library        %s -> %s (ld.so.cache)" % first)

    def test_new_format(self):
        self.assert_cache_agrees("new")

    def test_compat_format(self):
        self.assert_cache_agrees("compat")

    def test_old_format(self):
        self.assert_cache_agrees("old")


if __name__ == "__main__":
    unittest.main()
