#!/usr/bin/env python3
"""Writes gculaunch's wheel with the standard library only (no package index, no `wheel` or
`build` package): scripts/build_wheel.sh calls it.

  make_wheel.py --binary PATH --out DIR

The wheel, gculaunch-<version>-py3-none-manylinux1_x86_64.whl, holds
  gculaunch-<version>.data/scripts/gculaunch   the executable, stripped, zip mode 0755: pip
                                              copies it to the scripts directory (bin/) as it
                                              is, so `gculaunch` starts no interpreter
  gculaunch/__init__.py, gculaunch/__main__.py `python -m gculaunch ARGS` execs that executable
  gculaunch-<version>.dist-info/               METADATA, WHEEL, RECORD (sha256 of every file)

Why this tag: the executable is fully static and uses no Python API, so any CPython 3 on
x86-64 Linux may install it; manylinux1_x86_64 is the platform tag that pip 9 (Ubuntu 18.04),
pip 20 (bullseye) and pip 23+ (bookworm, trixie) all accept.  The binary is checked to be a
static x86-64 ELF before it is packed; a dynamic build would not run where manylinux1 promises.

The version is what `gculaunch --version` prints.  When the binary's debug file (named by its
.gnu_debuglink, beside it) is there and has the same build id, it is copied beside the wheel as
gculaunch-<version>.debug, its debug sections compressed (docs/packaging.md says how to use
it).  Zip entries carry a fixed
time (SOURCE_DATE_EPOCH, or 1980-01-01), so the same binary gives the same wheel.
"""
import argparse
import base64
import hashlib
import os
import re
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

NAME = "gculaunch"
TAG = "py3-none-manylinux1_x86_64"
SUMMARY = ("node-local launcher for distributed PyTorch training, a drop-in torchrun "
           "replacement: one static executable")
# A public PEP 440 version of the plain kind the project uses (1.2.3, 1.2.3rc1, 1.2.3.dev4).
VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$")

INIT_PY = '''"""gculaunch: the launcher is the executable this wheel installs into the scripts directory
(bin/); `python -m gculaunch ARGS` runs it."""
'''

MAIN_PY = '''"""python -m gculaunch ARGS: execs the gculaunch executable installed with this package."""
import os
import sys
import sysconfig


def candidates():
    """Where pip put the executable: the scripts directory of the install scheme whose library
    directory holds this package (a venv, the system, --user, --prefix), then bin/ beside the
    package, where pip install --target puts scripts."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for scheme in sysconfig.get_scheme_names():
        try:
            paths = sysconfig.get_paths(scheme)
        except Exception:  # a scheme this Python cannot expand (another OS's) is not ours
            continue
        libs = [paths.get("purelib"), paths.get("platlib")]
        if any(lib and os.path.realpath(lib) == os.path.realpath(site) for lib in libs):
            yield paths["scripts"]
    yield os.path.join(site, "bin")
    yield sysconfig.get_path("scripts")


def main():
    for directory in candidates():
        path = os.path.join(directory, "gculaunch")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            os.execv(path, [path] + sys.argv[1:])
    sys.exit("gculaunch: the gculaunch executable is not in the scripts directory of this "
             "Python (%s) (fix: pip install --force-reinstall the gculaunch wheel)"
             % sysconfig.get_path("scripts"))


if __name__ == "__main__":
    main()
'''


class Refused(Exception):
    """A one-line reason why no wheel was written."""


# ---- ELF: just enough to check the executable and to read its build id ----

