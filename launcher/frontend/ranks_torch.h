// RanksTorch: which torch the ranks' interpreter would import, learnt without importing it,
// and the NCCL error-handling variable that torch's own torchrun sets (issue 28).
//
// torchrun up to 2.1 gives its workers NCCL_ASYNC_ERROR_HANDLING=1; 2.2 and later give
// TORCH_NCCL_ASYNC_ERROR_HANDLING=1 instead, and warn in every rank that creates an NCCL
// process group when the old name is set.  Both keep a value the user already has.
// gculaunch does the same, which needs the ranks' torch version: the launcher layers (sys,
// app) run the interpreter once with the probe below (find_spec, never an import) and read
// torch/version.py as text; a cache keeps that off later launches (launcher/sys/torch_probe.h).
// This file holds the pure parts: the probe's program and the reading of its output, the
// parse of version.py, and the decision.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gculaunch {

struct LaunchSpec;  // launch_spec.h

struct RanksTorch {
  enum class State {
    kNotProbed,  ///< not looked for: --no-python, or nobody asked (both variables)
    kUnknown,    ///< the probe did not answer; `how` says why (both variables)
    kAbsent,     ///< the interpreter finds no torch package (both variables)
    kFound,      ///< torch `version`, from its torch/version.py
  };
  State state = State::kNotProbed;
  std::string version;  ///< kFound: __version__ as written ("1.13.1+cu117")
  /// How it was learnt, for the dry run and the log: "found by running /usr/bin/python3
  /// once; cached", "from the cache, found by running /usr/bin/python3", or why unknown.
  std::string how;
};

inline constexpr char kNcclAsyncErrorHandling[] = "NCCL_ASYNC_ERROR_HANDLING";
inline constexpr char kTorchNcclAsyncErrorHandling[] = "TORCH_NCCL_ASYNC_ERROR_HANDLING";

/// The __version__ that torch/version.py assigns ("__version__ = '2.6.0+cu124'", with or
/// without an annotation, either quote); nullopt when there is no such line.  The file is
/// read as text, never executed.
std::optional<std::string> ParseTorchVersionFile(std::string_view text);

/// Major and minor of a version ("2.2.0a0+git" -> {2, 2}); nullopt when it does not start
/// with two numbers.
std::optional<std::pair<int, int>> TorchMajorMinor(std::string_view version);

/// The NCCL error-handling variables a rank gets by default (each only when the environment
/// lacks it): torch < 2.2 NCCL_ASYNC_ERROR_HANDLING, torch >= 2.2
/// TORCH_NCCL_ASYNC_ERROR_HANDLING, both when the version is not known.
std::vector<std::string> NcclErrorHandlingVariables(const RanksTorch& torch);

/// For the dry run and `gculaunch check`: "torch 1.13.1 (found by running /usr/bin/python3
/// once; cached) -> NCCL_ASYNC_ERROR_HANDLING"; "torch unknown (...) -> both ...".
std::string DescribeRanksTorch(const RanksTorch& torch);

/// The probe: `python -c kTorchProbeSource MODE WHERE` (TorchProbeArgv) prints
/// "gculaunch-torch-probe: " and one JSON object: {"version_file": path or null,
/// "version_text": its first 64 KiB or null, "checks": [[path, signature], ...],
/// "executable": sys.executable, "pyenv_version": PYENV_VERSION or null}.  The checks
/// are version.py and, in every sys.path entry before the one holding torch (all of them when
/// there is none), each name torch could have there (torch, torch.py, torch.<suffix>; a
/// non-directory entry itself), each with its identity as the interpreter sees it
/// ("<dev>:<ino>:<size>:<mtime ns>:<ctime ns>", "absent" or "error"; sys::FileSignature
/// writes the same).  The interpreter reads version.py itself, so that a wrapper that runs
/// Python in another root (a container, a chroot) still reports its own torch.  MODE
/// "script": WHERE is the rank's script, whose real directory is sys.path[0] as in the rank;
/// "cwd": sys.path[0] is the current directory (python -m); "none": sys.path as -c leaves it.
extern const char kTorchProbeSource[];

/// The probe's command line for the spec's interpreter (the shim, when the spec runs a shim's
/// interpreter directly), or empty with --no-python.
std::vector<std::string> TorchProbeArgv(const LaunchSpec& spec);

struct TorchProbeReport {
  std::string version_file;  ///< torch/version.py beside the spec's origin; "": no torch
  std::optional<std::string> version_text;                  ///< its text, when it could be read
  std::vector<std::pair<std::string, std::string>> checks;  ///< (path, signature)
  std::string executable;     ///< sys.executable: the interpreter itself, behind any shim
  std::string pyenv_version;  ///< PYENV_VERSION as the interpreter saw it; empty: unset
};

/// The report in the probe's stdout (its last marked line), or nullopt.
std::optional<TorchProbeReport> ParseTorchProbeOutput(std::string_view out);

}  // namespace gculaunch
