#!/usr/bin/python3
"""clang-tidy over the given sources, skipping those whose result is known (tests/checks/tidy.sh).

A source's result is decided by its text, every header it includes (transitively, project and
system headers alike), its compile command, the .clang-tidy files and clang-tidy itself.  The
cache (BUILD/tidy-cache/) records, for each source that was checked clean, a key: a hash of all
of these.  A source whose key is recorded is not checked again; any other source is, and its
key is recorded only if clang-tidy reported nothing.  An empty cache checks every source, and
a finding is never cached, so the cache can skip work but never hide a problem.

The included headers are the compiler's own dependency output (clang++ -M with the source's
command from compile_commands.json, so that the headers are those clang-tidy parses).  Running
the preprocessor over every source takes about half a minute on two cores, so each recorded
key also keeps the list of files it was made from: when none of them changed (same contents)
and no file was added to or removed from the source tree (which could make an include find
another file), the preprocessor would find the same headers again, and the key is known
without running it.  Delete BUILD/tidy-cache to check everything.

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
import subprocess
import sys
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


def source_tree_listing(src, build):
    """Every file path under src outside build directories and .git: a file added or removed
    anywhere could change what an include finds."""
    paths = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__")
                         and os.path.realpath(os.path.join(root, d)) != os.path.realpath(build)
                         and not os.path.exists(os.path.join(root, d, "CMakeCache.txt")))
        paths += [os.path.join(root, f) for f in files]
    return sha256(*sorted(paths))


def config_hash(src, build, extra_args):
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
        parts += [path, open(path, "rb").read()]
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
    """BUILD/tidy-cache/<entry>/<key>.json: a clean result.  <entry> names the source, its
    command and the configuration; <key> hashes the contents of every file the source reads;
    the JSON file lists those files and the source tree listing it was recorded with."""

    def __init__(self, directory, config, tree, hashes):
        self.directory, self.config, self.tree, self.hashes = directory, config, tree, hashes

    def entry_dir(self, entry):
        command = entry.get("command") or shlex.join(entry["arguments"])
        return os.path.join(self.directory,
                            sha256(self.config, entry["directory"], command, entry["file"]))

    def key(self, deps, hashes=None):
        hashes = hashes or self.hashes
        parts = []
        for path in sorted(set(deps)):
            digest = hashes(path)
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
            try:
                with open(os.path.join(directory, name)) as f:
                    record = json.load(f)
            except (OSError, ValueError):
                continue
            if record.get("tree") == self.tree and self.key(record["deps"]) == name[:-5]:
                return True
        return False

    def lookup(self, entry):
        """(cached?, deps): deps is None when the fast path answered or clang++ -M failed."""
        if self.known_without_preprocessor(entry):
            return True, None
        try:
            deps = dependencies(entry)
        except RuntimeError:
            return False, None  # checked, and clang-tidy says why; not recorded
        key = self.key(deps)
        path = os.path.join(self.entry_dir(entry), f"{key}.json")
        if key is not None and os.path.exists(path):
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
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{key}.{os.getpid()}")
        with open(tmp, "w") as f:
            json.dump({"file": entry["file"], "tree": self.tree, "deps": sorted(set(deps))}, f)
        os.replace(tmp, os.path.join(directory, f"{key}.json"))
        records = sorted((os.path.join(directory, n) for n in os.listdir(directory)
                          if n.endswith(".json")), key=os.path.getmtime, reverse=True)
        for old in records[keep:]:
            os.remove(old)


def run_tidy(build, extra_args, path):
    """clang-tidy on one source: (clean?, its output)."""
    result = subprocess.run(["clang-tidy", "-p", build, "-quiet",
                             *[f"-extra-arg={a}" for a in extra_args], path],
                            capture_output=True, text=True)
    output = ANSI.sub("", result.stdout + result.stderr)
    clean = result.returncode == 0 and not FINDING.search(output)
    return clean, output


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

    hashes = FileHashes()
    cache = Cache(os.path.join(opts.build, "tidy-cache"),
                  config_hash(opts.src, opts.build, opts.extra_arg),
                  source_tree_listing(opts.src, opts.build), hashes)
    entries = [commands[os.path.realpath(p)] for p in opts.files]

    def check(entry):
        """(entry, None) when the cache knows the result, else (entry, (clean?, output)).
        A clean result is recorded at once: an interrupted run keeps what it did."""
        cached, deps = cache.lookup(entry)
        if cached:
            return entry, None
        clean, output = run_tidy(opts.build, opts.extra_arg, entry["file"])
        if clean:
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
