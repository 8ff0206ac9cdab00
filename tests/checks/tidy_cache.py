#!/usr/bin/python3
"""clang-tidy over the given sources, skipping those whose result is known (tests/checks/tidy.sh).

A source's result is decided by its text, every header it includes (transitively, project and
system headers alike), its compile command, the .clang-tidy files and clang-tidy itself.  The
cache records, for each source that was checked clean, a key: a hash of all of these.  A
source whose key is recorded is not checked again; any other source is, and its key is
recorded only if clang-tidy reported nothing.  An empty cache checks every source, and a
finding is never cached, so the cache can skip work but never hide a problem.

Where: $XDG_CACHE_HOME/gculaunch/tidy (else ~/.cache/gculaunch/tidy), the user's, not the
build directory's: a fresh clone or a new build directory on a machine that checked the same
sources before pays nothing.  So that keys hold across clones, the source and build
directories' own paths are written as <src> and <build> in everything hashed (the command,
the file, every header): what clang-tidy reports does not depend on where the clone is (the
HeaderFilterRegex of .clang-tidy matches the end of a path).

Trust: a record planted by someone else would hide a finding, so the cache is used only as
docs/security.md asks of gculaunch's torch-version cache: when no component of its path
(links followed) is owned by another user (root aside) or writable by others without the
sticky bit; missing directories are created 0700; a record is read only when it is a regular
file (not a link) of the user's, writable by nobody else, and written 0600 through a
temporary file.  A cache that cannot be used is named on one line and every source is checked.

The included headers are the compiler's own dependency output (clang++ -M with the source's
command from compile_commands.json, so that the headers are those clang-tidy parses).  Running
the preprocessor over every source takes about half a minute on two cores, so each recorded
key also keeps the list of files it was made from: when none of them changed (same contents)
and no file was added to or removed from the source tree (which could make an include find
another file), the preprocessor would find the same headers again, and the key is known
without running it.  Delete the cache directory to check everything.  Entries unused for 30
days are removed.

  tidy_cache.py --src SRC --build BUILD --jobs N --log LOG [--extra-arg ARG]... FILE...

Exit status 0 when every source is clean, 1 when clang-tidy reported a problem.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import threading
import time

FINDING = re.compile(r"(error|warning): ")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def sha256(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()


class FileHashes:
    """Content hashes of files, each file read once per run; None for a missing file."""

    def __init__(self):
        self.known = {}

    def __call__(self, path):
        if path not in self.known:
            try:
                with open(path, "rb") as f:
                    self.known[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                self.known[path] = None
        return self.known[path]


KEEP_DAYS = 30


def cache_directory(env):
    """$XDG_CACHE_HOME/gculaunch/tidy, else $HOME/.cache/gculaunch/tidy (absolute values only),
    or None."""
    xdg, home = env.get("XDG_CACHE_HOME", ""), env.get("HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "gculaunch", "tidy")
    if home.startswith("/"):
        return os.path.join(home, ".cache", "gculaunch", "tidy")
    return None


def foreign_writer(path, uid):
    """Who besides `uid` and root could change what `path` names: the first existing component
    of the path, and of the path with its links resolved, that another user owns or that its
    group or others may write without the sticky bit, described in a few words; None if
    nobody.  Missing components end the walk (they are created 0700)."""
    for full in (os.path.abspath(path), os.path.realpath(path)):
        prefix = "/"
        for part in [""] + full.strip("/").split("/"):
            prefix = os.path.join(prefix, part)
            try:
                st = os.lstat(prefix)
            except FileNotFoundError:
                break
            if st.st_uid not in (uid, 0):
                return "%s is owned by another user (uid %d)" % (prefix, st.st_uid)
            if stat.S_ISLNK(st.st_mode):
                continue  # its mode means nothing; where it leads is the second walk's
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
                return ("%s is writable by other users and not sticky (mode %04o)"
                        % (prefix, stat.S_IMODE(st.st_mode)))
    return None


def make_private_dirs(path):
    """Creates the missing components of `path`, each 0700."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass


