# gculaunch's stack-dump hook (gculaunch --stack-dumps, and --hang-timeout).  Written by
# gculaunch into a per-run directory that it puts first on the ranks' PYTHONPATH, so that
# Python imports this file as `sitecustomize` while starting up, before the user's code.
#
# What it does, in the rank process only: registers faulthandler on the real-time signal
# gculaunch chose (GCULAUNCH_STACKS_SIGNAL), for all threads, writing to the rank's own file
# (GCULAUNCH_STACKS_FILE, opened for appending).  On that signal the interpreter writes every
# thread's Python stack there from inside the signal handler, without stopping the rank
# (it works while the rank waits in C code, e.g. inside a collective).  gculaunch reads what
# was appended once the file stops growing (faulthandler writes no end marker).
#
# When it acts: only in the process gculaunch itself started (os.getppid() equals
# GCULAUNCH_STACKS_PARENT), as --python-shim does.  In every process that imports it, it
# first removes its variables and its PYTHONPATH entry from os.environ and sys.path, so
# processes started later (spawned DataLoader workers, subprocesses) never load it.  A
# forked DataLoader worker inherits the handler and the file: gculaunch therefore signals
# the rank's pid only, never its process group.
#
# Then the next sitecustomize on sys.path runs (the --python-shim's, then the user's own).
# The rank's state is visible as sys.modules["gculaunch_stacks"] (signal, path).
#
# Python 3.6 compatible.
import os
import sys

_VARS = ("GCULAUNCH_STACKS_PARENT", "GCULAUNCH_STACKS_DIR", "GCULAUNCH_STACKS_SIGNAL",
         "GCULAUNCH_STACKS_FILE")


def _same_dir(a, b):
    try:
        return os.path.realpath(a or ".") == os.path.realpath(b)
    except Exception:
        return False


def _forget(here, hook_dir):
    """Removes the hook's traces from this process's environment and sys.path."""
    settings = {}
    for name in _VARS:
        settings[name] = os.environ.pop(name, "")
    mine = hook_dir or here
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    for i, part in enumerate(parts):
        if _same_dir(part, mine):
            del parts[i]
            break
    if any(parts):
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if not _same_dir(p, here)]
    return settings


def _chain():
    """Runs the next sitecustomize on sys.path (the shim's or the user's own)."""
    import importlib.machinery
    import importlib.util
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # as site.py itself reports it, and go on
        lines = str(error).strip().splitlines()
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s%s\n"
                         % (type(error).__name__, ": " + lines[-1] if lines else ""))


def _register(settings):
    import faulthandler
    import types
    rank = os.environ.get("RANK", "?")
    try:
        signum = int(settings["GCULAUNCH_STACKS_SIGNAL"])
        out = open(settings["GCULAUNCH_STACKS_FILE"], "a")
        faulthandler.register(signum, file=out, all_threads=True, chain=False)
    except Exception as error:
        sys.stderr.write("gculaunch: warning: rank %s: no stack dumps: %s: %s\n"
                         % (rank, type(error).__name__, error))
        return
    state = types.ModuleType("gculaunch_stacks")
    state.signal = signum
    state.path = settings["GCULAUNCH_STACKS_FILE"]
    state.file = out  # faulthandler writes to its descriptor: keep it open
    sys.modules["gculaunch_stacks"] = state


def _main():
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.environ.get("GCULAUNCH_STACKS_PARENT", "")
    settings = _forget(here, os.environ.get("GCULAUNCH_STACKS_DIR", ""))
    if parent.isdigit() and int(parent) == os.getppid():
        _register(settings)
    _chain()


_main()
