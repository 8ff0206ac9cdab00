# What gculaunch's two sitecustomize hooks share: the stack-dump hook's
# (python/stack_hook/sitecustomize.py, --stack-dumps and --hang-timeout) and the Python
# shim's (python/python_shim/sitecustomize.py, --python-shim).  gculaunch writes this file
# beside each hook, into both per-run directories.  A hook imports it first thing, while its
# own directory is still on sys.path; when both hooks run, the second finds the first one's
# copy in sys.modules (the same text: both come from the one binary).
#
# Python 3.6 compatible (T20 images ship 3.6 and 3.8).
import os
import sys


def why(error):
    """One line for an exception: its type and the last line of its message."""
    lines = str(error).strip().splitlines()
    return type(error).__name__ + (": " + lines[-1] if lines else "")


def same_dir(a, b):
    try:
        return os.path.realpath(a or ".") == os.path.realpath(b)
    except Exception:
        return False


def forget(here, names, own_dir):
    """Removes a hook's traces from this process: its variables `names` from os.environ
    (returned as a dict, "" for those not set), its PYTHONPATH entry (`own_dir`, else
    `here`) and `here` from sys.path."""
    settings = {}
    for name in names:
        settings[name] = os.environ.pop(name, "")
    mine = own_dir or here
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    for i, part in enumerate(parts):
        if same_dir(part, mine):
            del parts[i]
            break
    if any(parts):
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        os.environ.pop("PYTHONPATH", None)
    sys.path[:] = [p for p in sys.path if not same_dir(p, here)]
    return settings


def chain():
    """Runs the next sitecustomize on sys.path (after the stack hook: the shim's, or the
    user's own; after the shim: the user's own)."""
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
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s\n"
                         % why(error))