def read_private(path, uid):
    """The text of `path` when it is a regular file (not a link) owned by `uid` and writable by
    nobody else; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != uid
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
            return None
        return f.read().decode(errors="replace")


class Places:
    """Paths as hashed and recorded: the source and build directories' own paths are <src>
    and <build>, so that another clone of the same sources finds the same keys."""

    def __init__(self, src, build):
        self.pairs = [(os.path.realpath(build), "<build>"), (os.path.realpath(src), "<src>"),
                      (os.path.abspath(build), "<build>"), (os.path.abspath(src), "<src>")]
        # Longest first: the build directory may lie inside the source directory.
        self.pairs.sort(key=lambda pair: -len(pair[0]))

    def portable(self, text):
        for path, name in self.pairs:
            text = re.sub(re.escape(path) + r"(?=/|\s|$|\")", name, text)
        return text

    def local(self, text):
        for path, name in self.pairs[::-1]:
            if text == name or text.startswith(name + "/"):
                return path + text[len(name):]
        return text


def source_tree_listing(src, build, places):
    """Every file path under src outside build directories and .git: a file added or removed
    anywhere could change what an include finds."""
    paths = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__")
                         and os.path.realpath(os.path.join(root, d)) != os.path.realpath(build)
                         and not os.path.exists(os.path.join(root, d, "CMakeCache.txt")))
        paths += [places.portable(os.path.join(root, f)) for f in files]
    return sha256(*sorted(paths))


def config_hash(src, build, extra_args, places):
    """What every source's result depends on: clang-tidy's version, the .clang-tidy files (in
    the tree and above it), the extra arguments and this script."""
    version = subprocess.run(["clang-tidy", "--version"], check=True, capture_output=True,
                             text=True).stdout
    configs = []
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != ".git"
                   and os.path.realpath(os.path.join(root, d)) != os.path.realpath(build)]
        if ".clang-tidy" in files:
            configs.append(os.path.join(root, ".clang-tidy"))
    parent = os.path.dirname(os.path.realpath(src))
    while True:
        if os.path.isfile(os.path.join(parent, ".clang-tidy")):
            configs.append(os.path.join(parent, ".clang-tidy"))
        if parent == os.path.dirname(parent):
            break
        parent = os.path.dirname(parent)
    parts = [version, *extra_args, open(__file__, "rb").read()]
    for path in sorted(configs):
        parts += [places.portable(path), open(path, "rb").read()]
    return sha256(*parts)


def dependency_command(entry):
    """The source's compile command, turned into clang++ -M (dependencies to stdout)."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    out, i = ["clang++"], 1
    while i < len(args):
        if args[i] in ("-o", "-MF", "-MT", "-MQ"):
            i += 2
            continue
        if args[i] not in ("-c", "-MD", "-MMD", "-MP"):
            out.append(args[i])
        i += 1
    return out + ["-M", "-Wno-unknown-warning-option"]


def dependencies(entry):
    """The files the preprocessor reads for this source (the source first), as absolute paths."""
    result = subprocess.run(dependency_command(entry), cwd=entry["directory"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"clang++ -M failed for {entry['file']}:\n{result.stderr}")
    rule = result.stdout.replace("\\\n", " ")
    rule = rule.split(":", 1)[1]
    paths = [p.replace("\\ ", " ") for p in re.split(r"(?<!\\)\s+", rule) if p]
    return [os.path.normpath(os.path.join(entry["directory"], p)) for p in paths]


class Cache:
    """DIRECTORY/<entry>/<key>.json: a clean result.  <entry> names the source, its command and
    the configuration; <key> hashes the contents of every file the source reads; the JSON file
    lists those files and the source tree listing it was recorded with.  Everything hashed or
    recorded names paths as Places.portable writes them."""

    def __init__(self, directory, config, tree, hashes, places, uid):
        self.directory, self.config, self.tree, self.hashes = directory, config, tree, hashes
        self.places, self.uid = places, uid

    def entry_dir(self, entry):
        args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
        if os.path.basename(args[0]) == "ccache":
            args = args[1:]  # a compiler launcher changes nothing clang-tidy sees
        command = shlex.join(args)
        parts = [self.places.portable(p) for p in (entry["directory"], command, entry["file"])]
        return os.path.join(self.directory, sha256(self.config, *parts))

    def key(self, deps, hashes=None):
        """deps: portable paths."""
        hashes = hashes or self.hashes
        parts = []
        for path in sorted(set(deps)):
            digest = hashes(self.places.local(path))
            if digest is None:
                return None
            parts += [path, digest]
        return sha256(*parts)

    def known_without_preprocessor(self, entry):
        """A recorded key whose files are all unchanged, in an unchanged tree listing."""
        directory = self.entry_dir(entry)
        if not os.path.isdir(directory):
            return False
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            try:
                record = json.loads(read_private(path, self.uid) or "")
            except ValueError:
                continue
            if (isinstance(record, dict) and record.get("tree") == self.tree
                    and self.key(record.get("deps", [])) == name[:-5]):
                os.utime(path)  # used: kept by prune()
                return True
        return False

    def lookup(self, entry):
        """(cached?, deps): deps is None when the fast path answered or clang++ -M failed."""
        if self.known_without_preprocessor(entry):
            return True, None
        try:
            deps = [self.places.portable(p) for p in dependencies(entry)]
        except RuntimeError:
            return False, None  # checked, and clang-tidy says why; not recorded
        key = self.key(deps)
        path = os.path.join(self.entry_dir(entry), f"{key}.json")
        if key is not None and read_private(path, self.uid) is not None:
            self.record(entry, deps)  # refresh the tree listing: the fast path works next time
            return True, deps
        return False, deps

    def record(self, entry, deps, keep=8):
        """Records a clean result; keeps the newest `keep` results of the source.  The files
        are read again: one edited while clang-tidy ran leaves nothing recorded."""
        key = self.key(deps) if deps is not None else None
        if key is None or key != self.key(deps, FileHashes()):
            return
        directory = self.entry_dir(entry)
        make_private_dirs(directory)
        tmp = os.path.join(directory, f".{key}.{os.getpid()}.{threading.get_ident()}")
        record = {"file": self.places.portable(entry["file"]), "tree": self.tree,
                  "deps": sorted(set(deps))}
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600),
                       "w") as f:
            json.dump(record, f)
        os.replace(tmp, os.path.join(directory, f"{key}.json"))
        records = []
        for name in os.listdir(directory):
            if not name.endswith(".json"):
                continue  # another run's temporary file
            try:
                records.append((os.path.getmtime(os.path.join(directory, name)), name))
            except OSError:
                pass  # another run's temporary file, renamed meanwhile
        for _, old in sorted(records, reverse=True)[keep:]:
            remove_quietly(os.path.join(directory, old))

    def prune(self, days=KEEP_DAYS):
        """Removes the entries (sources under a command and configuration) none of whose
        records was written or used for `days` days."""
        limit = time.time() - days * 86400
        for name in os.listdir(self.directory):
            entry = os.path.join(self.directory, name)
            try:
                records = [os.path.join(entry, n) for n in os.listdir(entry)]
                if max([os.path.getmtime(r) for r in records] or [0]) >= limit:
                    continue
            except OSError:
                continue
            for record in records:
                remove_quietly(record)
            try:
                os.rmdir(entry)
            except OSError:
                pass  # another run wrote a record meanwhile


def remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def run_tidy(build, extra_args, path):
    """clang-tidy on one source: (clean?, its output)."""
    result = subprocess.run(["clang-tidy", "-p", build, "-quiet",
                             *[f"-extra-arg={a}" for a in extra_args], path],
                            capture_output=True, text=True)
    output = ANSI.sub("", result.stdout + result.stderr)
    clean = result.returncode == 0 and not FINDING.search(output)
    return clean, output


def open_cache(opts):
    """The cache, or None (with one line saying why) when it cannot be trusted or made."""
    directory = cache_directory(os.environ)
    if directory is None:
        print("tidy: no cache: neither XDG_CACHE_HOME nor HOME is an absolute path (fix: set "
              "one); checking every source", file=sys.stderr)
        return None
    why = foreign_writer(directory, os.geteuid())
    if why is None:
        try:
            make_private_dirs(directory)
        except OSError as e:
            why = "cannot create it: %s" % e
    if why is not None:
        print("tidy: not using the cache %s: %s (fix: make it the user's alone, or set "
              "XDG_CACHE_HOME to a directory that is); checking every source"
              % (directory, why), file=sys.stderr)
        return None
    places = Places(opts.src, opts.build)
    cache = Cache(directory, config_hash(opts.src, opts.build, opts.extra_arg, places),
                  source_tree_listing(opts.src, opts.build, places), FileHashes(), places,
                  os.geteuid())
    cache.prune()
    return cache


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--log", required=True)
    parser.add_argument("--extra-arg", action="append", default=[])
    parser.add_argument("files", nargs="+")
    opts = parser.parse_args()
    start = time.monotonic()

    with open(os.path.join(opts.build, "compile_commands.json")) as f:
        commands = {os.path.realpath(e["file"]): e for e in json.load(f)}
    missing = [p for p in opts.files if os.path.realpath(p) not in commands]
    if missing:
        sys.exit(f"tidy: not in compile_commands.json: {' '.join(missing)}")

    cache = open_cache(opts)
    entries = [commands[os.path.realpath(p)] for p in opts.files]

    def check(entry):
        """(entry, None) when the cache knows the result, else (entry, (clean?, output)).
        A clean result is recorded at once: an interrupted run keeps what it did."""
        cached, deps = cache.lookup(entry) if cache else (False, None)
        if cached:
            return entry, None
        clean, output = run_tidy(opts.build, opts.extra_arg, entry["file"])
        if clean and cache:
            cache.record(entry, deps)
        return entry, (clean, output)

    # Threads share FileHashes: at worst a file is read twice, never hashed wrongly.
    with concurrent.futures.ThreadPoolExecutor(max(1, opts.jobs)) as pool:
        checked = [(e, r) for e, r in pool.map(check, entries) if r is not None]

    findings = set()
    with open(opts.log, "w") as log:
        for entry, (clean, output) in checked:
            log.write(f"== {entry['file']}\n{output}")
            if not clean:
                found = {line for line in output.splitlines() if FINDING.search(line)}
                findings |= found or {f"{entry['file']}: clang-tidy failed:\n{output}"}

    summary = (f"{len(entries)} sources: {len(checked)} checked, "
               f"{len(entries) - len(checked)} from the cache, "
               f"in {time.monotonic() - start:.0f} s")
    if findings:
        print("\n".join(sorted(findings)), file=sys.stderr)
        print(f"tidy: clang-tidy found problems ({summary}; full output: {opts.log})",
              file=sys.stderr)
        return 1
    print(f"tidy: {summary}, all clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