def elf_read(path):
    """(header fields, sections as (name, type, offset, size)) of a 64-bit little-endian ELF."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise Refused("%s is not a 64-bit little-endian ELF executable (fix: pass the gculaunch "
                      "binary of an x86-64 build with --binary)" % path)
    try:
        (e_type, e_machine, _, _, e_phoff, e_shoff, _, _, e_phentsize, e_phnum, e_shentsize,
         e_shnum, e_shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
        segments = [struct.unpack_from("<I", data, e_phoff + i * e_phentsize)[0]
                    for i in range(e_phnum)]
        raw = [struct.unpack_from("<IIQQQQ", data, e_shoff + i * e_shentsize)
               for i in range(e_shnum)]
        names = raw[e_shstrndx][4] if raw else 0

        def name(offset):
            return data[names + offset:data.index(b"\0", names + offset)].decode()

        sections = [(name(s[0]), s[1], s[4], s[5]) for s in raw]
    except (struct.error, ValueError, IndexError):
        raise Refused("%s is a damaged ELF file (its headers point outside it) (fix: build "
                      "gculaunch again)" % path)
    return {"type": e_type, "machine": e_machine, "segments": segments}, sections, data


def build_id(path):
    """The GNU build id (hex) of an ELF file, from its SHT_NOTE sections; None without one."""
    _, sections, data = elf_read(path)
    for _, sh_type, offset, size in sections:
        if sh_type != 7:  # SHT_NOTE
            continue
        pos = offset
        while pos + 12 <= min(offset + size, len(data)):
            namesz, descsz, n_type = struct.unpack_from("<III", data, pos)
            name_at = pos + 12
            desc_at = name_at + (namesz + 3) // 4 * 4
            if n_type == 3 and data[name_at:name_at + namesz] == b"GNU\0":
                return data[desc_at:desc_at + descsz].hex()
            pos = desc_at + (descsz + 3) // 4 * 4
    return None


def check_static_x86_64(path):
    header, _, _ = elf_read(path)
    if 2 in header["segments"] or 3 in header["segments"]:  # PT_DYNAMIC, PT_INTERP
        raise Refused("%s is dynamically linked; a manylinux1 wheel needs the fully static "
                      "executable (fix: configure with -DGCULAUNCH_STATIC=ON and build again)"
                      % path)
    if header["machine"] != 62 or header["type"] != 2:  # EM_X86_64, ET_EXEC
        raise Refused("%s is not an x86-64 executable (ET_EXEC) (fix: pass the gculaunch binary "
                      "of a static x86-64 build with --binary)" % path)


def is_stripped(path):
    _, sections, _ = elf_read(path)
    return not any(n == ".symtab" or n.startswith(".debug_") for n, _, _, _ in sections)


def debuglink(path):
    """The file name in the .gnu_debuglink section, or None."""
    _, sections, data = elf_read(path)
    for name, _, offset, size in sections:
        if name == ".gnu_debuglink":
            return data[offset:data.index(b"\0", offset)].decode()
    return None


# ---- the wheel ----

def version_of(binary):
    try:
        out = subprocess.run([binary, "--version"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=30, check=True).stdout.decode()
    except (OSError, subprocess.SubprocessError) as e:
        raise Refused("%s --version failed: %s (fix: pass a gculaunch binary that runs here)"
                      % (binary, e))
    words = out.split()
    if len(words) != 2 or words[0] != NAME or not VERSION.match(words[1]):
        raise Refused("%s --version printed %r, not 'gculaunch <version>' (fix: pass the "
                      "gculaunch binary with --binary)" % (binary, out.strip()))
    return words[1]


def stripped_copy(binary, directory):
    """A stripped copy of `binary` in `directory` (symbols and debug sections gone; the build
    id note and the .gnu_debuglink stay)."""
    out = os.path.join(directory, NAME)
    strip = os.environ.get("STRIP", "strip")
    try:
        subprocess.run([strip, "--strip-all", "-o", out, binary], check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        raise Refused("%s --strip-all %s failed: %s %s (fix: install binutils, or name a "
                      "strip program in STRIP)" % (strip, binary, e, detail.decode().strip()))
    if not is_stripped(out):
        raise Refused("%s still has symbols or debug sections after %s --strip-all" % (out, strip))
    return out


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def zip_time():
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01, zip's first day
    return time.gmtime(max(epoch, 315532800))[:6]


def write_wheel(path, version, executable):
    dist_info = "%s-%s.dist-info" % (NAME, version)
    metadata = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n"
                "Requires-Python: >=3\n\n"
                "gculaunch starts one training process per accelerator card with torchrun's "
                "environment, hosts the rendezvous store, supervises and restarts the ranks "
                "and leaves nothing behind. The `gculaunch` command is a fully static x86-64 "
                "executable (Linux 3.2 or later); `python -m gculaunch` runs it too.\n"
                % (NAME, version, SUMMARY))
    wheel = ("Wheel-Version: 1.0\nGenerator: gculaunch packaging/make_wheel.py\n"
             "Root-Is-Purelib: false\nTag: %s\n" % TAG)
    with open(executable, "rb") as f:
        binary = f.read()
    entries = [("%s/__init__.py" % NAME, INIT_PY.encode(), 0o644),
               ("%s/__main__.py" % NAME, MAIN_PY.encode(), 0o644),
               ("%s-%s.data/scripts/%s" % (NAME, version, NAME), binary, 0o755),
               ("%s/METADATA" % dist_info, metadata.encode(), 0o644),
               ("%s/WHEEL" % dist_info, wheel.encode(), 0o644),
               ("%s/top_level.txt" % dist_info, (NAME + "\n").encode(), 0o644)]
    record = [record_line(name, data) for name, data, _ in entries]
    record.append("%s/RECORD,," % dist_info)
    entries.append(("%s/RECORD" % dist_info, ("\n".join(record) + "\n").encode(), 0o644))
    with zipfile.ZipFile(path, "w") as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, date_time=zip_time())
            info.external_attr = (stat.S_IFREG | mode) << 16  # what pip gives the unpacked file
            info.create_system = 3  # Unix: the mode bits above mean what they say
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data, compresslevel=9)


def copy_debug_file(binary, out_dir, version, wanted_id):
    """gculaunch-<version>.debug beside the wheel, when the binary's debug file is there and
    has its build id; returns its path or a line saying why there is none."""
    link = debuglink(binary)
    if link is None:
        return None, "the binary has no .gnu_debuglink"
    source = os.path.join(os.path.dirname(os.path.abspath(binary)), link)
    if not os.path.isfile(source):
        return None, "%s is not there" % source
    if build_id(source) != wanted_id:
        raise Refused("%s's build id %s is not the binary's %s (fix: build gculaunch again, "
                      "which writes both)" % (source, build_id(source), wanted_id))
    target = os.path.join(out_dir, "%s-%s.debug" % (NAME, version))
    # Its DWARF compressed (a third of the size); gdb, eu-stack and addr2line read it as it is.
    objcopy = os.environ.get("OBJCOPY", "objcopy")
    try:
        subprocess.run([objcopy, "--compress-debug-sections=zlib", source, target + ".tmp"],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as e:
        raise Refused("%s --compress-debug-sections %s failed: %s (fix: install binutils, or "
                      "name an objcopy program in OBJCOPY)" % (objcopy, source, e))
    if build_id(target + ".tmp") != wanted_id:
        raise Refused("compressing %s changed its build id" % source)
    os.chmod(target + ".tmp", 0o644)
    os.replace(target + ".tmp", target)
    return target, None


def make(binary, out_dir):
    binary = os.path.abspath(binary)
    if not os.path.isfile(binary):
        raise Refused("%s does not exist (fix: build it first: scripts/build.sh --target "
                      "gculaunch, or name one with --binary)" % binary)
    check_static_x86_64(binary)
    version = version_of(binary)
    wanted_id = build_id(binary)
    os.makedirs(out_dir, exist_ok=True)
    wheel = os.path.join(out_dir, "%s-%s-%s.whl" % (NAME, version, TAG))
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".wheel-") as tmp:
        executable = stripped_copy(binary, tmp)
        if build_id(executable) != wanted_id:
            raise Refused("stripping changed the build id of %s" % binary)
        partial = os.path.join(tmp, os.path.basename(wheel))
        write_wheel(partial, version, executable)
        os.replace(partial, wheel)
    debug, why_not = copy_debug_file(binary, out_dir, version, wanted_id)
    print("wheel: %s (%.1f MB, build id %s)" % (wheel, os.path.getsize(wheel) / 1e6, wanted_id))
    print("debug file: %s" % (debug or "none (%s)" % why_not))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="the gculaunch executable to pack")
    parser.add_argument("--out", required=True, help="the directory the wheel is written to")
    opts = parser.parse_args()
    try:
        make(opts.binary, opts.out)
    except (Refused, OSError) as e:
        sys.exit("build_wheel: error: %s" % e)


if __name__ == "__main__":
    main()
