// PythonFiles: what the ranks' interpreter would do, read from its files without starting it
// (the start path of a launch must not wait for an interpreter; torch_probe.h confirms these
// answers in the background and caches its own).
//
//   * ReadShim: whether python3 on PATH is a version manager's shim: pyenv's generated script
//     (`exec "<root>/libexec/pyenv" exec "$program" "$@"`) or asdf's (`exec ... asdf exec
//     ...`).
//   * ReadPyenvChoice: the interpreter pyenv's shim would run, chosen as `pyenv exec` chooses
//     it: PYENV_VERSION, else the first .python-version from the working directory up, else
//     <root>/version; then <root>/versions/<version>/bin/<program>.  Only the plain case is
//     answered (one installed version, named exactly); several versions, "system", a version
//     prefix, PYENV_DIR or a conda environment are left to the probe.
//   * ShimSelectionFiles: the files whose change can change a shim's choice (for the cache).
//   * ReadRanksTorch: the torch the interpreter would import for the rank, from the search
//     path its layout gives: sys.path[0] (the script's directory, or the working directory),
//     PYTHONPATH, the standard library, the user's site-packages when Python would add it, and
//     the site directories of the interpreter's prefix (Debian's dist-packages, a venv's
//     site-packages, and with include-system-site-packages its base's), in Python's order.
//     The first of them that holds a regular package torch/ answers with its version.py, read
//     as text.  Anything the files cannot settle (PYTHONHOME, an interpreter that is not a
//     Python binary, a torch that is a module or a namespace, no torch at all, which a .pth
//     file could still add) is State::kUnknown, with why: the launch then does what it does
//     for an unknown version, rather than wait.
//
// Thread safety: pure functions of the file system; no state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/env_map.h"
#include "launcher/frontend/ranks_python.h"
#include "launcher/frontend/ranks_torch.h"

namespace gculaunch::sys {

/// A version manager's shim.
struct Shim {
  std::string kind;        ///< "pyenv" or "asdf"
  std::string pyenv_root;  ///< pyenv: PYENV_ROOT as the shim exports it
};

/// The shim `path` is, or nullopt (a binary, any other script, a file that cannot be read).
std::optional<Shim> ReadShim(const std::string& path);

/// The variables that change a shim's choice (for the cache key).
inline constexpr const char* kShimVariables[] = {
    "PYENV_VERSION", "PYENV_DIR", "PYENV_ROOT",       "ASDF_PYTHON_VERSION",
    "ASDF_DATA_DIR", "ASDF_DIR",  "ASDF_CONFIG_FILE", "ASDF_DEFAULT_TOOL_VERSIONS_FILENAME"};

/// The files whose appearance or change can change the choice of `shim` run in `cwd` with
/// `env`: .python-version (pyenv) or .tool-versions (asdf) in `cwd` and each directory above,
/// pyenv's <root>/version, asdf's ~/.tool-versions.
std::vector<std::string> ShimSelectionFiles(const Shim& shim, const EnvMap& env,
                                            const std::string& cwd);

/// pyenv's choice for the shim `shim_path` run in `cwd` with `env`, as the header says;
/// nullopt when the files do not settle it (`why` then says what was in the way).
std::optional<ShimChoice> ReadPyenvChoice(const std::string& shim_path, const Shim& shim,
                                          const EnvMap& env, const std::string& cwd,
                                          std::string* why);

/// The torch `python` would import in a rank, as the header says.  `mode` and `where` are
/// the probe's (TorchProbeArgv): "script" and the rank's script, "cwd" (-m), "none" (-c).
/// `env` is the rank's environment, `cwd` its working directory.
RanksTorch ReadRanksTorch(const std::string& python, const std::string& mode,
                          const std::string& where, const EnvMap& env, const std::string& cwd);

}  // namespace gculaunch::sys
