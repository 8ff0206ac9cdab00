// RenderDryRun: what `gculaunch --dry-run` prints.
//
// For every local rank: its argv (BuildRankArgv) and every variable gculaunch
// sets or overrides for it, i.e. base.ChangedIn(BuildRankEnv(...)), plus every variable
// of the rank contract (RankContractVariables) even when gculaunch's environment already
// held that value (a note names those) -- the same
// pure functions the real launch uses, fed with DryRunRuntime(spec).  Values
// that only a launch can know are stated placeholders (kPortPlaceholder, ...);
// when --master-port, --run-id and --log-dir are all given, there is none.
// Explanations are in the notes, never inside a value.  The layout line
// (LaunchSpec::layout) and the warnings come first: in the table right after
// its first line, in JSON as the first "notes" ("layout: ...", then
// "warning: ..."), in the env format as the first comments.
//
// Formats:
//   table  human-readable: topology, notes, then per rank argv and variables
//   json   one object: {"nnodes", "node_rank", "nproc_per_node", "world_size",
//          "master_addr", "master_port", "notes": [...], "ranks": [{"local_rank",
//          "rank", "argv": [...], "env": {...}}]}; master_port is a number, or
//          the placeholder string when the port is chosen at launch
//   env    per rank a "# rank N" comment and `export KEY='value'` lines that
//          bash/sh can source; notes as leading comments
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/env_map.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"

namespace gculaunch {

inline constexpr const char* kPortPlaceholder = "<port chosen at launch>";
inline constexpr const char* kProxyPortPlaceholder = "<proxy port chosen at launch>";
inline constexpr const char* kRunIdPlaceholder = "<run id generated at launch>";
inline constexpr const char* kScratchPlaceholder = "<temporary directory created at launch>";
inline constexpr const char* kLauncherPidPlaceholder = "<gculaunch pid>";

/// ResolveRankRuntime with the placeholders above as the launch's choices.
RankRuntime DryRunRuntime(const LaunchSpec& spec);

/// The dry run of `spec` in `format`; `base` is gculaunch's own environment.
/// Ends with a newline.
std::string RenderDryRun(const LaunchSpec& spec, const EnvMap& base, DryRunFormat format);
/// Same, in spec.dry_run_format.
std::string RenderDryRun(const LaunchSpec& spec, const EnvMap& base);

/// `text` in single quotes for POSIX shells ('it'\''s').
std::string ShellQuote(std::string_view text);

}  // namespace gculaunch
