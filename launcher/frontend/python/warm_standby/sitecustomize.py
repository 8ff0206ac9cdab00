# gculaunch's warm-rank hook (gculaunch --warm-ranks).  Written by gculaunch into a per-run
# directory that it puts first on a standby's PYTHONPATH, so that Python imports this file as
# `sitecustomize` while starting up, before the user's code.
#
# A standby is a rank started ahead of its attempt with the rank's real command line and the
# part of its environment that does not change between attempts.  In the standby process only
# (os.getppid() equals GCULAUNCH_STANDBY_PARENT) this hook:
#   1. imports the modules of --preload (GCULAUNCH_STANDBY_PRELOAD, comma-separated);
#   2. checks that none of them created a CUDA (or GCU) context: a standby must not hold a
#      device;
#   3. says "ready" by creating GCULAUNCH_STANDBY_READY (or, on a failure, writes one line
#      naming the module there, with a ".failed" suffix, and exits 75);
#   4. blocks, using no CPU, reading its stdin (a socket from gculaunch) until end of file:
#      the attempt's complete environment, "KEY=VALUE" items separated by NUL bytes.  End of
#      file with nothing read: gculaunch dismissed it; it exits 0;
#   5. makes os.environ exactly that environment, confirms the go by writing "go\n" back on
#      the same socket (gculaunch gives a standby that does not confirm in time up, kills it
#      and starts the rank cold; a confirmation it cannot write means exactly that: it exits
#      0), puts /dev/null on its stdin as a cold rank has, and returns.
# Then the next sitecustomize on sys.path runs (the stack hook's, the shim's, then the user's
# own), with the attempt's variables in place, and CPython runs __main__ itself: sys.argv,
# sys.path[0], tracebacks and exit statuses are a cold rank's.
#
# In every process that imports it the hook first removes its variables and its PYTHONPATH
# entry (the environment of step 5 has neither), so processes started later never load it.
#
# Python 3.6 compatible.
import os
import sys

import _gculaunch_site as _site  # beside this file (shared with the other hooks)

_VARS = ("GCULAUNCH_STANDBY_PARENT", "GCULAUNCH_STANDBY_DIR", "GCULAUNCH_STANDBY_PRELOAD",
         "GCULAUNCH_STANDBY_READY")


def _say(path, text):
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def _holds_device():
    """The device runtime that an import initialised, if any."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    try:
        if cuda is not None and cuda.is_initialized():
            return "CUDA"
    except Exception:
        pass
    gcu = sys.modules.get("torch_gcu")
    try:
        if gcu is not None and gcu.is_initialized():
            return "GCU"
    except Exception:
        pass
    return ""


def _preload(settings):
    import importlib
    ready = settings["GCULAUNCH_STANDBY_READY"]
    for name in [m for m in settings["GCULAUNCH_STANDBY_PRELOAD"].split(",") if m]:
        try:
            importlib.import_module(name)
        except BaseException as error:
            _say(ready + ".failed", "--preload %s failed: %s" % (name, _site.why(error)))
            os._exit(75)
    device = _holds_device()
    if device:
        _say(ready + ".failed", "--preload created a %s context" % device)
        os._exit(75)
    _say(ready, "ready")


def _wait_for_go():
    chunks = []
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        os._exit(0)  # dismissed
    env = {}
    for item in data.split(b"\0"):
        if not item:
            continue
        key, _, value = item.partition(b"=")
        env[os.fsdecode(key)] = os.fsdecode(value)
    os.environ.clear()
    os.environ.update(env)
    try:
        os.write(0, b"go\n")
    except OSError:
        os._exit(0)  # gculaunch gave this standby up meanwhile
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _main():
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.environ.get("GCULAUNCH_STANDBY_PARENT", "")
    settings = _site.forget(here, _VARS, os.environ.get("GCULAUNCH_STANDBY_DIR", ""))
    if parent.isdigit() and int(parent) == os.getppid() and settings["GCULAUNCH_STANDBY_READY"]:
        _preload(settings)
        _wait_for_go()
    _site.chain()


_main()
