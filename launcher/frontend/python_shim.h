// The Python shim of --python-shim: files, where they go, and the variables
// that switch them on in a rank.
//
// The shim itself is launcher/frontend/python/python_shim/sitecustomize.py (read its opening
// comment for what it does and the rule that limits it to the rank process).
// It is compiled into the binary; the launch writes it once per run into
// PythonShimDir() and every rank's environment gets (AddPythonShimEnv, called
// by BuildRankEnv):
//
//   PYTHONPATH                  <shim dir>, then the PYTHONPATH the rank would have had
//   GCULAUNCH_SHIM_PARENT       gculaunch's pid: the shim acts only if it is its parent
//   GCULAUNCH_SHIM_DIR          <shim dir> (the entry the shim removes again)
//   GCULAUNCH_SHIM_FALLBACK     1, or 0 with --no-backend-fallback
//   GCULAUNCH_SHIM_MODULE       the profile's python_module (torch_gcu), or empty
//   GCULAUNCH_SHIM_PATCH_CUDA   1 unless the backend is nccl (CUDA and ROCm profiles)
//   GCULAUNCH_SHIM_VISIBLE_ENV  the profile's first visible-devices variable, or empty
//
// plus GCULAUNCH_BACKEND, which every rank has anyway.  The shim removes all
// GCULAUNCH_SHIM_* variables and its PYTHONPATH entry from its own process
// at start-up, so nothing a rank starts inherits them.
//
// Thread safety: pure functions.  The launch writes the files with sys::WriteSiteDir
// (launcher/sys/safe_files.h).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/env_map.h"
#include "base/error.h"
#include "launcher/frontend/types.h"

namespace gculaunch {

struct LaunchSpec;  // launch_spec.h

/// The shim's files as (file name, text), generated at build time from
/// launcher/frontend/python/python_shim/*.py and python/_gculaunch_site.py (what the shim
/// shares with the stack-dump hook) by cmake/embed_files.cmake, sorted by file name.
const std::vector<std::pair<std::string_view, std::string_view>>& PythonShimFiles();

/// The directory the shim lives in for a run: "<rank_file_root>/python-shim"
/// (below --log-dir/<run id>, or the launch's temporary directory).
std::string PythonShimDir(const RankRuntime& runtime);

/// Adds the variables above to a rank's environment; `env` already holds the
/// layers below gculaunch's own (its PYTHONPATH is the one kept behind the shim).
void AddPythonShimEnv(const LaunchSpec& spec, const RankRuntime& runtime, EnvMap& env);

/// Puts `dir` first on the PYTHONPATH of `env`.
void PrependPythonPath(const std::string& dir, EnvMap& env);

/// The GCULAUNCH_SHIM_* variable names (owned by gculaunch; --env may not set them).
const std::vector<std::string>& PythonShimVariables();

}  // namespace gculaunch
