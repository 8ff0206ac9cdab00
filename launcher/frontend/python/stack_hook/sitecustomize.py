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

import _gculaunch_site as _site  # beside this file (shared with the shim)

_VARS = ("GCULAUNCH_STACKS_PARENT", "GCULAUNCH_STACKS_DIR", "GCULAUNCH_STACKS_SIGNAL",
         "GCULAUNCH_STACKS_FILE")


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
    settings = _site.forget(here, _VARS, os.environ.get("GCULAUNCH_STACKS_DIR", ""))
    if parent.isdigit() and int(parent) == os.getppid():
        _register(settings)
    _site.chain()


_main()
