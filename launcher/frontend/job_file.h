// Job files: `gculaunch --job FILE.yaml [FLAGS] [SCRIPT ARGS...]`.
//
// A job file holds what people otherwise keep in a shell script around
// torchrun: the script and its arguments, the number of ranks, the device
// profile, environment variables, the log directory, restarts, and the
// training config to use for each total card count (8 cards -> one config,
// 16 -> another), substituted for "{config}" in the script's arguments.
//
// Keys (all optional; see configs/examples/*.yaml):
//   script: PATH          the training script (or module with module: true)
//   args: [A, B, ...]     its arguments; "{config}" becomes the selected config
//   env: {NAME: value}    variables for every rank (below --env on the command line)
//   configs: {8: a.py, 16: b.py}
//                         world size (nnodes x nproc_per_node) -> config
//   <any flag>: value     every gculaunch flag by its long name, with '-' or '_'
//                         (nproc_per_node: 8, device: gcu, log_dir: logs,
//                         max_restarts: 3, standalone: true, python_shim: true, ...)
//
// Precedence, highest first: the command line, PET_* variables, the job file,
// platform variables, defaults.  A SCRIPT on the command line replaces the
// file's script and args (the command line's arguments are used).  The file's
// env comes before --env, so --env wins for the same name.
//
// Errors name the file, the line and the key:
//   job.yaml:4: unknown key 'nprocs' (fix: ... did you mean nproc_per_node?)
//   job.yaml:7: nproc_per_node 'eight': expected a positive number, auto, gpu or
//     cpu (fix: e.g. nproc_per_node: 8)
//
// Relative paths in the file (script, configs) are used as written, i.e.
// relative to the directory gculaunch runs in, exactly as in a shell script.
//
// Thread safety: pure functions (the file is read by the caller).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gculaunch {

struct CliOptions;  // cli.h

struct JobFile {
  struct Setting {
    std::string flag;    ///< canonical flag name, e.g. "nproc-per-node"
    std::string value;   ///< as text, e.g. "8" or "true"
    std::string source;  ///< "job.yaml:3: nproc_per_node" (key as written)
  };
  std::string origin;                                    ///< the path as given to --job
  std::optional<std::string> script;                     ///< script:
  std::string script_source;                             ///< "job.yaml:2"
  std::vector<std::string> args;                         ///< args:
  bool args_use_config = false;                          ///< some arg contains "{config}"
  std::vector<std::pair<std::string, std::string>> env;  ///< env:, in file order
  std::string env_source;                                ///< "job.yaml:9: env"
  std::map<int, std::string> configs;                    ///< configs:
  std::string configs_source;                            ///< "job.yaml:12"
  std::vector<Setting> settings;                         ///< every other key, in file order
};

/// Parses a job file's text; `origin` names it in messages.  Strict: unknown
/// keys and wrong types are errors naming origin:line and the key.
Result<JobFile> ParseJobFile(const std::string& yaml_text, const std::string& origin);

/// Merges `job` into `options` below what the command line and PET_*
/// variables already set (see the precedence above).  Flag values get the
/// command line's checks; their messages name the file, line and key.
/// Returns notes for the dry run (e.g. the script from the command line wins).
Result<std::vector<std::string>> ApplyJobFile(const JobFile& job, CliOptions& options);

/// SCRIPT_ARGS with "{config}" replaced by the config for `world_size` when
/// `options` carries configs (from a job file); otherwise the arguments
/// unchanged.  `note` receives a line for the dry run when a config was chosen.
/// Error when no config matches: it lists the card counts the file has.
Result<std::vector<std::string>> SelectConfig(const CliOptions& options, int world_size, int nnodes,
                                              int nproc_per_node, std::string* note);

}  // namespace gculaunch
