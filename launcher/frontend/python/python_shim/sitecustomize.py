# gculaunch's Python shim (gculaunch --python-shim).  Written by gculaunch into a
# per-run directory that it puts first on the ranks' PYTHONPATH, so that Python
# imports this file as `sitecustomize` while starting up, before the user's code.
#
# What it does, in the rank process only:
#   1. initialises the default process group with the device profile's backend
#      (GCULAUNCH_BACKEND, e.g. eccl) from the env:// variables gculaunch set, so
#      code that checks torch.distributed.is_initialized() first (MMEngine's
#      Runner/init_dist) skips its own CUDA-only set-up;
#   2. when the profile is not CUDA, points torch.cuda.set_device,
#      current_device and device_count at the vendor's module (torch_gcu) when it
#      has them, or at safe stand-ins (cpu), instead of failing with "Found no
#      NVIDIA driver";
#   3. when the backend is missing, falls back to gloo with one warning line,
#      unless gculaunch was given --no-backend-fallback (then: one error line,
#      exit 1).
#
# When it acts: only in the process gculaunch itself started.  gculaunch
# exports its own pid as GCULAUNCH_SHIM_PARENT; the shim acts only when
# os.getppid() equals it.  In every process that imports it, acting or not, it
# first removes its variables and its PYTHONPATH entry from os.environ, so
# processes started later (DataLoader workers and multiprocessing children
# started with "spawn", subprocesses) never load it at all; the parent-pid rule
# still guards anything that inherited the environment some other way.  A
# wrapper that runs Python as a child instead of exec'ing it therefore gets no
# shim (use `exec python ...` in wrapper scripts).
#
# The user's own sitecustomize (the next one on sys.path) still runs, first.
# The rank's state is visible as sys.modules["gculaunch_shim"] (backend,
# fell_back, vendor); no other process has that module.
#
# Python 3.6 compatible (T20 images ship 3.6 and 3.8).
import os
import sys

import _gculaunch_site as _site  # beside this file (shared with the stack-dump hook)

_VARS = ("GCULAUNCH_SHIM_PARENT", "GCULAUNCH_SHIM_DIR", "GCULAUNCH_SHIM_FALLBACK",
         "GCULAUNCH_SHIM_MODULE", "GCULAUNCH_SHIM_PATCH_CUDA", "GCULAUNCH_SHIM_VISIBLE_ENV")


def _fail(message):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(1)


def _backend_problem(dist, vendor_dist, backend):
    """None when torch.distributed (or the vendor's distributed module) knows `backend`."""
    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    try:
        dist.Backend(backend)
    except Exception as error:
        if vendor_dist is not None and hasattr(vendor_dist, "Backend"):
            try:
                vendor_dist.Backend(backend)
                return None
            except Exception:
                pass
        return _site.why(error)
    probe = {"gloo": "is_gloo_available", "nccl": "is_nccl_available",
             "mpi": "is_mpi_available"}.get(backend)
    if probe and not getattr(dist, probe)():
        return "this torch build has no %s support" % backend
    return None


def _patch_cuda(torch, vendor, visible_env):
    """torch.cuda.set_device/current_device/device_count for a non-CUDA profile."""
    state = {"device": int(os.environ.get("GCULAUNCH_DEVICE_INDEX", "0") or 0)}

    def set_device(device):
        index = getattr(device, "index", device)
        if vendor is not None and callable(getattr(vendor, "set_device", None)):
            vendor.set_device(index)
        if index is not None:
            state["device"] = int(index)

    def current_device():
        if vendor is not None and callable(getattr(vendor, "current_device", None)):
            return vendor.current_device()
        return state["device"]

    def device_count():
        if vendor is not None and callable(getattr(vendor, "device_count", None)):
            return vendor.device_count()
        if vendor is not None and visible_env:
            return len([x for x in os.environ.get(visible_env, "").split(",") if x.strip()])
        return 0

    torch.cuda.set_device = set_device
    torch.cuda.current_device = current_device
    torch.cuda.device_count = device_count


def _activate(settings):
    import types
    rank = os.environ.get("RANK", "?")
    backend = os.environ.get("GCULAUNCH_BACKEND", "") or "gloo"
    state = types.ModuleType("gculaunch_shim")
    state.backend = backend
    state.fell_back = False
    state.vendor = None
    sys.modules["gculaunch_shim"] = state
    try:
        import torch
        import torch.distributed as dist
    except Exception as error:
        sys.stderr.write("gculaunch: warning: --python-shim did nothing in rank %s: import torch "
                         "failed: %s\n" % (rank, _site.why(error)))
        return
    vendor = None
    vendor_dist = None
    vendor_error = None
    name = settings["GCULAUNCH_SHIM_MODULE"]
    if name:
        import importlib
        try:
            vendor = importlib.import_module(name)
            state.vendor = name
            try:
                vendor_dist = importlib.import_module(name + ".distributed")
            except ImportError:
                pass
        except Exception as error:
            vendor_error = _site.why(error)
    if settings["GCULAUNCH_SHIM_PATCH_CUDA"] == "1":
        _patch_cuda(torch, vendor, settings["GCULAUNCH_SHIM_VISIBLE_ENV"])
    problem = _backend_problem(dist, vendor_dist, backend)
    if problem is not None:
        if vendor_error is not None:
            problem += "; import %s failed: %s" % (name, vendor_error)
        if settings["GCULAUNCH_SHIM_FALLBACK"] == "0":
            _fail("gculaunch: error: rank %s: torch.distributed backend '%s' is not available (%s) "
                  "and --no-backend-fallback forbids using gloo (fix: run gculaunch check to see "
                  "what is missing, or drop --no-backend-fallback)" % (rank, backend, problem))
        sys.stderr.write("gculaunch: warning: rank %s: torch.distributed backend '%s' is not "
                         "available (%s); using gloo instead (--no-backend-fallback forbids "
                         "this)\n" % (rank, backend, problem))
        sys.stderr.flush()
        backend = "gloo"
        state.backend = backend
        state.fell_back = True
    if dist.is_initialized():
        return
    init = dist.init_process_group
    if not state.fell_back and vendor_dist is not None and vendor_dist is not dist:
        init = getattr(vendor_dist, "init_process_group", init)
    try:
        init(backend=backend, init_method="env://")
    except Exception as error:
        _fail("gculaunch: error: rank %s: --python-shim: init_process_group(backend='%s') failed: "
              "%s" % (rank, backend, _site.why(error)))


def _main():
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.environ.get("GCULAUNCH_SHIM_PARENT", "")
    settings = _site.forget(here, _VARS, os.environ.get("GCULAUNCH_SHIM_DIR", ""))
    _site.chain()
    if parent.isdigit() and int(parent) == os.getppid():
        _activate(settings)


_main()
