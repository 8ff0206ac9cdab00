#include "launcher/frontend/stack_hook.h"

#include <csignal>

#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/python_shim.h"

namespace gculaunch {

int StackDumpSignal() { return SIGRTMIN + 10; }

std::string StackHookDir(const RankRuntime& runtime) {
  return runtime.rank_file_root + "/stack-hook";
}

std::string RankStackFile(const RankRuntime& runtime, int restart_count, int local_rank) {
  return runtime.rank_file_root + "/attempt_" + std::to_string(restart_count) + "/" +
         std::to_string(local_rank) + "/stacks.txt";
}

std::string RankHeartbeatFile(const RankRuntime& runtime, int restart_count, int local_rank) {
  return runtime.rank_file_root + "/attempt_" + std::to_string(restart_count) + "/" +
         std::to_string(local_rank) + "/heartbeat";
}

const std::vector<std::string>& StackHookVariables() {
  static const std::vector<std::string> vars = {"GCULAUNCH_STACKS_PARENT", "GCULAUNCH_STACKS_DIR",
                                                "GCULAUNCH_STACKS_SIGNAL", "GCULAUNCH_STACKS_FILE",
                                                "GCULAUNCH_HEARTBEAT_FILE"};
  return vars;
}

void AddStackHookEnv(const LaunchSpec& spec, const RankRuntime& runtime, int local_rank,
                     int restart_count, EnvMap& env) {
  const std::string dir = StackHookDir(runtime);
  PrependPythonPath(dir, env);
  env.Set("GCULAUNCH_STACKS_PARENT", runtime.launcher_pid);
  env.Set("GCULAUNCH_STACKS_DIR", dir);
  env.Set("GCULAUNCH_STACKS_SIGNAL", std::to_string(spec.stack_dump_signal));
  env.Set("GCULAUNCH_STACKS_FILE", RankStackFile(runtime, restart_count, local_rank));
  if (spec.hang_timeout_s > 0) {
    env.Set("GCULAUNCH_HEARTBEAT_FILE", RankHeartbeatFile(runtime, restart_count, local_rank));
  } else {
    env.Erase("GCULAUNCH_HEARTBEAT_FILE");
  }
}

}  // namespace gculaunch
