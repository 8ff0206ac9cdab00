// RanksPython: what a launch learns about the ranks' interpreter before it starts them: the
// torch it finds (ranks_torch.h) and, when `python3` found on PATH is a version manager's shim
// (pyenv, asdf), the interpreter that shim runs.
//
// A shim is a shell script that picks an interpreter (PYENV_VERSION, a .python-version file,
// ...) and execs it.  Every rank would pay for it: on the 2-core test machine 4 ranks of an
// empty script take 1.47 s through pyenv's shim against 0.16 s with the interpreter itself.
// torchrun's ranks run sys.executable, the interpreter itself; so do gculaunch's once it is
// known.  The ranks then get, besides the interpreter as argv[0], what the shim's `exec`
// would have exported to them: the interpreter's directory first on PATH and, for pyenv,
// PYENV_VERSION (`pyenv exec` sets both), so that a `python3` or `pip` a rank runs finds the
// same one.  --python and PYTHON_EXEC are used exactly as given: only python3 found on PATH is
// looked behind.  launcher/sys/torch_probe.h learns the choice (from its cache, from the
// shim's own files, or by running the shim once).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/env_map.h"
#include "launcher/frontend/ranks_torch.h"

namespace gculaunch {

struct LaunchSpec;  // launch_spec.h

/// The interpreter a shim runs, as far as it is known.
struct ShimChoice {
  std::string shim;           ///< the shim (spec.python as found on PATH); empty: no shim
  std::string kind;           ///< "pyenv" or "asdf"
  std::string interpreter;    ///< the interpreter it runs; empty: not known (ranks run the shim)
  std::string pyenv_version;  ///< pyenv: PYENV_VERSION as `pyenv exec` exports it; else empty
  /// How it was chosen, for the dry run and the log: "PYENV_VERSION 3.11.7 from
  /// /home/u/.pyenv/version, read without running the shim", "found by running the shim once".
  std::string how;
};

struct RanksPython {
  RanksTorch torch;
  ShimChoice shim;
};

/// Puts what was learnt into the spec: spec.ranks_torch, and for a shim whose interpreter is
/// known: spec.python, spec.executable and argv[0] become the interpreter, spec.interpreter_shim
/// the shim, spec.interpreter_env the shim's variables (PATH from the ranks' PATH, `env` or
/// --env, with the interpreter's directory first; PYENV_VERSION), and a note says so.  A shim
/// whose interpreter is not known gets a note only: the ranks run the shim.
/// REQUIRES: spec from MakeLaunchSpec, not yet given a RanksPython.
void UseRanksPython(LaunchSpec& spec, const EnvMap& env, const RanksPython& python);

/// "interpreter /home/u/.pyenv/versions/3.11.7/bin/python3, which the shim
/// /home/u/.pyenv/shims/python3 runs (...)": the dry run's line; empty without a shim.
std::string DescribeInterpreter(const LaunchSpec& spec);

}  // namespace gculaunch
