#include "launcher/spec/stack_hook.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gculaunch {

int StackDumpSignal() { return SIGRTMIN + 10; }

std::string StackHookDir(const RankRuntime& runtime) {
  return runtime.error_file_root + "/stack-hook";
}

std::string RankStackFile(const RankRuntime& runtime, int restart_count, int local_rank) {
  return runtime.error_file_root + "/attempt_" + std::to_string(restart_count) + "/" +
         std::to_string(local_rank) + "/stacks.txt";
}

std::string RankHeartbeatFile(const RankRuntime& runtime, int restart_count, int local_rank) {
  return runtime.error_file_root + "/attempt_" + std::to_string(restart_count) + "/" +
         std::to_string(local_rank) + "/heartbeat";
}

Status WriteStackHook(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Error{"--stack-dumps: cannot create '" + dir + "': " + ec.message(),
                 "check the permissions of --log-dir (or of the temporary directory)"};
  }
  for (const auto& [name, text] : StackHookFiles()) {
    const std::string path = dir + "/" + std::string(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      return Error{"--stack-dumps: cannot write '" + path + "': " + std::strerror(errno),
                   "check the permissions and free space of --log-dir (or of the temporary "
                   "directory)"};
    }
    std::filesystem::permissions(
        path,
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
            std::filesystem::perms::group_read | std::filesystem::perms::others_read,
        ec);
  }
  return OkStatus();
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
  const std::string python_path = env.GetOr("PYTHONPATH", "");
  env.Set("PYTHONPATH", python_path.empty() ? dir : dir + ":" + python_path);
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
