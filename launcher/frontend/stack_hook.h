// The stack-dump hook of --stack-dumps (and --hang-timeout): files, where they go, the
// signal, and the variables that switch it on in a rank.
//
// The hook itself is launcher/frontend/python/stack_hook/sitecustomize.py (read its opening comment
// for what it does and the rule that limits it to the rank process).  It is compiled into
// the binary; the launch writes it once per run into StackHookDir() and every rank's
// environment gets (AddStackHookEnv, called by BuildRankEnv after the Python shim's, so the
// hook comes first on PYTHONPATH and chains to the shim, then to the user's sitecustomize):
//
//   PYTHONPATH                <hook dir>, then the PYTHONPATH the rank would have had
//   GCULAUNCH_STACKS_PARENT   gculaunch's pid: the hook acts only if it is its parent
//   GCULAUNCH_STACKS_DIR      <hook dir> (the entry the hook removes again)
//   GCULAUNCH_STACKS_SIGNAL   the signal number (spec.stack_dump_signal)
//   GCULAUNCH_STACKS_FILE     <rank_file_root>/attempt_<n>/<local rank>/stacks.txt
//
// The hook removes all four GCULAUNCH_STACKS_* variables and its PYTHONPATH entry from its
// own process at start-up.  How gculaunch asks for a dump: launcher/ops/stack_dumper.h.
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

/// The hook's files as (file name, text), generated at build time from
/// launcher/frontend/python/stack_hook/*.py and python/_gculaunch_site.py (what the hook
/// shares with the Python shim) by cmake/embed_files.cmake, sorted by file name.
const std::vector<std::pair<std::string_view, std::string_view>>& StackHookFiles();

/// The signal gculaunch asks a rank to dump its stacks with: SIGRTMIN + 10 (44 with glibc).
/// A real-time signal nothing else of the job uses: never SIGUSR1/SIGUSR2, which gculaunch
/// forwards to the ranks (Slurm's pre-emption warning), and away from SIGRTMIN..+2, which
/// libraries that use timers or thread cancellation tend to take.
int StackDumpSignal();

/// The directory the hook lives in for a run: "<rank_file_root>/stack-hook".
std::string StackHookDir(const RankRuntime& runtime);

/// The file a rank's dumps are appended to:
/// "<rank_file_root>/attempt_<restart_count>/<local_rank>/stacks.txt" (next to its error file).
std::string RankStackFile(const RankRuntime& runtime, int restart_count, int local_rank);

/// The file a rank may touch to show progress with --hang-timeout (GCULAUNCH_HEARTBEAT_FILE):
/// "<rank_file_root>/attempt_<restart_count>/<local_rank>/heartbeat".
std::string RankHeartbeatFile(const RankRuntime& runtime, int restart_count, int local_rank);

/// Adds the variables above to a rank's environment (after AddPythonShimEnv, if any), and
/// GCULAUNCH_HEARTBEAT_FILE with --hang-timeout.
void AddStackHookEnv(const LaunchSpec& spec, const RankRuntime& runtime, int local_rank,
                     int restart_count, EnvMap& env);

/// The GCULAUNCH_STACKS_* variable names and GCULAUNCH_HEARTBEAT_FILE (owned by gculaunch;
/// --env may not set them).
const std::vector<std::string>& StackHookVariables();

}  // namespace gculaunch
